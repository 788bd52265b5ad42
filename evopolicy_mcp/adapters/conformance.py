"""The adapter conformance checker: what an adapter author runs on a new adapter.

``check_adapter("my_env")`` loads the adapter through its entry point and
checks the contract the host relies on::

    >>> from evopolicy_mcp.adapters.conformance import check_adapter, render
    >>> print(render(check_adapter("gymnasium", {"env_id": "CartPole-v1"})))  # doctest: +SKIP
    PASS loads: ...

Checks: the factory loads; ``spec()`` gives JSON-serialisable space dicts with
a ``type``; the same seed and actions replay the same episode, in this process
and in a fresh one (another hash seed: set iteration order must not matter); observations,
rewards and flags have allowed types; every example from
:func:`evopolicy_mcp.adapters.spaces.invalid_actions` raises ``InvalidAction`` (and
nothing else); array actions are accepted; ``metrics()`` returns floats under
the declared names; the episode ends within ``max_steps``; ``close()`` is safe
at any time and twice. That different seeds give different episodes is
reported, not required (an environment may be deterministic). A sampled action
inside the space that the episode's state forbids (a move into a wall, an
upgrade you cannot afford) raises ``InvalidAction`` and ends that episode, as it
would end a policy's; the replay must end the same way.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evopolicy_mcp.adapters.protocol import (
    ARTIFACT_BYTES,
    Adapter,
    AdapterError,
    EnvSpec,
    InvalidAction,
    load_adapter,
)
from evopolicy_mcp.adapters.spaces import (
    invalid_actions,
    observation_problem,
    same_value,
    sample_action,
)

__all__ = [
    "Check",
    "check_adapter",
    "check_loaded",
    "feed_digest",
    "render",
    "trajectory_digest",
]

HORIZON_CAP = 100_000  # longest max_steps the horizon check will walk


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


def render(checks: Sequence[Check]) -> str:
    """One line per check, ``PASS``/``FAIL``, for a terminal."""
    return "\n".join(
        f"{'PASS' if c.ok else 'FAIL'} {c.name}" + (f": {c.detail}" if c.detail else "")
        for c in checks
    )


def check_adapter(
    name: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    seeds: Sequence[int] = (1, 2),
    steps: int = 200,
) -> list[Check]:
    """Load adapter ``name`` through its entry point and check it.

    ``parameters=None`` uses the adapter's ``example_parameters`` attribute
    (or ``{}``). ``seeds`` are the episode seeds tried; ``steps`` caps each
    replayed episode.
    """
    try:
        adapter = load_adapter(name)
    except AdapterError as exc:
        return [Check("loads", False, str(exc))]
    kind = type(adapter)
    loaded = Check("loads", True, f"entry point {name!r} -> {kind.__module__}.{kind.__qualname__}")
    checks = [loaded, *check_loaded(adapter, parameters, seeds=seeds, steps=steps)]
    if all(c.ok for c in checks):
        if parameters is None:
            parameters = dict(getattr(adapter, "example_parameters", None) or {})
        checks.append(_check_across_processes(name, adapter, parameters, seeds[0], steps))
    return checks


def trajectory_digest(
    adapter: Adapter, parameters: Mapping[str, Any], seed: int, steps: int
) -> str:
    """sha256 of one episode with actions sampled from ``random.Random(seed)``."""
    spec = adapter.spec(parameters)
    run = _rollout(adapter, parameters, spec, seed, steps)
    digest = hashlib.sha256()
    for item in [*run.records, run.metrics]:
        feed_digest(digest, item)
    return digest.hexdigest()


def feed_digest(digest: Any, value: Any) -> None:
    """Add ``value`` (an observation, action, metrics: arrays, lists, dicts, scalars) to a
    hashlib ``digest``, type and shape included."""
    if isinstance(value, np.ndarray):
        digest.update(f"a{value.dtype.str}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, list | tuple):
        digest.update(f"l{len(value)}".encode())
        for item in value:
            feed_digest(digest, item)
    elif isinstance(value, dict):
        digest.update(f"m{len(value)}".encode())
        for key, item in value.items():
            feed_digest(digest, key)
            feed_digest(digest, item)
    else:
        digest.update(f"{type(value).__name__}:{value!r};".encode())


CHILD_SECONDS = 300


def _check_across_processes(
    name: str, adapter: Adapter, parameters: Mapping[str, Any], seed: int, steps: int
) -> Check:
    """The same episode in a fresh interpreter with another hash seed."""
    here = trajectory_digest(adapter, parameters, seed, steps)
    command = [
        sys.executable,
        "-m",
        "evopolicy_mcp.adapters.conformance",
        name,
        json.dumps(dict(parameters)),
        str(seed),
        str(steps),
    ]
    env = {**os.environ, "PYTHONHASHSEED": str(random.Random(seed).randrange(1, 2**32 - 1))}
    try:
        child = subprocess.run(
            command, capture_output=True, text=True, timeout=CHILD_SECONDS, env=env
        )
    except subprocess.TimeoutExpired:
        return Check(
            "deterministic_across_processes",
            False,
            f"the fresh process took over {CHILD_SECONDS} s",
        )
    lines = child.stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        tail = (child.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return Check("deterministic_across_processes", False, f"the fresh process failed: {tail}")
    if lines[-1] != here:
        return Check(
            "deterministic_across_processes",
            False,
            f"seed {seed} gives another episode in a fresh process (another hash seed): set "
            "or dict iteration order, or unseeded randomness, reaches the environment",
        )
    return Check(
        "deterministic_across_processes",
        True,
        f"seed {seed} replays identically in a fresh process",
    )


def _fault(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass
class _Trajectory:
    seed: int
    records: list[tuple[Any, ...]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    metrics: Any = None
    invalid: bool = False  # ended on a sampled action the episode's state forbids


def check_loaded(
    adapter: Adapter,
    parameters: Mapping[str, Any] | None = None,
    *,
    seeds: Sequence[int] = (1, 2),
    steps: int = 200,
) -> list[Check]:
    """Check an adapter object (the part of :func:`check_adapter` after loading)."""
    checks: list[Check] = []
    if parameters is None:
        parameters = dict(getattr(adapter, "example_parameters", None) or {})
        checks.append(Check("parameters", True, f"using example_parameters {parameters}"))
    try:
        spec = adapter.spec(parameters)
    except Exception as exc:
        return [*checks, Check("spec", False, f"spec() raised {_fault(exc)}")]
    problem = _spec_problem(spec)
    checks.append(Check("spec", problem is None, problem or "spaces are JSON with a 'type'"))
    if problem:
        return checks

    try:
        runs = [(_rollout(adapter, parameters, spec, s, steps), s) for s in seeds for _ in (0, 1)]
    except Exception as exc:
        return [*checks, Check("episodes", False, f"an episode failed: {_fault(exc)}")]
    pairs = [(runs[i][0], runs[i + 1][0]) for i in range(0, len(runs), 2)]
    diverged = [f"seed {a.seed}: {d}" for a, b in pairs if (d := _difference(a, b))]
    ended = [t for t, _ in runs if t.invalid]
    note = (
        f" ({len(ended)} of {len(runs)} sampled episodes ended after "
        f"{min(len(t.records) - 2 for t in ended)}+ steps on an action the state forbids)"
        if ended
        else ""
    )
    checks.append(
        Check(
            "deterministic_replay",
            not diverged,
            "; ".join(diverged) or f"seeds {list(seeds)} replay identically{note}",
        )
    )
    if len(pairs) > 1:
        same = not _difference(pairs[0][0], pairs[1][0])
        checks.append(
            Check(
                "seeds_differ",
                True,
                f"seeds {seeds[0]} and {seeds[1]} give "
                + (
                    "identical episodes (fine for a deterministic environment)"
                    if same
                    else "different episodes"
                ),
            )
        )
    problems = sorted({p for t, _ in runs for p in t.problems})
    checks.append(Check("observation_and_step_types", not problems, "; ".join(problems[:5])))
    checks.append(_check_metrics(spec, [t.metrics for t, _ in runs], adapter, parameters, seeds[0]))
    checks.append(_check_invalid(adapter, parameters, spec, seeds[0]))
    checks.append(_check_array_actions(adapter, parameters, spec, seeds[0]))
    checks.append(_check_horizon(adapter, parameters, spec, seeds[0]))
    checks.append(_check_artifacts(adapter, parameters, spec, seeds[0], steps))
    checks.append(_check_close(adapter, parameters, seeds[0]))
    return checks


def _check_artifacts(
    adapter: Adapter, parameters: Mapping[str, Any], spec: EnvSpec, seed: int, steps: int
) -> Check:
    """Files of a traced episode (a replay): plain names, bytes, within ARTIFACT_BYTES."""
    rng = random.Random(seed)

    def play(episode: Any) -> Any:
        if not hasattr(episode, "artifacts"):
            return None
        episode.reset()
        for _ in range(steps):
            step = _sampled_step(episode, spec, rng)
            if step is None or step.terminated or step.truncated:
                break
        files = episode.artifacts()
        report = episode.report() if hasattr(episode, "report") else None
        return files, report

    try:
        made = _with_episode(adapter, parameters, seed, play)
    except Exception as exc:
        return Check("artifacts", False, f"artifacts() raised {_fault(exc)}")
    if made is None:
        return Check("artifacts", True, "no artifacts() (optional)")
    files, report = made
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and k and "/" not in k and not k.startswith(".") and isinstance(v, bytes)
        for k, v in files.items()
    ):
        return Check("artifacts", False, "artifacts() must return {plain file name: bytes}")
    size = sum(len(v) for v in files.values())
    if size > ARTIFACT_BYTES:
        return Check("artifacts", False, f"artifacts() gave {size} bytes, over {ARTIFACT_BYTES}")
    listed = ", ".join(f"{k} ({len(v)} bytes)" for k, v in sorted(files.items())) or "none"
    note = f"; report: {json.dumps(report)[:200]}" if report else ""
    return Check("artifacts", True, f"files: {listed}{note}")


def _spec_problem(spec: Any) -> str | None:
    if not isinstance(spec, EnvSpec):
        return f"spec() returned {type(spec).__name__}, not adapters.EnvSpec"
    for label in ("observation_space", "action_space"):
        space = getattr(spec, label)
        if not isinstance(space, dict) or not isinstance(space.get("type"), str):
            return f"{label} must be a dict with a str 'type', got {space!r:.80}"
    for label in ("observation_space", "action_space", "metadata", "metrics"):
        try:
            json.dumps(getattr(spec, label), allow_nan=False)
        except (TypeError, ValueError) as exc:
            return f"{label} is not JSON-serialisable ({exc}); use null for unbounded"
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in spec.metrics.items()):
        return "metrics must map metric names to their meanings (str -> str)"
    if spec.max_steps is not None and (isinstance(spec.max_steps, bool) or spec.max_steps < 1):
        return f"max_steps must be None or a positive int, got {spec.max_steps!r}"
    try:
        sample_action(spec.action_space, random.Random(0))
    except Exception as exc:
        return (
            f"action_space cannot be sampled ({_fault(exc)}); build it with "
            "evopolicy_mcp.adapters.spaces (discrete, box, tuple_of, dict_of, ...)"
        )
    return None


def _episode(adapter: Adapter, parameters: Mapping[str, Any], seed: int) -> Any:
    return adapter.make_episode(parameters, seed)


def _rollout(
    adapter: Adapter, parameters: Mapping[str, Any], spec: EnvSpec, seed: int, steps: int
) -> _Trajectory:
    """One episode with actions sampled from ``random.Random(seed)``."""
    out = _Trajectory(seed)
    rng = random.Random(seed)
    episode = _episode(adapter, parameters, seed)
    try:
        obs = episode.reset()
        out.records.append(("reset", obs))
        _note(out.problems, observation_problem(obs, "reset() observation"))
        for _ in range(steps):
            action = sample_action(spec.action_space, rng)
            try:
                step = episode.step(action)
            except InvalidAction as exc:
                out.records.append((action, "invalid_action", str(exc)))
                out.invalid = True
                break
            out.records.append(
                (action, step.observation, step.reward, step.terminated, step.truncated)
            )
            _note(out.problems, observation_problem(step.observation, "step() observation"))
            _note(out.problems, _step_problem(step))
            if step.terminated or step.truncated:
                break
        out.metrics = episode.metrics()
    finally:
        episode.close()
    return out


def _sampled_step(episode: Any, spec: EnvSpec, rng: random.Random) -> Any:
    """One step with a sampled action, or None when the episode's state forbids that action
    (InvalidAction): inside the space but against the rules now, it ends the episode as it
    would end a policy's."""
    try:
        return episode.step(sample_action(spec.action_space, rng))
    except InvalidAction:
        return None


