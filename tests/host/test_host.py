"""The host with real components: Gymnasium CartPole, policy processes, SQLite in tmp_path."""

from __future__ import annotations

import base64
import math
import threading
import time
from pathlib import Path

import pytest

from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.host.selection import CandidateScore, fallback_candidates, select_candidate
from tests.support.host import (
    CRASH,
    GOOD,
    RANDOM,
    SEED,
    charges,
    finish,
    rejected,
    slow,
    write_task,
)

# ------------------------------------------------------------------ tasks and runs


def test_tasks_are_listed_and_described_with_their_public_spec(host: Host) -> None:
    assert "mini" in [t.id for t in host.list_tasks()]
    spec = host.describe_task("mini")
    assert spec.action_space["type"] == "discrete"
    assert spec.budget.pool == 8 and spec.budget.validation_candidates == 2
    assert "make_policy" in spec.policy_abi
    assert "def make_policy" in spec.baseline_files["policy.py"]
    assert any("strictly increasing" in rule for rule in spec.rules)
    rejected(lambda: host.describe_task("nope"), "unknown_task")
    rejected(lambda: host.start_run("nope"), "unknown_task")


def test_a_task_whose_environment_cannot_load_is_unavailable(
    data_dir: Path, tmp_path: Path
) -> None:
    tasks = write_task(tmp_path / "broken", "broken", env_id="NoSuchEnv-v0")
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        error = rejected(lambda: h.describe_task("broken"), "task_unavailable")
        assert "tell the operator" in error.message


def test_runs_get_different_secrets_unless_the_operator_fixes_a_seed(
    data_dir: Path, tasks_dir: Path
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir]) as h:
        a, b = h.start_run("mini").run_id, h.start_run("mini").run_id
        assert h.store.get_run(a).secret != h.store.get_run(b).secret  # type: ignore[union-attr]
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=5) as h:
        c, d = h.start_run("mini").run_id, h.start_run("mini").run_id
        fixed = seeds.secret_from_seed(5, "run")
        assert h.store.get_run(c).secret == fixed == h.store.get_run(d).secret  # type: ignore[union-attr]


def test_a_run_keeps_the_budget_it_started_with_when_the_task_file_changes(
    data_dir: Path, tasks_dir: Path
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir]) as h:
        run_id = h.start_run("mini").run_id
    write_task(tasks_dir, episodes=99, per_submission=9, pool=50)
    with Host(data_dir, tasks_dirs=[tasks_dir]) as h:
        assert h.run_status(run_id).remaining.episodes == 12
        rejected(lambda: h.submit(run_id, "0:9", files={"policy.py": GOOD}), "out_of_pool")
        assert h.start_run("mini").budget.episodes == 99


def test_a_bound_host_serves_one_run_only(data_dir: Path, tasks_dir: Path) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], bind=("mini", "bench-1")) as h:
        assert [t.id for t in h.list_tasks()] == ["mini"]
        first = h.start_run("mini")
        assert first.run_id == "bench-1"
        assert h.start_run("mini").run_id == "bench-1"
        rejected(lambda: h.start_run("cartpole"), "bound_run")
        rejected(lambda: h.run_status("run-other"), "unknown_run")
        finish(h, "bench-1", "0", {"policy.py": GOOD})
    with Host(data_dir, tasks_dirs=[tasks_dir], bind=("mini", "bench-1")) as h:
        assert h.run_status(h.start_run("mini").run_id).submissions_used == 1
    with pytest.raises(ValueError, match="already exists"):
        Host(data_dir, tasks_dirs=[tasks_dir], bind=("cartpole", "bench-1"))
    with pytest.raises(ValueError, match="run name"):
        Host(data_dir, tasks_dirs=[tasks_dir], bind=("mini", "../escape"))


def test_max_runs_caps_the_runs_a_host_starts(data_dir: Path, tasks_dir: Path) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], max_runs=1) as h:
        h.start_run("mini")
        rejected(lambda: h.start_run("mini"), "run_limit")


