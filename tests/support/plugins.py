"""An adapter plugin made for a test: a real package with an entry point, on the path of
the test process and of the worker processes it starts.

``killer``: the Gymnasium adapter, but its episodes kill the process that steps them
(SIGKILL at step 3) unless that process is the test's own: a worker, or an actor,
that dies in the middle of an episode, each time it runs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

KILLER = "killer"

_MODULE = """\
import os
import signal

from evopolicy_mcp.environments.gymnasium_adapter import make_adapter as _gymnasium

SPARED = {spared}


class Killer:
    name = "killer"

    def __init__(self):
        self.inner = _gymnasium()

    def spec(self, parameters):
        return self.inner.spec(parameters)

    def make_episode(self, parameters, seed):
        return Episode(self.inner.make_episode(parameters, seed))


class Episode:
    def __init__(self, inner):
        self.inner, self.steps = inner, 0

    def reset(self):
        return self.inner.reset()

    def step(self, action):
        self.steps += 1
        if self.steps == 3 and os.getpid() != SPARED:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.step(action)

    def metrics(self):
        return self.inner.metrics()

    def close(self):
        self.inner.close()


def make_adapter():
    return Killer()
"""


def install_killer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Install the ``killer`` adapter for this test and the processes it starts."""
    root = tmp_path / "plugins"
    info = root / "evopolicy_killer-0.dist-info"
    info.mkdir(parents=True)
    (root / "evopolicy_killer.py").write_text(_MODULE.format(spared=os.getpid()))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evopolicy-killer\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[evopolicy_mcp.environments]\nkiller = evopolicy_killer:make_adapter\n"
    )
    monkeypatch.syspath_prepend(str(root))
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", f"{root}{os.pathsep}{path}" if path else str(root))
    return KILLER
