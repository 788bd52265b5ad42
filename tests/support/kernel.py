"""Shared pieces of the kernel tests: real tasks with short limits, inline programs, one runner.

Every test here runs real policy processes through the real runner and real
Gymnasium; only the limits are shrunk so that misbehaving policies end fast.
"""

from __future__ import annotations

import functools
import os
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.evaluation.episodes import EpisodeJob, evaluate, jobs_for
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Feedback
from evopolicy_mcp.evaluation.plan import Executor
from evopolicy_mcp.evaluation.snapshot import Program, capture_files
from evopolicy_mcp.kernel import sandbox
from evopolicy_mcp.kernel.scratch import TIDIER_NAME
from evopolicy_mcp.runner.template import Failure, Runner
from evopolicy_mcp.tasks.model import Task, load_tasks

TASKS: dict[str, Task] = load_tasks()
SECRET = seeds.secret_from_seed(0)

# A controller that keeps CartPole up for all 500 steps from every start.
GOOD_CARTPOLE = """
def make_policy(context):
    return Controller()

class Controller:
    def act(self, observation):
        x, x_dot, theta, theta_dot = observation
        return 1 if theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0 else 0
"""

# Takes 0.3 s to start, then answers 0 at once.
SLOW_START = """
import time

def make_policy(context):
    time.sleep(0.3)
    return Policy()

class Policy:
    def act(self, observation):
        return 0
"""


# Fails when numpy's folder is a tmpfs mount: the private copy of the runtime that hidden
# splits read (evopolicy_mcp.kernel.runtime), bound over the original.
FAILS_WHEN_PRIVATE = """
import os
import numpy

def _private():
    here = os.path.realpath(os.path.dirname(numpy.__file__))
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == here:
                return line.split(" - ", 1)[1].split()[0] == "tmpfs"
    return False

def make_policy(context):
    if _private():
        raise RuntimeError("runs from the private runtime")
    return Balancer()

class Balancer:
    def act(self, observation):
        return 1 if observation[2] + 0.3 * observation[3] > 0 else 0
"""


def with_limits(task: Task | str, **limits: Any) -> Task:
    """``task`` with some of its policy-process limits replaced."""
    task = TASKS[task] if isinstance(task, str) else task
    return task.model_copy(update={"limits": task.limits.model_copy(update=limits)})


def with_parameters(task: Task | str, **parameters: Any) -> Task:
    task = TASKS[task] if isinstance(task, str) else task
    return task.model_copy(update={"parameters": {**task.parameters, **parameters}})


def policy_with_act(act_body: str, *, top: str = "", init: str = "pass") -> str:
    """A policy.py whose ``act`` runs ``act_body`` (indented by the caller's dedent)."""
    return (
        f"{textwrap.dedent(top)}\n"
        "def make_policy(context):\n"
        "    return Policy(context)\n\n"
        "class Policy:\n"
        "    def __init__(self, context):\n"
        f"{textwrap.indent(textwrap.dedent(init), ' ' * 8)}\n\n"
        "    def act(self, observation):\n"
        f"{textwrap.indent(textwrap.dedent(act_body), ' ' * 8)}\n"
    )