def _note(problems: list[str], problem: str | None) -> None:
    if problem:
        problems.append(problem)


def _step_problem(step: Any) -> str | None:
    reward = step.reward
    if type(reward) not in (float, int) or not math.isfinite(reward):
        return f"reward must be a finite Python float, got {reward!r} ({type(reward).__name__})"
    for flag in ("terminated", "truncated"):
        value = getattr(step, flag)
        if type(value) is not bool:
            return f"{flag} must be a Python bool, got {type(value).__name__}"
    return None


def _difference(a: _Trajectory, b: _Trajectory) -> str | None:
    if len(a.records) != len(b.records):
        return f"lengths differ ({len(a.records) - 1} vs {len(b.records) - 1} steps)"
    for t, (ra, rb) in enumerate(zip(a.records, b.records, strict=True)):
        if not same_value(ra, rb):
            return f"step {t} differs: {ra!r:.120} vs {rb!r:.120}"
    if not same_value(a.metrics, b.metrics):
        return f"metrics differ: {a.metrics!r} vs {b.metrics!r}"
    return None


def _check_metrics(
    spec: EnvSpec, seen: list[Any], adapter: Adapter, parameters: Mapping[str, Any], seed: int
) -> Check:
    try:  # a policy can fail before its first step; metrics() must still answer
        seen = [
            *seen,
            _with_episode(adapter, parameters, seed, lambda e: (e.reset(), e.metrics())[1]),
        ]
    except Exception as exc:
        return Check("metrics", False, f"metrics() right after reset() raised {_fault(exc)}")
    declared = set(spec.metrics)
    for metrics in seen:
        if not isinstance(metrics, dict):
            return Check("metrics", False, f"metrics() returned {type(metrics).__name__}, not dict")
        if set(metrics) != declared:
            return Check(
                "metrics",
                False,
                f"metrics() names {sorted(metrics)} but spec declares {sorted(declared)}",
            )
        for key, value in metrics.items():
            if type(value) not in (float, int):
                return Check(
                    "metrics",
                    False,
                    f"metric {key!r} is {type(value).__name__}; return a Python float",
                )
    return Check("metrics", True, f"names {sorted(declared)}")


