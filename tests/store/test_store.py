from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from evopolicy_mcp.store.database import (
    DB_NAME,
    SCHEMA_VERSION,
    Rejected,
    Store,
    StoreError,
    default_data_dir,
    write_atomic,
)

BUDGET = {"episodes": 10, "submissions": 4, "per_submission": 4, "pool": 8}
PROGRAM = {"digest": "0" * 64, "files": ["policy.py"], "size": 10}


def new_run(store: Store, run_id: str = "r1", *, deadline: float | None = None, **budget: int):
    return store.create_run(
        run_id,
        task_id="mini",
        task_digest="d" * 64,
        task_json="{}",
        secret=b"s" * 32,
        budget={**BUDGET, **budget},
        deadline=deadline,
        reproducibility={"python": "3"},
    )


def reserve(store: Store, run_id: str, indices: list[int]):
    return store.reserve(run_id, selector="x", indices=indices, program=PROGRAM)


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "data")
    yield s
    s.close()


def complete(store: Store, run_id: str, sub_id: str) -> None:
    store.complete_submission(
        run_id, sub_id, score=1.0, policy_failures=0, failures={}, feedback_json="{}"
    )


def count_submissions(store: Store, run_id: str) -> int:
    return len(store.list_submissions(run_id))


def test_a_new_store_has_the_schema_version_wal_and_foreign_keys(store: Store) -> None:
    db = store.db
    assert db.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_records_written_by_a_newer_schema_are_refused(tmp_path: Path) -> None:
    Store(tmp_path).close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(tmp_path)


def test_opening_missing_records_without_create_makes_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no records"):
        Store(tmp_path / "absent", create=False)
    assert not (tmp_path / "absent").exists()


def test_reopened_store_keeps_every_committed_run(tmp_path: Path) -> None:
    with_store = Store(tmp_path)
    new_run(with_store)
    reserve(with_store, "r1", [0, 1])
    with_store.close()
    again = Store(tmp_path)
    assert again.get_run("r1") is not None
    assert again.usage("r1").episodes == 2
    again.close()


def test_the_secret_never_shows_in_a_run_records_repr(store: Store) -> None:
    run = new_run(store)
    assert run.secret == b"s" * 32
    assert "sss" not in repr(run)


def test_reservation_charges_episodes_and_numbers_submissions(store: Store) -> None:
    new_run(store)
    first = reserve(store, "r1", [0, 1, 2])
    second = reserve(store, "r1", [0])
    assert (first.id, second.id) == ("s1", "s2")
    assert first.state == "reserved" and first.charged == 3
    usage = store.usage("r1")
    assert (usage.episodes, usage.submissions) == (4, 2)


@pytest.mark.parametrize(
    ("setup", "indices", "code"),
    [
        ([], [0, 1, 2, 3, 4], "over_cap"),
        ([[0, 1, 2, 3], [0, 1, 2, 3]], [0, 1, 2], "over_budget"),
        ([[0], [0], [0], [0]], [0], "submission_limit"),
    ],
)
def test_a_reservation_over_a_limit_is_rejected_and_charges_nothing(
    store: Store, setup: list[list[int]], indices: list[int], code: str
) -> None:
    new_run(store)
    for chosen in setup:
        reserve(store, "r1", chosen)
    before = store.usage("r1")
    with pytest.raises(Rejected) as info:
        reserve(store, "r1", indices)
    assert info.value.code == code
    assert store.usage("r1") == before
    assert count_submissions(store, "r1") == len(setup)


def test_a_reservation_for_an_unknown_closed_or_late_run_is_rejected(store: Store) -> None:
    with pytest.raises(Rejected) as info:
        reserve(store, "nope", [0])
    assert info.value.code == "unknown_run"
    new_run(store, "late", deadline=time.time() - 1)
    with pytest.raises(Rejected) as info:
        reserve(store, "late", [0])
    assert info.value.code == "time_up"
    new_run(store, "closed")
    done = reserve(store, "closed", [0])
    complete(store, "closed", done.id)
    store.begin_finalize("closed", [done.id])
    with pytest.raises(Rejected) as info:
        reserve(store, "closed", [0])
    assert info.value.code == "run_closed"
    assert store.usage("closed").submissions == 1


def test_concurrent_reservations_from_two_connections_never_overspend(tmp_path: Path) -> None:
    stores = [Store(tmp_path), Store(tmp_path)]
    new_run(stores[0], episodes=9, submissions=40, per_submission=2)
    admitted: list[str] = []
    codes: list[str] = []
    barrier = threading.Barrier(20)
    lock = threading.Lock()

    def attempt(n: int) -> None:
        barrier.wait()
        try:
            sub = reserve(stores[n % 2], "r1", [0, 1])
            with lock:
                admitted.append(sub.id)
        except Rejected as exc:
            with lock:
                codes.append(exc.code)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 4  # 4 x 2 = 8 <= 9; a fifth would need 10
    assert len(set(admitted)) == 4
    assert codes == ["over_budget"] * 16
    assert stores[1].usage("r1").episodes == 8
    for s in stores:
        s.close()


def test_a_refund_releases_the_charge_once(store: Store) -> None:
    new_run(store)
    sub = reserve(store, "r1", [0, 1, 2])
    assert store.refund_submission("r1", sub.id, message="host fault", detail="boom")
    assert not store.refund_submission("r1", sub.id, message="again", detail="again")
    assert store.usage("r1").episodes == 0
    assert store.get_submission("r1", sub.id).state == "refunded"  # type: ignore[union-attr]
    assert reserve(store, "r1", [0]).id == "s2"  # ids are never reused