class Kernel:
    """A runner and a snapshot store: what the host gives an evaluation. With an
    ``executor`` (worker processes, say), evaluations go there instead of the runner."""

    def __init__(
        self, store: Path, runner: Runner | None = None, executor: Executor | None = None
    ) -> None:
        self.store = store
        self.runner = runner or Runner()
        self.executor = executor

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()
        self.runner.close()

    def own_runner(self) -> Runner:
        """The runner that runs this kernel's episodes, for tests that look inside it;
        skips where episodes run in worker processes, whose runners are their own."""
        if self.executor is not None:
            pytest.skip(
                "looks inside the host's runner: worker processes have runners of their own"
            )
        return self.runner

    def program(self, source: str, **helpers: str) -> Program:
        files = {"policy.py": textwrap.dedent(source)}
        files.update({f"{name}.py": textwrap.dedent(text) for name, text in helpers.items()})
        return capture_files(files, self.store)

    def jobs(
        self, task: Task, episodes: int | Sequence[int] = 2, *, split: str = "train", seed: int = 0
    ) -> list[EpisodeJob]:
        indices = range(episodes) if isinstance(episodes, int) else episodes
        return jobs_for(task, split, list(indices), seeds.secret_from_seed(seed))

    def evaluate(
        self,
        source: str | Program,
        task: Task | str = "cartpole",
        episodes: int | Sequence[int] = 2,
        *,
        workers: int | None = 1,
        seed: int = 0,
        split: str = "train",
        on_episode: Callable[[EpisodeSummary], None] | None = None,
    ) -> Feedback:
        task = TASKS[task] if isinstance(task, str) else task
        program = self.program(source) if isinstance(source, str) else source
        return evaluate(
            program,
            task,
            self.jobs(task, episodes, split=split, seed=seed),
            runner=self.runner,
            workers=workers,
            executor=self.executor,
            on_episode=on_episode,
        )

    def only(self, source: str | Program, task: Task | str = "cartpole") -> EpisodeSummary:
        """The summary of a one-episode evaluation."""
        return self.evaluate(source, task, 1).episodes[0]

    def hostile(
        self, source: str | Program, task: Task | str, episodes: int = 1, **options: Any
    ) -> Feedback:
        """Evaluate a hostile program, then check that the next episode on the same runner
        is unaffected: a healthy controller right after it balances CartPole for all 500
        steps, as it does on a fresh runner."""
        feedback = self.evaluate(source, task, episodes, **options)
        self.assert_healthy()
        return feedback

    def assert_healthy(self) -> None:
        good = self.only(GOOD_CARTPOLE, "cartpole")
        assert (good.status, good.steps, good.episode_return) == ("ok", 500, 500.0), good


def comparable(feedback: Feedback) -> dict[str, Any]:
    """Feedback without wall-clock times: what must be identical between replays."""
    return feedback.model_dump(
        mode="json", exclude={"seconds": True, "episodes": {"__all__": {"seconds"}}}
    )


# -- the process table ---------------------------------------------------------


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (zombies included), from /proc."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is not None and stat[1] == pid:
            found.append(int(entry))
    return found


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (``Z`` for a zombie), or None if it is gone."""
    stat = _stat(pid)
    return stat[0] if stat is not None else None


def strays_of(template: int) -> list[int]:
    """Children of the template other than an idle spare.

    The template keeps a few pre-forked spare processes in its own process group; every
    policy process leaves that group first thing, so any other child (or a
    zombie) is something an episode left behind.
    """
    own = _stat(template)
    assert own is not None, "the template process is gone"
    strays = []
    for pid in children_of(template):
        stat = _stat(pid)
        if stat is not None and (stat[0] == "Z" or stat[2] != own[2]):
            strays.append(pid)
    return strays


def spares_of(template: int) -> list[int]:
    """Children of the template other than its tidier: spares, and running episodes'
    policy processes."""
    found = []
    for pid in children_of(template):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == TIDIER_NAME:
                    continue
        except OSError:
            continue
        found.append(pid)
    return found


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, parent pid and process group of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])


def pids_with_cmdline(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline and process_state(int(entry)) not in (None, "Z"):
            found.append(int(entry))
    return found


IMPORTS = "import ctypes, os, signal, struct, sys, time"
FAST = with_limits("cartpole", act_seconds=0.3, startup_seconds=2.0, episode_seconds=5.0)


def line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def assert_failed(summary: object, code: Failure) -> None:
    assert getattr(summary, "status", None) == "failed", summary
    assert getattr(summary, "failure", None) == code, summary


@functools.cache
def _probe() -> sandbox.Probe:
    return sandbox.probe()


def needs(*layers: str) -> pytest.MarkDecorator:
    """Skip a test unless this machine gives every one of ``layers``, saying why not."""
    found = _probe()
    missing = [found.layers[name] for name in layers if not found.layers[name].available]
    reason = "; ".join(f"{layer.name} layer unavailable here: {layer.detail}" for layer in missing)
    return pytest.mark.skipif(bool(missing), reason=reason)