# ------------------------------------------------------------------ admission


def test_a_submission_is_evaluated_on_its_pool_indices_and_charged(host: Host) -> None:
    run = host.start_run("mini")
    view = finish(host, run.run_id, "0:2,5", {"policy.py": GOOD})
    assert [e.index for e in view.episode_summaries] == [0, 1, 5]
    assert view.score == 500.0 and view.policy_failures == 0
    assert view.remaining.episodes == 9 and view.remaining.submissions == 5
    status = host.run_status(run.run_id)
    assert status.episodes_used == 3 and status.submissions[0].status == "complete"


def test_a_reused_index_replays_the_same_hidden_episode(host: Host) -> None:
    run = host.start_run("mini").run_id
    first = finish(host, run, "2:4", {"policy.py": RANDOM})
    again = finish(host, run, "2:4", {"policy.py": RANDOM})
    assert [e.steps for e in first.episode_summaries] == [e.steps for e in again.episode_summaries]
    assert host.run_status(run).episodes_used == 4


def test_a_program_dir_is_captured_relative_to_the_working_directory(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "workspace" / "prog"
    workspace.mkdir(parents=True)
    (workspace / "policy.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path / "workspace")
    run = host.start_run("mini").run_id
    sub = host.submit(run, "0", program_dir="prog")
    (workspace / "policy.py").write_text(CRASH)  # later edits do not change the submission
    assert host.wait(run, sub, 60).score == 500.0


def test_a_host_for_remote_clients_refuses_program_dir_without_reading_it(
    data_dir: Path, tasks_dir: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "prog"
    workspace.mkdir()
    (workspace / "policy.py").write_text(GOOD)
    with Host(data_dir, tasks_dirs=[tasks_dir], allow_program_dir=False) as h:
        run = h.start_run("mini").run_id
        error = rejected(lambda: h.submit(run, "0", program_dir=str(workspace)), "program_invalid")
        assert "inline only" in error.message and str(workspace) not in error.message
        assert h.run_status(run).episodes_used == 0
        assert h.wait(run, h.submit(run, "0", files={"policy.py": GOOD}), 60).score == 500.0


def test_open_run_rejections_charge_nothing(host: Host, tmp_path: Path) -> None:
    run = host.start_run("mini").run_id
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x")
    good = {"policy.py": GOOD}
    cases = [
        ("unknown_run", lambda: host.submit("run-nope", "0", files=good)),
        ("bad_selector", lambda: host.submit(run, "", files=good)),
        ("bad_selector", lambda: host.submit(run, "3:3", files=good)),
        ("bad_selector", lambda: host.submit(run, "4,2", files=good)),
        ("bad_selector", lambda: host.submit(run, "0:2,", files=good)),
        ("out_of_pool", lambda: host.submit(run, "0:9", files=good)),
        ("out_of_pool", lambda: host.submit(run, "99999999999999999999999", files=good)),
        ("over_cap", lambda: host.submit(run, "0:5", files=good)),
        ("program_invalid", lambda: host.submit(run, "0", files={})),
        ("program_invalid", lambda: host.submit(run, "0", files={"helper.py": "x = 1"})),
        ("program_invalid", lambda: host.submit(run, "0", files={"policy.py": "def f(:"})),
        ("program_invalid", lambda: host.submit(run, "0", files={"../policy.py": GOOD})),
        ("program_invalid", lambda: host.submit(run, "0")),
        ("program_invalid", lambda: host.submit(run, "0", files=good, program_dir=str(tmp_path))),
        ("program_invalid", lambda: host.submit(run, "0", program_dir=str(tmp_path / "nope"))),
        ("program_invalid", lambda: host.submit(run, "0", program_dir=str(a_file))),
        ("program_invalid", lambda: host.submit(run, "0", program_dir=str(host.data_dir))),
        (
            "program_invalid",
            lambda: host.submit(run, "0", program_dir=str(host.data_dir / "programs")),
        ),
        ("program_invalid", lambda: host.submit(run, "0", program_dir=str(tmp_path))),
    ]
    for code, call in cases:
        error = rejected(call, code)
        assert str(host.data_dir) not in error.message
        assert charges(host, run) == (0, 0, 0), code
    missing = rejected(lambda: host.submit(run, "0", program_dir="nope-dir"), "program_invalid")
    assert "'nope-dir'" in missing.message and str(Path.cwd()) not in missing.message
    rejected(lambda: host.feedback(run, "s1"), "unknown_submission")
    rejected(lambda: host.wait(run, "s1", 0.0), "unknown_submission")


def test_over_budget_submission_is_rejected_without_charging(host: Host) -> None:
    run = host.start_run("mini").run_id
    for _ in range(2):
        finish(host, run, "0:4", {"policy.py": GOOD})
    finish(host, run, "0:3", {"policy.py": GOOD})
    before = charges(host, run)
    error = rejected(lambda: host.submit(run, "0:2", files={"policy.py": GOOD}), "over_budget")
    assert "only 1 of the run's 12 remain" in error.message
    assert charges(host, run) == before == (11, 3, 3)
    finish(host, run, "7", {"policy.py": GOOD})  # the last episode can still be spent
    assert host.run_status(run).remaining.episodes == 0


def test_the_submission_limit_is_enforced_without_charging(data_dir: Path, tmp_path: Path) -> None:
    tasks = write_task(tmp_path / "limits", "limits", submissions=2)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("limits").run_id
        finish(h, run, "0", {"policy.py": GOOD})
        finish(h, run, "1", {"policy.py": GOOD})
        rejected(lambda: h.submit(run, "2", files={"policy.py": GOOD}), "submission_limit")
        assert charges(h, run) == (2, 2, 2)


def test_after_the_wall_time_submissions_stop_and_finalize_still_works(
    data_dir: Path, tmp_path: Path
) -> None:
    tasks = write_task(tmp_path / "timed", "timed", wall_seconds=1.5)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        info = h.start_run("timed")
        assert info.remaining.wall_seconds is not None and info.remaining.wall_seconds <= 1.5
        done = finish(h, info.run_id, "0", {"policy.py": GOOD})
        time.sleep(max(0.0, 1.6 - (time.time() - h.store.get_run(info.run_id).created)))  # type: ignore[union-attr]
        error = rejected(lambda: h.submit(info.run_id, "1", files={"policy.py": GOOD}), "time_up")
        assert "finalize" in error.message
        assert charges(h, info.run_id) == (1, 1, 1)
        assert h.run_status(info.run_id).wall_seconds_left == 0.0
        assert h.finalize(info.run_id, [done.submission_id]).state == "finalizing"


@pytest.mark.parametrize(
    ("budget", "admitted", "code"),
    [
        ({"episodes": 7, "submissions": 20, "per_submission": 2}, 3, "over_budget"),
        ({"episodes": 40, "submissions": 4, "per_submission": 2}, 4, "submission_limit"),
    ],
)
def test_twenty_concurrent_submits_never_overspend(
    data_dir: Path, tmp_path: Path, budget: dict[str, int], admitted: int, code: str
) -> None:
    tasks = write_task(tmp_path / "race", "race", **budget)
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("race").run_id
        barrier = threading.Barrier(20)
        ids: list[str] = []
        codes: list[str] = []
        lock = threading.Lock()

        def attempt() -> None:
            barrier.wait()
            try:
                sub = h.submit(run, "0:2", files={"policy.py": GOOD})
                with lock:
                    ids.append(sub)
            except HostError as exc:
                with lock:
                    codes.append(exc.code)

        threads = [threading.Thread(target=attempt) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(ids) == admitted and len(set(ids)) == admitted
        assert codes == [code] * (20 - admitted)
        for sub in ids:
            assert h.wait(run, sub, 60).status == "complete"
        assert charges(h, run) == (2 * admitted, admitted, admitted)


# ------------------------------------------------------------------ feedback


def test_feedback_is_paged_and_one_episode_can_be_read_in_full(host: Host) -> None:
    run = host.start_run("mini").run_id
    sub = finish(host, run, "0:4", {"policy.py": GOOD}).submission_id
    page = host.feedback(run, sub, limit=3)
    assert [e.index for e in page.episode_summaries] == [0, 1, 2]
    assert page.next_offset == 3 and page.hint is not None and "offset=3" in page.hint
    assert {t.index for t in page.traces} <= {0, 1, 2}
    rest = host.feedback(run, sub, offset=3, limit=3)
    assert [e.index for e in rest.episode_summaries] == [3] and rest.next_offset is None
    one = host.feedback(run, sub, episode=1)
    assert [e.index for e in one.episode_summaries] == [1]
    assert [t.index for t in one.traces] == [1] and one.traces[0].steps
    error = rejected(lambda: host.feedback(run, sub, episode=6), "bad_episode")
    assert "'0:4'" in error.message


def test_policy_failures_are_scored_feedback_not_errors(host: Host) -> None:
    run = host.start_run("mini").run_id
    view = finish(host, run, "0:2", {"policy.py": CRASH})
    assert view.score == 0.0 and view.failures == {"exception": 2}
    episode = view.episode_summaries[0]
    assert episode.status == "failed" and "deliberate crash" in (episode.traceback or "")
    assert host.run_status(run).episodes_used == 2


def test_a_running_submission_reports_progress_then_completes(host: Host) -> None:
    run = host.start_run("mini").run_id
    progress: list[tuple[int, int]] = []
    sub = host.submit(run, "0:3", files=slow(0.4), on_progress=lambda d, t: progress.append((d, t)))
    early = host.wait(run, sub, 0.05)
    assert early.status == "running" and early.score is None and early.episodes_done < 3
    assert host.run_status(run).submissions[0].status == "running"
    done = host.wait(run, sub, 60)
    assert done.status == "complete" and done.episodes_done == 3
    assert progress[-1] == (3, 3) and [d for d, _ in progress] == sorted(d for d, _ in progress)


def test_a_submission_the_host_cannot_evaluate_is_refunded(data_dir: Path, tmp_path: Path) -> None:
    tasks = write_task(tmp_path / "broken", "broken", env_id="NoSuchEnv-v0")
    with Host(data_dir, tasks_dirs=[tasks]) as h:
        run = h.start_run("broken").run_id
        sub = h.submit(run, "0:3", files={"policy.py": GOOD})
        view = h.wait(run, sub, 60)
        assert view.status == "failed" and view.message and "not charged" in view.message
        assert "NoSuchEnv" not in view.model_dump_json()
        assert charges(h, run) == (0, 0, 1)
        assert h.run_status(run).submissions[0].status == "failed"
        error = rejected(lambda: h.finalize(run, [sub]), "bad_candidates")
        assert "stays open" in error.message


# ------------------------------------------------------------------ finalize


def test_a_rejected_finalize_leaves_the_run_open(host: Host) -> None:
    run = host.start_run("mini").run_id
    s1 = finish(host, run, "0", {"policy.py": GOOD}).submission_id
    s2 = host.submit(run, "1", files=slow(1.0))
    for candidates in ([], ["s9"], [s1, s1], [s1, s2, "s3"], [s2]):
        rejected(lambda c=candidates: host.finalize(run, c), "bad_candidates")
        assert host.run_status(run).open
    assert host.wait(run, s2, 60).status == "complete"
    assert finish(host, run, "2", {"policy.py": GOOD}).status == "complete"


def test_an_accepted_finalize_closes_the_run_and_completes_selection(host: Host) -> None:
    run = host.start_run("mini").run_id
    good = finish(host, run, "0:2", {"policy.py": GOOD}).submission_id
    coin = finish(host, run, "0:2", {"policy.py": RANDOM}).submission_id
    ack = host.finalize(run, [coin, good])
    assert ack.state == "finalizing" and ack.candidates == [coin, good]
    assert "No scores are returned" in ack.message
    rejected(lambda: host.submit(run, "3", files={"policy.py": GOOD}), "run_closed")
    rejected(lambda: host.finalize(run, [good]), "run_closed")
    assert charges(host, run) == (4, 2, 2)
    assert host.wait_final(run, 120).state == "finalized"
    report = host.report(run)
    assert report.selected == good
    assert [v.submission_id for v in report.validation] == [coin, good]
    assert all(v.episodes == 3 for v in report.validation)
    assert report.assessment is not None and report.assessment.submission_id == good
    assert report.gap is not None and report.gap.public == 500.0


@pytest.mark.parametrize(("direction", "expected"), [("maximize", "good"), ("minimize", "coin")])
def test_selection_follows_the_task_direction(
    data_dir: Path, tmp_path: Path, direction: str, expected: str
) -> None:
    tasks = write_task(tmp_path / direction, direction, direction=direction)
    with Host(data_dir, tasks_dirs=[tasks], seed=SEED) as h:
        run = h.start_run(direction).run_id
        ids = {
            "good": finish(h, run, "0", {"policy.py": GOOD}).submission_id,
            "coin": finish(h, run, "0", {"policy.py": RANDOM}).submission_id,
        }
        h.finalize(run, [ids["good"], ids["coin"]])
        h.wait_final(run, 120)
        assert h.report(run).selected == ids[expected]


def test_on_a_full_tie_the_earlier_candidate_is_selected(host: Host) -> None:
    run = host.start_run("mini").run_id
    first = finish(host, run, "0", {"policy.py": GOOD}).submission_id
    second = finish(host, run, "1", {"policy.py": GOOD + "\n# same controller\n"}).submission_id
    host.finalize(run, [second, first])
    host.wait_final(run, 120)
    report = host.report(run)
    assert report.selected == second
    assert report.selection_reason and "candidate order" in report.selection_reason


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_selection_prefers_the_better_score_in_the_direction(direction: str) -> None:
    low, high = CandidateScore("low", 1.0, 0), CandidateScore("high", 2.0, 5)
    chosen, reason = select_candidate([low, high], direction)  # type: ignore[arg-type]
    assert [low, high][chosen].submission_id == ("high" if direction == "maximize" else "low")
    assert "best validation score" in reason


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_selection_breaks_a_score_tie_by_fewer_policy_failures(direction: str) -> None:
    many, few = CandidateScore("many", 3.0, 4), CandidateScore("few", 3.0, 1)
    chosen, reason = select_candidate([many, few], direction)  # type: ignore[arg-type]
    assert chosen == 1 and "fewer policy failures" in reason


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_fallback_ranks_by_public_score_once_per_program(direction: str) -> None:
    subs = [
        (CandidateScore("s1", 10.0, 0), "p-base"),
        (CandidateScore("s2", 50.0, 0), "p-good"),
        (CandidateScore("s3", 50.0, 0), "p-good"),  # the same program again
        (CandidateScore("s4", None, 2), "p-broken"),
        (CandidateScore("s5", 30.0, 0), "p-mid"),
    ]
    picked = fallback_candidates(subs, direction, 3)  # type: ignore[arg-type]
    if direction == "maximize":
        assert picked == ["s3", "s5", "s1"]  # the newer of a tie, one per program
    else:
        assert picked == ["s1", "s5", "s3"]
    assert fallback_candidates(subs, direction, 10)[-1] == "s4"  # no score ranks last
    assert fallback_candidates([], direction, 3) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_selection_breaks_a_full_tie_by_candidate_order(direction: str) -> None:
    candidates = [CandidateScore(name, 3.0, 1) for name in ("c", "a", "b")]
    chosen, reason = select_candidate(candidates, direction)  # type: ignore[arg-type]
    assert chosen == 0 and "candidate order" in reason


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_a_candidate_without_a_score_ranks_last(direction: str) -> None:
    candidates = [
        CandidateScore("none", None, 0),
        CandidateScore("nan", math.nan, 0),
        CandidateScore("real", -1e9 if direction == "maximize" else 1e9, 9),
    ]
    chosen, _ = select_candidate(candidates, direction)  # type: ignore[arg-type]
    assert chosen == 2
    with pytest.raises(ValueError):
        select_candidate([], direction)  # type: ignore[arg-type]


# ------------------------------------------------------------------ what the agent sees


def test_no_agent_visible_view_holds_the_secret_a_seed_or_a_hidden_score(host: Host) -> None:
    # Task texts do not depend on the run: they are scanned for the secret and seeds,
    # not for hidden scores (a round number such as 17.0 may well appear in a description).
    task_texts: list[str] = [m.model_dump_json() for m in host.list_tasks()]
    task_texts.append(host.describe_task("mini").model_dump_json())
    texts: list[str] = []
    info = host.start_run("mini")
    run = info.run_id
    texts.append(info.model_dump_json())
    subs = [
        finish(host, run, "0:4", {"policy.py": GOOD}).submission_id,
        finish(host, run, "0:3", {"policy.py": RANDOM}).submission_id,
        finish(host, run, "4:6", {"policy.py": CRASH}).submission_id,
    ]
    errors = []
    for call in (
        lambda: host.submit(run, "0:9", files={"policy.py": GOOD}),
        lambda: host.submit(run, "0:6", files={"policy.py": GOOD}),
        lambda: host.finalize(run, ["s1", "s1"]),
        lambda: host.feedback(run, subs[0], episode=7),
    ):
        with pytest.raises(HostError) as exc:
            call()
        errors.append(exc.value.message)
    texts.append(host.finalize(run, subs[:2]).model_dump_json())
    host.wait_final(run, 120)
    errors.append(
        rejected(lambda: host.submit(run, "0", files={"policy.py": GOOD}), "run_closed").message
    )
    errors.append(rejected(lambda: host.finalize(run, subs[:1]), "run_closed").message)
    texts.append(host.run_status(run).model_dump_json())
    texts.append(host.start_run("mini").model_dump_json())
    for sub in subs:
        texts.append(host.wait(run, sub, 1).model_dump_json())
        texts.append(host.feedback(run, sub, offset=1, limit=1).model_dump_json())
        for index in host.store.get_submission(run, sub).indices:  # type: ignore[union-attr]
            texts.append(host.feedback(run, sub, episode=index).model_dump_json())
    blob = "\n".join(texts + errors)
    everything = "\n".join([*task_texts, blob])

    secret = host.store.get_run(run).secret  # type: ignore[union-attr]
    assert secret.hex() not in everything.lower()
    assert base64.b64encode(secret).decode() not in everything
    hidden_seeds = [
        derive(secret, "mini", split, i)
        for derive in (seeds.episode_seed, seeds.policy_seed)
        for split, count in (("train", 8), ("validation", 3), ("test", 3))
        for i in range(count)
    ]
    for seed in hidden_seeds:
        assert str(seed) not in everything
    report = host.report(run)
    public = {s.score for s in report.submissions}
    public |= {  # a hidden mean may equal some public episode's return by chance
        e.episode_return
        for sub in subs
        for e in host.feedback(run, sub, limit=200).episode_summaries
    }
    hidden = [r.score for r in report.validation] + [report.assessment.score]  # type: ignore[union-attr]
    distinct = [s for s in hidden if s is not None and s not in public]
    assert distinct, "the scan needs a hidden score that no public score equals"
    for score in distinct:
        where = blob.find(repr(score))
        assert where < 0, blob[max(0, where - 200) : where + 50]
    assert str(host.data_dir) not in everything
