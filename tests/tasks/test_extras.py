"""A task whose extra is missing: listed, marked, and every way in says what to install.

The checks run in a real environment without the extra: this one, with the extra's
distributions left out (a directory of links to everything else on sys.path), so
they hold whether or not the extra is installed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from evopolicy_mcp.tasks.extras import declared_extras, missing_packages

ROOT = Path(__file__).resolve().parents[2]
EXTRA, DISTRIBUTION, MODULE = "atari", "ale-py", "ale_py"

TASK = textwrap.dedent(
    """
    id = "arcade"
    title = "Pong from the ALE"
    summary = "one line"
    description = "for the agent"
    adapter = "gymnasium"
    extra = "atari"
    baseline = "random"

    [parameters]
    env_id = "ALE/Pong-v5"
    package = "ale_py"

    [score]
    failure_value = -21.0

    [budget]
    episodes = 10
    submissions = 2
    per_submission = 5
    pool = 10

    [validation]
    episodes = 5
    candidates = 2

    [assessment]
    episodes = 5
    """
)


def _top_level(distribution: str) -> set[str]:
    try:
        files = metadata.files(distribution) or []
    except metadata.PackageNotFoundError:
        return set()
    return {f.parts[0] for f in files if f.parts}


def reduced_environment(distribution: str, folder: Path) -> dict[str, str]:
    """Environment variables for ``python -S`` that see every installed package but
    ``distribution``, and this source tree."""
    site = folder / "site"
    site.mkdir()
    left_out = _top_level(distribution)
    for entry in sys.path:
        origin = Path(entry)
        if not entry or not origin.is_dir() or "site-packages" not in origin.parts:
            continue
        for item in origin.iterdir():
            target = site / item.name
            if item.name in left_out or target.exists() or item.suffix == ".pth":
                continue
            target.symlink_to(item)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site)])
    return env


@pytest.fixture(scope="module")
def without_extra(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The reduced environment without the extra's distribution, with the task above."""
    env = reduced_environment(DISTRIBUTION, tmp_path_factory.mktemp("reduced"))
    tasks = tmp_path_factory.mktemp("tasks")
    (tasks / "arcade.toml").write_text(TASK)
    env["EVOPOLICY_TASKS"] = str(tasks)
    return env


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_reduced_environment_really_lacks_the_extra(without_extra: dict[str, str]) -> None:
    probe = run(without_extra, "-c", f"import {MODULE}")
    assert probe.returncode != 0 and "No module named" in probe.stderr
    ok = run(without_extra, "-c", "import gymnasium, numpy, evopolicy_mcp.tasks")
    assert ok.returncode == 0, ok.stderr


def test_the_task_is_listed_and_marked_with_what_to_install(without_extra: dict[str, str]) -> None:
    listed = run(without_extra, "-m", "evopolicy_mcp", "tasks")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.strip().startswith("arcade"))
    assert line.endswith("(not installed)")
    assert "[extra: atari - NOT INSTALLED]" in listed.stdout
    assert 'pip install "evopolicy-mcp[atari]"' in listed.stdout.splitlines()[-1]


def test_evaluating_it_says_exactly_what_to_install_in_one_line(
    without_extra: dict[str, str],
) -> None:
    done = run(without_extra, "-m", "evopolicy_mcp", "evaluate", "--task", "arcade")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "task 'arcade' needs the [atari] extra, which is not installed here" in done.stderr
    assert 'pip install "evopolicy-mcp[atari]"' in done.stderr and "ale-py" in done.stderr


def test_describing_or_starting_it_through_the_host_says_the_same(
    without_extra: dict[str, str], tmp_path: Path
) -> None:
    code = textwrap.dedent(
        f"""
        from evopolicy_mcp.host.authority import Host, HostError
        host = Host({str(tmp_path / "data")!r})
        info = [t for t in host.list_tasks() if t.id == "arcade"][0]
        print("available", info.available)
        for call in (host.describe_task, host.start_run):
            try:
                call("arcade")
            except HostError as exc:
                print(exc.code, "|", exc.message)
        print("runs", len(host.store.list_runs()))
        host.close()
        """
    )
    done = run(without_extra, "-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "available False"
    for line in lines[1:3]:
        assert line.startswith("task_unavailable | task 'arcade' needs the [atari] extra")
        assert 'pip install "evopolicy-mcp[atari]"' in line
    assert lines[3] == "runs 0"  # nothing was started


def test_the_kit_says_which_package_is_missing_when_an_extra_is_bypassed(
    without_extra: dict[str, str],
) -> None:
    code = (
        "from evopolicy_mcp.adapters.protocol import load_adapter, AdapterError\n"
        "try:\n"
        "    load_adapter('gymnasium').spec({'env_id': 'ALE/Pong-v5', 'package': 'ale_py'})\n"
        "except AdapterError as exc:\n"
        "    print(exc)\n"
    )
    done = run(without_extra, "-c", code)
    assert "ALE/Pong-v5 needs the package 'ale_py', which cannot be imported" in done.stdout


def test_extras_are_read_from_the_package_metadata() -> None:
    declared = declared_extras()
    assert declared is not None and {"box2d", "mujoco", "minigrid", "highway", "atari"} <= set(
        declared
    )
    assert missing_packages("dev") == []  # the tests run with it
    assert missing_packages("no-such-extra") == []


# One shipped task of each family whose simulator is not a Gymnasium package, without it.
SHIPPED = [
    ("dmc", "dm-control", "dmc/cheetah-run"),
    ("nethack", "nle", "nethack/score"),
    ("robotics", "gymnasium-robotics", "robotics/fetch-reach"),
    ("metaworld", "metaworld", "metaworld/reach"),
    ("robosuite", "robosuite", "robosuite/lift"),
    ("vizdoom", "vizdoom", "vizdoom/basic"),
    ("retro", "stable-retro", "retro/airstriker"),
]


@pytest.mark.parametrize(("extra", "distribution", "task_id"), SHIPPED)
def test_a_shipped_task_whose_extra_is_missing_says_what_to_install(
    extra: str, distribution: str, task_id: str, tmp_path: Path
) -> None:
    env = reduced_environment(distribution, tmp_path)
    listed = run(env, "-m", "evopolicy_mcp", "tasks", "--family", task_id.split("/")[0])
    assert listed.returncode == 0, listed.stderr
    assert f"[extra: {extra} - NOT INSTALLED]" in listed.stdout
    done = run(env, "-m", "evopolicy_mcp", "evaluate", "--task", task_id)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert f"task {task_id!r} needs the [{extra}] extra" in done.stderr
    assert f'pip install "evopolicy-mcp[{extra}]"' in done.stderr and distribution in done.stderr