def _with_episode(
    adapter: Adapter, parameters: Mapping[str, Any], seed: int, use: Callable[[Any], Any]
) -> Any:
    episode = _episode(adapter, parameters, seed)
    try:
        return use(episode)
    finally:
        episode.close()


def _check_invalid(
    adapter: Adapter, parameters: Mapping[str, Any], spec: EnvSpec, seed: int
) -> Check:
    wrong: list[str] = []
    examples = invalid_actions(spec.action_space)
    for bad in examples:

        def attempt(episode: Any, action: Any = bad) -> None:
            episode.reset()
            episode.step(action)

        try:
            _with_episode(adapter, parameters, seed, attempt)
        except InvalidAction:
            continue
        except Exception as exc:
            wrong.append(f"{bad!r:.60} raised {_fault(exc)} instead of InvalidAction")
        else:
            wrong.append(f"{bad!r:.60} was accepted")
    detail = "; ".join(wrong[:6]) or f"{len(examples)} invalid actions rejected"
    return Check("invalid_actions", not wrong, detail)


def _check_array_actions(
    adapter: Adapter, parameters: Mapping[str, Any], spec: EnvSpec, seed: int
) -> Check:
    """Policies often return numpy arrays; the runner passes arrays on as they are."""
    space = spec.action_space
    if space["type"] not in ("box", "multi_discrete", "multi_binary"):
        return Check("array_actions", True, f"not applicable to a {space['type']} action space")
    action = sample_action(space, random.Random(seed))
    dtype = space.get("dtype", "int64")
    array = np.asarray(action, dtype=dtype)
    try:
        _with_episode(adapter, parameters, seed, lambda e: (e.reset(), e.step(array)))
    except InvalidAction as exc:
        # Allowed only where the same action as a list is refused the same way: the
        # episode's state forbids it, not its form.
        try:
            _with_episode(adapter, parameters, seed, lambda e: (e.reset(), e.step(action)))
        except InvalidAction as plain:
            if str(plain) == str(exc):
                return Check("array_actions", True, f"numpy {dtype} arrays as lists: {exc}")
        return Check("array_actions", False, f"numpy array {array!r} raised {_fault(exc)}")
    except Exception as exc:
        return Check("array_actions", False, f"numpy array {array!r} raised {_fault(exc)}")
    return Check("array_actions", True, f"numpy {dtype} arrays accepted")


