from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation.processes import ProcessExecutor
from evopolicy_mcp.host.authority import Host
from tests.support.agents import SECRET
from tests.support.host import SEED, write_task
from tests.support.kernel import Kernel
from tests.support.server import make_tasks_dir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# Suites of policies that misbehave on purpose: each runs on the host's own runner (thread
# executor) and on worker processes (process executor), which have runners of their own.
HOSTILE_SUITES = ("tests.runner.", "tests.kernel.")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel" in metafunc.fixturenames and metafunc.module.__name__.startswith(HOSTILE_SUITES):
        metafunc.parametrize("kernel", ["thread", "process"], indirect=True, scope="module")


@pytest.fixture(scope="module")
def kernel(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kernel]:
    """A real runner and snapshot store, shared by the tests of one module; with the
    ``process`` parameter, evaluations run on two worker processes instead."""
    executor = ProcessExecutor(2) if getattr(request, "param", "thread") == "process" else None
    k = Kernel(tmp_path_factory.mktemp("store"), executor=executor)
    yield k
    k.close()


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    """The small CartPole tasks: ``mini`` of the host tests and those of the server tests."""
    return make_tasks_dir(write_task(tmp_path / "tasks"))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def host(data_dir: Path, tasks_dir: Path) -> Iterator[Host]:
    h = Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED)
    yield h
    h.close()


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH with a fake-CLI directory first, a secret in the operator's environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EVOPOLICY_TEST_SECRET", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-for-claude")
    monkeypatch.setenv("IS_SANDBOX", "1")
    return bin_dir
