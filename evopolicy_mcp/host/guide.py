"""Texts the agent reads: the policy ABI guide and the working instructions.

They are served as the ``evopolicy://abi`` resource, inside ``describe_task``
and as the ``evolve_policy`` prompt. Plain strings, no imports, so any layer
may use them.
"""

from __future__ import annotations

from typing import Protocol

__all__ = [
    "ABI_GUIDE",
    "SERVER_INSTRUCTIONS",
    "WORKING_INSTRUCTIONS",
    "budget_line",
    "evolve_policy_prompt",
]

ABI_GUIDE = """\
# The policy ABI

A program is a directory with `policy.py` at its top (helper modules beside it
are importable with a plain `import`). `policy.py` defines
`make_policy(context)` and returns an object with `act(observation)`:

```python
# policy.py
def make_policy(context):
    return Controller(context)

class Controller:
    def __init__(self, context):
        self.steps = 0  # state lives for one episode only

    def act(self, observation):
        self.steps += 1
        return 0 if observation[2] < 0 else 1
```

`context` (an `evopolicy_mcp.policy.PolicyContext`) carries:

- `task_id`
- `observation_space`, `action_space`: the public space descriptions shown by
  `describe_task` (plain dicts with a `type` and a `description`)
- `parameters`, `metadata`: the task's public parameters and metadata
- `policy_seed`: an integer fixed per episode. Seed your own randomness with it
  (`random.Random(context.policy_seed)`) and a replay of the same episode
  behaves the same.

Rules:

- One fresh process per episode: `make_policy` runs once per episode and
  nothing carries over between episodes.
- `observation` is plain Python values (numbers, lists, dicts, tuples, str) or
  a `numpy.ndarray` for array observations.
- `act` returns an action: a plain value, a list, or a numpy scalar or array.
  An action outside the action space ends the episode with `invalid_action`;
  actions are never clipped or repaired.
- Deadlines and limits (per `act` call, start-up, whole episode, memory, CPU)
  are in the task's `limits`. Missing one ends the episode with `timeout` or
  `resource_limit`.
- The policy has no network access and cannot see the host's files.
- What the policy prints is captured; its tail comes back in feedback as
  `stderr`, next to a traceback excerpt when it raised.
- A failed episode scores the task's `failure_value` for the score metric.
  Failure codes: `exception`, `timeout`, `invalid_action`, `protocol_error`,
  `resource_limit`, `crashed`.

Submitting: `submit_policy` takes either `files` (relative path -> source
text, e.g. `{"policy.py": "..."}`) or `program_dir` (a local directory path
holding `policy.py`). The host snapshots the program at admission, so later
edits to the directory do not change a submission.
"""

WORKING_INSTRUCTIONS = """\
# How to evolve a policy

1. `describe_task` once: read the description, the observation and action
   spaces, the scoring, the budget, the limits and the baseline source.
2. Make a working directory outside the server's data, seed it with the
   baseline files (`baseline_files`) and edit `policy.py` there. Keep earlier
   versions (copies or a git repository) so you can go back.
3. `start_run` once. The budget is fixed by the task: a number of episodes, a
   number of submissions, a cap per submission, and maybe wall time.
4. Submit on a few episodes first (`episodes="0:3"`): a crash or an invalid
   action costs budget like any other episode, so check the program runs
   before you spend more. A program that fails to capture costs nothing.
5. Compare versions on matched indices: reusing an index replays the same
   hidden episode, so two programs on `"0:8"` differ only by the program.
   Each reuse is charged again.
6. Read the feedback: the score, per-episode returns and steps, failure codes,
   traceback and stderr excerpts, task metrics and the step traces. Fix what it
   shows before you widen the selection.
7. Long evaluations: `submit_policy` waits up to `wait_seconds` and may return
   `status: "running"`; then call `get_feedback(run_id, submission_id,
   wait_seconds=45)` until it is `complete`. Long feedback is paged: call again
   with the `offset` the hint names.
8. Watch `remaining` in every response and `run_status`. Keep some budget
   for confirming your best programs on more episodes.
9. `finalize(run_id, candidates=[...])` with a few of your best submission
   ids, best first. It ends your authority over the run: the host selects one
   candidate on hidden validation episodes (best score, then fewer policy
   failures, then your order) and measures it on held-out episodes. You get
   an acknowledgement only; those scores are never shown to you. Prefer
   programs that do well on many episodes over one lucky high score.
"""

SERVER_INSTRUCTIONS = """\
evopolicy: evolve a Python policy program for an interactive environment.
Start with list_tasks and describe_task, then start_run, submit_policy on a few
training-pool indices, read the feedback, improve, compare on the same indices,
and finalize with a few candidate submission ids. Every submitted episode costs
budget; rejected calls cost nothing. The evolve_policy prompt and the
evopolicy://abi resource carry the full working instructions.
"""


class Budget(Protocol):
    episodes: int
    submissions: int
    per_submission: int
    pool: int
    wall_seconds: float | None


def budget_line(b: Budget) -> str:
    """One line stating a run's budget, as the prompt gives it."""
    return (
        f"{b.episodes} episodes, {b.submissions} submissions, at most {b.per_submission} "
        f"episodes per submission, pool indices 0..{b.pool - 1}"
        + (f", {b.wall_seconds:g} s of wall time" if b.wall_seconds else "")
    )


def evolve_policy_prompt(task_id: str, task_summary: str = "", budget_line: str = "") -> str:
    """The text of the ``evolve_policy`` prompt for one task."""
    head = f"Evolve a policy for the task `{task_id}`."
    if task_summary:
        head += f" {task_summary}"
    if budget_line:
        head += f"\n\nBudget: {budget_line}"
    return (
        f"{head}\n\n"
        f"Call `describe_task(task_id={task_id!r})`, then `start_run(task_id={task_id!r})`.\n\n"
        f"{WORKING_INSTRUCTIONS}\n{ABI_GUIDE}"
    )
