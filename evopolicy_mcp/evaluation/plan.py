"""What crosses an executor: an evaluation's plan, its episode jobs and their outcomes.

An executor that runs episodes elsewhere (a worker process, a Ray node)
rebuilds every episode from data, never from code: a :class:`Plan` names the
program (its content-addressed snapshot), the task (its validated model) and
what the feedback keeps; an :class:`EpisodeJob` is one episode's seeds; an
:class:`Outcome` is what the episode gave: its summary, its trace and its
files. On the wire each is JSON (plus raw file bytes, :func:`pack`), read back
through the same pydantic models and bounds the host uses for its own
episodes: nothing a worker sends is unpickled or evaluated, and a worker
learns an episode's seeds only with the job that runs it (never a run's secret).

Invariant: whatever the executor, an episode's outcome depends only on
(plan, job), so every executor gives the same feedback for the same seeds.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from evopolicy_mcp.adapters.protocol import ARTIFACT_BYTES
from evopolicy_mcp.evaluation.feedback import EpisodeSummary, Trace
from evopolicy_mcp.evaluation.snapshot import Program
from evopolicy_mcp.tasks.model import Task

__all__ = [
    "ARTIFACT_BYTES",
    "EpisodeJob",
    "EvaluationAborted",
    "Executor",
    "Outcome",
    "Plan",
    "WireError",
    "decode_outcome",
    "encode_outcome",
    "pack",
    "receive",
    "send",
    "unpack",
]

MESSAGE_BYTES = 96 << 20  # one message: a traced episode of pixels is ~10 MB of JSON


class EvaluationAborted(Exception):
    """A host or adapter fault stopped the evaluation. Nothing is a policy failure."""


class WireError(Exception):
    """A message between the host and a worker is malformed: a host fault."""


@dataclass(frozen=True)
class EpisodeJob:
    index: int
    env_seed: int
    policy_seed: int


@dataclass(frozen=True)
class Plan:
    """What every episode of one evaluation shares.

    ``traced``: the job indices whose steps are traced (training feedback only);
    ``reports``: whether the adapter's per-episode report is read; ``artifacts``:
    whether traced episodes keep the adapter's files. ``share`` names whose
    evaluation it is (a run): executors that queue episodes share their places
    fairly between shares. ``key`` tells one evaluation's plan from another's.
    """

    program: Program
    task: Task
    traced: frozenset[int] = frozenset()
    reports: bool = False
    artifacts: bool = False
    share: str = ""
    key: str = field(default_factory=lambda: uuid.uuid4().hex)

    def header(self) -> dict[str, Any]:
        """The plan as JSON, but the program, which each executor sends its own way."""
        return {
            "key": self.key,
            "task": self.task.model_dump(mode="json"),
            "traced": sorted(self.traced),
            "reports": self.reports,
            "artifacts": self.artifacts,
        }

    @classmethod
    def from_header(cls, header: dict[str, Any], program: Program) -> Plan:
        try:
            return cls(
                program=program,
                task=Task.model_validate(header["task"]),
                traced=frozenset(int(i) for i in header["traced"]),
                reports=bool(header["reports"]),
                artifacts=bool(header["artifacts"]),
                key=str(header["key"]),
            )
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            raise WireError(f"malformed plan: {str(exc)[:200]}") from None


@dataclass
class Outcome:
    """One finished episode: its summary, its step trace (traced episodes) and the
    files the adapter saved (traced training episodes), which the host stores."""

    summary: EpisodeSummary
    trace: Trace | None = None
    files: dict[str, bytes] = field(default_factory=dict)


class Executor(Protocol):
    """Runs a plan's episodes; returns their outcomes in job order.

    ``on_done`` is called once per finished episode, in completion order, from
    any thread; an exception it raises stops the evaluation and is re-raised. A
    host or adapter fault raises :class:`EvaluationAborted` (nothing of the
    evaluation is a policy failure). Thread-safe: several evaluations may run at
    once, and an executor that queues episodes serves their shares fairly.
    """

    def run(
        self,
        plan: Plan,
        jobs: Sequence[EpisodeJob],
        on_done: Callable[[Outcome], None] | None = None,
    ) -> list[Outcome]: ...

    def close(self) -> None: ...


# -- the wire ------------------------------------------------------------------------


_HEAD = struct.Struct("<II")  # header length, number of blobs
_BLOB = struct.Struct("<Q")


def pack(header: dict[str, Any], blobs: Sequence[bytes] = ()) -> bytes:
    """A message: a JSON header and raw byte strings, each with its length."""
    text = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    parts = [_HEAD.pack(len(text), len(blobs)), text]
    for blob in blobs:
        parts += [_BLOB.pack(len(blob)), blob]
    return b"".join(parts)


def unpack(data: bytes) -> tuple[dict[str, Any], list[bytes]]:
    """The header and blobs of a :func:`pack` message, checking every length."""
    view = memoryview(data)
    if len(view) < _HEAD.size:
        raise WireError("truncated message")
    size, count = _HEAD.unpack_from(view)
    at = _HEAD.size + size
    if at > len(view) or count > 1024:
        raise WireError("message header out of bounds")
    try:
        header = json.loads(bytes(view[_HEAD.size : at]))
    except ValueError as exc:
        raise WireError(f"message header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise WireError("message header is not an object")
    blobs = []
    for _ in range(count):
        if at + _BLOB.size > len(view):
            raise WireError("truncated message")
        (length,) = _BLOB.unpack_from(view, at)
        at += _BLOB.size
        if at + length > len(view):
            raise WireError("truncated message")
        blobs.append(bytes(view[at : at + length]))
        at += length
    if at != len(view):
        raise WireError("trailing bytes after a message")
    return header, blobs


def send(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_BLOB.pack(len(data)) + data)


def receive(sock: socket.socket, limit: int = MESSAGE_BYTES) -> bytes | None:
    """One whole message, or None at the end of the stream (the other side is gone)."""
    head = _read(sock, _BLOB.size)
    if head is None:
        return None
    (length,) = _BLOB.unpack(head)
    if length > limit:
        raise WireError(f"a message of {length} bytes is over the bound of {limit}")
    data = _read(sock, length)
    if data is None:
        return None
    return data


def _read(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def encode_outcome(outcome: Outcome) -> tuple[dict[str, Any], list[bytes]]:
    names = sorted(outcome.files)
    header = {
        "summary": outcome.summary.model_dump(mode="json"),
        "trace": outcome.trace.model_dump(mode="json") if outcome.trace is not None else None,
        "files": names,
    }
    return header, [outcome.files[name] for name in names]


def decode_outcome(header: dict[str, Any], blobs: list[bytes]) -> Outcome:
    """An outcome from a worker, through the models and bounds of the host's own episodes."""
    try:
        summary = EpisodeSummary.model_validate(header["summary"])
        trace = Trace.model_validate(header["trace"]) if header["trace"] is not None else None
        names = header["files"]
    except (KeyError, TypeError, ValidationError) as exc:
        raise WireError(f"malformed episode outcome: {str(exc)[:200]}") from None
    if not isinstance(names, list) or len(names) != len(blobs):
        raise WireError("malformed episode outcome: its files do not match their names")
    if sum(len(b) for b in blobs) > ARTIFACT_BYTES:
        raise WireError(f"an episode's files exceed {ARTIFACT_BYTES} bytes")
    for name in names:
        if not isinstance(name, str) or not plain_file_name(name):
            raise WireError(f"an episode's file {str(name)[:80]!r} is not a plain file name")
    return Outcome(summary, trace, dict(zip(names, blobs, strict=True)))


def plain_file_name(name: str) -> bool:
    return bool(name) and "/" not in name and not name.startswith(".") and os.sep not in name
