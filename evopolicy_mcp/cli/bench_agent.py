"""``evopolicy-mcp bench --agent-sandbox``: what confining an agent CLI costs at its start.

Measures, alternating the variants round by round (the machine's speed drifts):

- starting ``/bin/true`` directly, as ``agent run --no-confine`` starts a CLI;
- through the jail (:mod:`evopolicy_mcp.agents.jail`) with no layer (the cost of
  its Python interpreter), with each layer alone, and with every layer and the
  grants ``agent run`` gives (what a confined CLI pays);
- through bubblewrap with a comparable set-up, where ``bwrap`` is installed
  (Debian ``bubblewrap``), for comparison only: ``agent run`` does not use it;
- once each: the probe of the layers (once per launcher) and deciding the
  grants of one launch;
- the run's server from start to its first HTTP answer (``agent run`` waits
  for it before the CLI starts).

It prints figures and asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["print_agent_bench", "run_agent_bench"]

ROUNDS = 20
TRUE = "/bin/true"
BWRAP = [
    "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64",
    "/lib64", "--symlink", "usr/bin", "/bin", "--ro-bind", "/etc", "/etc", "--proc", "/proc",
    "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--die-with-parent",
    "--new-session", "--cap-drop", "ALL",
]  # fmt: skip


def _time(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def _variants(root: Path) -> dict[str, Callable[[], object]]:
    from evopolicy_mcp.agents.confine import Jail, Reach, jail_for
    from evopolicy_mcp.agents.jail import LAYERS, JailSpec

    found_layers = [n for n, layer in _probe().items() if layer.available]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.expanduser("~")}
    workspace = root / "workspace"
    workspace.mkdir()
    reach = Reach(workspace, TRUE, (), (root / "data",))
    full = jail_for("default", reach, env)

    def confined(jail: Jail) -> Callable[[], object]:
        def run() -> None:
            with jail.command([TRUE]) as (argv, fds):
                subprocess.run(argv, pass_fds=fds, cwd=workspace, check=True)

        return run

    variants: dict[str, Callable[[], object]] = {
        "direct": lambda: subprocess.run([TRUE], check=True),
        "jail, no layer": confined(Jail(JailSpec(layers=()))),
    }
    assert full.spec is not None
    for name in LAYERS:
        if name in found_layers and name != "signals":
            layers = (name,)
            variants[f"jail, {name} only"] = confined(
                Jail(JailSpec(layers, full.spec.read, full.spec.write, ("/proc",), full.spec.links))
            )
    variants["jail, every layer (agent run)"] = confined(full)
    if shutil.which("bwrap"):
        as_root = ["--unshare-user", "--uid", "0"] if os.geteuid() == 0 else []
        argv = ["bwrap", *as_root, *BWRAP, TRUE]
        variants["bubblewrap (comparison)"] = lambda: subprocess.run(argv, check=True)
    return variants


def _probe() -> dict[str, Any]:
    from evopolicy_mcp.agents import confine

    return confine.probe()


def run_agent_bench(rounds: int = ROUNDS) -> dict[str, Any]:
    from evopolicy_mcp.agents import confine
    from evopolicy_mcp.agents.confine import Reach, jail_for
    from evopolicy_mcp.agents.endpoint import RunServer

    confine.probe.cache_clear()
    probe_ms = _time(lambda: confine.probe())
    figures: dict[str, Any] = {"rounds": rounds, "probe_ms": round(probe_ms, 1)}
    with tempfile.TemporaryDirectory(prefix="evopolicy-bench-agent-") as tmp:
        root = Path(tmp)
        variants = _variants(root)
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, run in variants.items():
                samples[name].append(_time(run))
        figures["start_ms"] = {
            name: {"median": round(statistics.median(s), 2), "min": round(min(s), 2)}
            for name, s in samples.items()
        }
        reach = Reach(root / "workspace", TRUE, (), (root / "data",))
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.path.expanduser("~")}
        figures["grants_ms"] = round(_time(lambda: jail_for("default", reach, env).close()), 2)
        ready = []
        for i in range(3):
            server = RunServer(root / f"data{i}")
            server.bind()
            (root / f"log{i}").mkdir()
            ready.append(_time(lambda s=server, i=i: s.start(root / f"log{i}")))  # type: ignore[misc]
            server.stop()
        figures["server_ready_ms"] = round(statistics.median(ready), 1)
    return figures


def print_agent_bench(f: dict[str, Any]) -> None:
    print(f"agent sandbox start-up, {f['rounds']} rounds (ms; median, min):")
    for name, s in f["start_ms"].items():
        print(f"  {name:<34} {s['median']:8.2f} {s['min']:8.2f}")
    print(f"probe of the layers (once per launcher): {f['probe_ms']:.1f} ms")
    print(f"grants of one launch: {f['grants_ms']:.2f} ms")
    print(f"the run's server, start to first HTTP answer: {f['server_ready_ms']:.1f} ms")