def _check_horizon(
    adapter: Adapter, parameters: Mapping[str, Any], spec: EnvSpec, seed: int
) -> Check:
    if spec.max_steps is None:
        return Check("horizon", True, "no max_steps: only limits.episode_seconds bounds an episode")
    if spec.max_steps > HORIZON_CAP:
        return Check("horizon", True, f"max_steps {spec.max_steps} too long to walk; skipped")
    rng = random.Random(seed)
    limit = spec.max_steps

    def walk(episode: Any) -> int:
        episode.reset()
        for t in range(1, limit + 1):
            step = _sampled_step(episode, spec, rng)
            if step is None or step.terminated or step.truncated:
                return t
        return limit + 1

    try:
        ended = _with_episode(adapter, parameters, seed, walk)
    except Exception as exc:
        return Check("horizon", False, f"a long episode failed: {_fault(exc)}")
    if ended > spec.max_steps:
        return Check("horizon", False, f"still running after max_steps = {spec.max_steps} steps")
    return Check("horizon", True, f"ended after {ended} steps (max_steps {spec.max_steps})")


def _check_close(adapter: Adapter, parameters: Mapping[str, Any], seed: int) -> Check:
    try:
        fresh = _episode(adapter, parameters, seed)
        fresh.close()  # never reset: a policy can fail to start
        fresh.close()
        used = _episode(adapter, parameters, seed)
        used.reset()
        used.close()
        used.close()
    except Exception as exc:
        return Check("close", False, f"close() raised {_fault(exc)}")
    return Check("close", True, "safe before reset and twice")


def _main(argv: Sequence[str]) -> int:
    """``python -m evopolicy_mcp.adapters.conformance NAME PARAMETERS SEED STEPS``: print
    the trajectory digest (what the cross-process check compares)."""
    name, parameters, seed, steps = argv
    print(trajectory_digest(load_adapter(name), json.loads(parameters), int(seed), int(steps)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