def test_a_submission_completes_once_with_its_feedback_file(store: Store) -> None:
    new_run(store)
    sub = reserve(store, "r1", [0])
    store.mark_evaluating("r1", sub.id)
    feedback = json.dumps({"score": 3.5})
    assert store.complete_submission(
        "r1", sub.id, score=3.5, policy_failures=0, failures={}, feedback_json=feedback
    )
    assert not store.complete_submission(
        "r1", sub.id, score=9.0, policy_failures=0, failures={}, feedback_json="{}"
    )
    assert not store.refund_submission("r1", sub.id, message="late", detail="late")
    record = store.get_submission("r1", sub.id)
    assert record is not None and record.state == "complete" and record.score == 3.5
    assert store.usage("r1").episodes == 1
    kinds = [e.kind for e in store.events("r1")]
    assert kinds == [
        "run_started",
        "submission_reserved",
        "evaluation_started",
        "submission_complete",
    ]


def test_events_are_append_only(store: Store) -> None:
    new_run(store)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        store.db.execute("UPDATE events SET kind = 'forged'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        store.db.execute("DELETE FROM events")
    assert [e.kind for e in store.events("r1")] == ["run_started"]


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "feedback.json"
    write_atomic(target, b"old")
    write_atomic(target, b"new content")
    assert target.read_bytes() == b"new content"
    assert [p.name for p in target.parent.iterdir()] == ["feedback.json"]


def test_artifacts_are_stored_per_submission_and_names_cannot_escape(store: Store) -> None:
    new_run(store)
    sub = reserve(store, "r1", [0])
    store.write_artifact("r1", sub.id, "plots/return.txt", b"1 2 3")
    assert store.list_artifacts("r1", sub.id) == ["plots/return.txt"]
    assert store.read_artifact("r1", sub.id, "plots/return.txt") == b"1 2 3"
    assert store.read_artifact("r1", sub.id, "missing") is None
    for bad in ("../../evopolicy.sqlite3", "/etc/passwd", ""):
        with pytest.raises(ValueError):
            store.write_artifact("r1", sub.id, bad, b"x")


def test_finalize_checks_candidates_in_the_closing_transaction(store: Store) -> None:
    new_run(store)
    done = reserve(store, "r1", [0])
    complete(store, "r1", done.id)
    pending = reserve(store, "r1", [1])
    for candidates, problem in (([done.id, "s9"], "unknown"), ([pending.id], "reserved")):
        with pytest.raises(Rejected) as info:
            store.begin_finalize("r1", candidates)
        assert info.value.code == "bad_candidates"
        assert info.value.info["problem"] == problem
        assert store.get_run("r1").state == "open"  # type: ignore[union-attr]
    closed = store.begin_finalize("r1", [done.id])
    assert closed.state == "finalizing" and closed.candidates == [done.id]
    with pytest.raises(Rejected) as info:
        store.begin_finalize("r1", [done.id])
    assert info.value.code == "run_closed"


def test_results_and_finalize_completion_are_recorded(store: Store) -> None:
    new_run(store)
    sub = reserve(store, "r1", [0])
    complete(store, "r1", sub.id)
    store.begin_finalize("r1", [sub.id])
    for split, score in (("validation", 2.0), ("test", 3.0)):
        store.save_result(
            "r1",
            sub.id,
            split,
            episodes=5,
            score=score,
            policy_failures=1,
            failures={"timeout": 1},
            feedback_json="{}",
        )
    assert store.result_path("r1", "validation", sub.id).exists()
    assert {(r.split, r.score) for r in store.results("r1")} == {("validation", 2.0), ("test", 3.0)}
    assert store.complete_finalize("r1", selected=sub.id, reason="only candidate")
    assert not store.complete_finalize("r1", selected=sub.id, reason="again")
    run = store.get_run("r1")
    assert run is not None and run.state == "finalized" and run.selected == sub.id


def test_pending_work_of_a_dead_host_is_claimed_and_a_live_hosts_is_not(tmp_path: Path) -> None:
    dead = Store(tmp_path)
    new_run(dead)
    orphan = reserve(dead, "r1", [0])
    dead.mark_evaluating("r1", orphan.id)
    dead.close()  # releases its instance lock, as the death of its process would

    live = Store(tmp_path)
    mine = reserve(live, "r1", [1])
    survivor = Store(tmp_path)
    subs, runs = survivor.claim_orphans()
    assert [s.id for s in subs] == [orphan.id]
    assert runs == []
    assert survivor.get_submission("r1", orphan.id).owner == survivor.instance  # type: ignore[union-attr]
    assert survivor.get_submission("r1", mine.id).owner == live.instance  # type: ignore[union-attr]
    assert survivor.usage("r1").episodes == 2  # claiming never charges
    assert "submission_resumed" in [e.kind for e in survivor.events("r1")]
    live.close()
    survivor.close()


def test_default_data_dir_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EVOPOLICY_DATA_DIR", str(tmp_path / "records"))
    assert default_data_dir() == tmp_path / "records"
    monkeypatch.delenv("EVOPOLICY_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "evopolicy-mcp"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_data_dir() == Path.home() / ".local" / "share" / "evopolicy-mcp"
