"""A shared server's clients: each bound to its own run and its own program folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicy_mcp.host.authority import Host
from tests.support.host import GOOD, SEED, rejected


def _workspace(root: Path, name: str) -> Path:
    ws = root / name
    (ws / "program").mkdir(parents=True)
    (ws / "program" / "policy.py").write_text(GOOD)
    return ws


@pytest.fixture
def shared(data_dir: Path, tasks_dir: Path, tmp_path: Path) -> Iterator[Host]:
    for run in ("ra", "rb"):  # as launchers make them, before their agents start
        with Host(data_dir, tasks_dirs=[tasks_dir], bind=("mini", run), seed=SEED) as h:
            h.prepare_run()
    host = Host(data_dir, tasks_dirs=[tasks_dir], bound_clients=True)
    assert host.bindings is not None
    host.bindings.add("c:a", "mini", "ra", _workspace(tmp_path, "ws-a"))
    host.bindings.add("c:b", "mini", "rb", _workspace(tmp_path, "ws-b"))
    yield host
    host.close()


def test_each_client_reaches_its_own_run_only(shared: Host, tmp_path: Path) -> None:
    assert shared.start_run("mini", client="c:a").run_id == "ra"
    assert shared.start_run("mini", client="c:b").run_id == "rb"
    assert [t.id for t in shared.list_tasks(client="c:a")] == ["mini"]
    mine = shared.submit("ra", "0", program_dir=str(tmp_path / "ws-a" / "program"), client="c:a")
    assert shared.wait("ra", mine, 60, client="c:a").status == "complete"
    # The other run does not exist for it, whatever it asks.
    for call in (
        lambda: shared.run_status("rb", client="c:a"),
        lambda: shared.submit("rb", "0", files={"policy.py": GOOD}, client="c:a"),
        lambda: shared.feedback("rb", "s1", client="c:a"),
        lambda: shared.finalize("rb", ["s1"], client="c:a"),
        lambda: shared.feedback("ra", mine, client="c:b"),
    ):
        rejected(call, "unknown_run")
    # Its programs come from its own workspace only: not the other's, not the one above.
    for folder in (tmp_path / "ws-b" / "program", tmp_path / "ws-b", tmp_path):
        error = rejected(
            lambda f=folder: shared.submit("ra", "1", program_dir=str(f), client="c:a"),
            "program_invalid",
        )
        assert "outside" in error.message
    assert shared.run_status("ra", client="c:a").submissions_used == 1
    assert shared.run_status("rb", client="c:b").submissions_used == 0


def test_a_client_without_a_binding_reaches_nothing(shared: Host) -> None:
    for client in (None, "c:x"):
        rejected(lambda c=client: shared.start_run("mini", client=c), "unknown_run")
        rejected(lambda c=client: shared.run_status("ra", client=c), "unknown_run")
    assert shared.bindings is not None
    shared.bindings.drop("c:a")  # its session is over
    rejected(lambda: shared.run_status("ra", client="c:a"), "unknown_run")
    assert shared.run_status("rb", client="c:b").run_id == "rb"


def test_bindings_that_cannot_be_are_refused_and_runs_are_not_made(
    shared: Host, tmp_path: Path
) -> None:
    assert shared.bindings is not None
    with pytest.raises(ValueError, match="unknown task"):
        shared.bindings.add("c:c", "nope", "rc", tmp_path)
    with pytest.raises(ValueError, match="another client"):
        shared.bindings.add("c:c", "mini", "ra", tmp_path)
    with pytest.raises(ValueError, match="run name"):
        shared.bindings.add("c:c", "mini", "../x", tmp_path)
    shared.bindings.add("c:c", "mini", "rc", tmp_path)
    error = rejected(lambda: shared.start_run("mini", client="c:c"), "unknown_run")
    assert "not ready" in error.message
    assert shared.store.get_run("rc") is None  # its launcher makes it, with its seed
