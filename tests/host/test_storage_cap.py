"""Bounded storage of bulky feedback: the oldest submissions' step traces and episode
files are evicted past a run's cap; scores, summaries and the newest submission stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from evopolicy_mcp.cli.main import main
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.store import eviction
from tests.support.host import GOOD, RANDOM, finish, rejected, write_task

# About 40 KiB: less than the traces of two CartPole submissions, more than one's.
TINY_CAP = "storage_mb = 0.04\ntrace_episodes = 2\ntrace_steps = 200"


def _bulky(h: Host, run: str, sub: str) -> int:
    return eviction.bulky_bytes(h.store, run, sub)


def test_older_submissions_lose_their_traces_first_and_the_newest_keeps_its_own(
    data_dir: Path, tmp_path: Path
) -> None:
    tasks = write_task(tmp_path / "capped", "capped", extra=TINY_CAP)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("capped").run_id
        first = finish(h, run, "0:2", {"policy.py": GOOD})
        assert first.evicted is None and _bulky(h, run, first.submission_id) > 0
        one_trace = h.feedback(run, first.submission_id, episode=0).traces
        assert one_trace and len(one_trace[0].steps) > 20
        finish(h, run, "0:2", {"policy.py": RANDOM})
        last = finish(h, run, "2:4", {"policy.py": GOOD})
        # The newest keeps everything; the oldest lost its traces, never its numbers.
        assert last.evicted is None and _bulky(h, run, last.submission_id) > 0
        again = h.feedback(run, first.submission_id)
        assert again.evicted is not None and "evicted" in again.evicted
        assert "submit again on the same indices" in again.evicted
        assert again.score == first.score
        assert [e.model_dump() for e in again.episode_summaries] == [
            e.model_dump() for e in first.episode_summaries
        ]
        assert h.feedback(run, first.submission_id, episode=0).traces == []
        assert _bulky(h, run, first.submission_id) == 0
        # Within the cap, or every submission but the newest already gave its traces up.
        older = [s.id for s in h.store.list_submissions(run)][:-1]
        total = sum(_bulky(h, run, s) for s in [*older, last.submission_id])
        assert total <= 0.04 * 2**20 or all(_bulky(h, run, s) == 0 for s in older)
        kinds = [e.kind for e in h.store.events(run)]
        assert "feedback_evicted" in kinds
        report = h.report(run)
        assert report.stored_bytes == eviction.stored_bytes(h.store, run) > 0
        assert report.reproducibility["storage_mb"] == 0.04


def test_within_the_cap_nothing_is_evicted(data_dir: Path, tasks_dir: Path) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir]) as h:
        run = h.start_run("mini").run_id
        first = finish(h, run, "0:2", {"policy.py": GOOD}).submission_id
        finish(h, run, "2:4", {"policy.py": GOOD})
        assert h.feedback(run, first).evicted is None
        assert h.feedback(run, first, episode=0).traces


def test_an_evicted_episode_file_is_named_as_evicted_not_missing(
    data_dir: Path, tasks_dir: Path
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], storage_mb=0.001) as h:
        run = h.start_run("mini").run_id
        old = finish(h, run, "0", {"policy.py": GOOD}).submission_id
        # A replay as an adapter saves one, 4 KiB: over the run's 1 KiB cap.
        h.store.write_artifact(run, old, "episode-0/replay.gif", b"G" * 4096)
        assert h.artifact(run, old, 0, "replay.gif") == b"G" * 4096
        newest = finish(h, run, "1", {"policy.py": GOOD}).submission_id
        error = rejected(lambda: h.artifact(run, old, 0, "replay.gif"), "unknown_artifact")
        assert "was evicted" in error.message and "MiB" in error.message
        assert eviction.evicted(h.store, run, old).files == ("episode-0/replay.gif",)  # type: ignore[union-attr]
        # A name that never existed still reads as unknown, not evicted.
        other = rejected(lambda: h.artifact(run, old, 0, "nothing.gif"), "unknown_artifact")
        assert "evicted" not in other.message
        assert eviction.evicted(h.store, run, newest) is None


def test_runs_shows_the_bytes_each_run_holds(
    data_dir: Path, tasks_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir]) as h:
        run = h.start_run("mini").run_id
        finish(h, run, "0:2", {"policy.py": GOOD})
        held = eviction.stored_bytes(h.store, run)
    assert main(["runs", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "stored" in out.splitlines()[0]
    assert f"{held / 1024:.1f} KiB" in out
