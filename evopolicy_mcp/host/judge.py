"""The host's own evaluations after finalize: validation, selection, assessment.

Every candidate is evaluated on the same hidden validation episodes (indices
0..validation.episodes-1 of the ``validation`` seed domain); the selection
rule is :func:`~evopolicy_mcp.host.selection.select_candidate`; the selected
program is then measured on the ``test`` domain, which never changes the
selection. Results are committed one by one, so an interrupted judgement
resumes where it stopped and never evaluates a committed result again.

The caller starts judging only once no training submission of the run is
pending (:meth:`~evopolicy_mcp.host.authority.Host.finalize` says why); the
``validation_started`` event marks the moment, for the records and the tests
that check the order.
"""

from __future__ import annotations

from evopolicy_mcp.evaluation import episodes as evaluation
from evopolicy_mcp.evaluation import snapshot
from evopolicy_mcp.evaluation.executors import private_runtime
from evopolicy_mcp.evaluation.plan import Executor
from evopolicy_mcp.host.selection import CandidateScore, select_candidate
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.records import RunRecord
from evopolicy_mcp.tasks.model import Task

__all__ = ["judge"]


def judge(store: Store, run: RunRecord, task: Task, *, executor: Executor) -> str | None:
    """Finish the finalize of ``run`` (state ``finalizing``); returns the selected id."""
    if run.state != "finalizing" or not run.candidates:
        return None
    done = {(r.submission_id, r.split): r for r in store.results(run.id)}
    store.add_event(run.id, "validation_started", {"resumed": bool(done)})

    def measure(sub_id: str, split: str, count: int) -> CandidateScore:
        if (sub_id, split) in done:
            r = done[(sub_id, split)]
            return CandidateScore(sub_id, r.score, r.policy_failures)
        sub = store.get_submission(run.id, sub_id)
        if sub is None:
            raise LookupError(f"candidate {sub_id} of run {run.id} is missing from the records")
        program = snapshot.open_program(store.programs_dir, sub.program_digest)
        jobs = evaluation.jobs_for(task, split, range(count), run.secret)
        # From a private copy of the runtime: pages a hidden episode reads are its own.
        with private_runtime(executor) as hidden:
            fb = evaluation.evaluate(
                program, task, jobs, executor=hidden, traces=False, share=run.id
            )
        store.save_result(
            run.id,
            sub_id,
            split,
            episodes=count,
            score=fb.score,
            policy_failures=fb.policy_failures,
            failures=dict(fb.failures),
            feedback_json=fb.model_dump_json(),
        )
        return CandidateScore(sub_id, fb.score, fb.policy_failures)

    scores = [measure(cid, "validation", task.validation.episodes) for cid in run.candidates]
    chosen, reason = select_candidate(scores, task.score.direction)
    selected = run.candidates[chosen]
    measure(selected, "test", task.assessment.episodes)
    store.complete_finalize(run.id, selected=selected, reason=reason)
    return selected
