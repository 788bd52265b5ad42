"""Runs bound to clients: which run (of which task) a client may use, and where its
programs may come from.

A server bound to one run (``serve --task T --run R``) serves that run to every
client. A server shared by several agents (``agent sweep``) binds each agent's
client, named by its bearer token, to that agent's run and workspace:

- the client sees its run only; any other run id is answered as no run at all;
- its ``program_dir`` must lie in its own workspace (its own
  :class:`~evopolicy_mcp.host.program_root.ProgramRoot`);
- a client with no binding reaches no run (its token does not even open the
  server; this is the second wall).

The launcher that started the server adds a binding before its agent starts and
drops it once the agent's session is over.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

from evopolicy_mcp.host.errors import HostError
from evopolicy_mcp.host.program_root import ProgramRoot
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.tasks.model import Task

__all__ = ["RUN_NAME", "Binding", "Bindings", "check_binding"]

RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_binding(tasks: dict[str, Task], store: Store, task_id: str, run_id: str) -> None:
    """ValueError unless run ``run_id`` of task ``task_id`` can be bound."""
    if task_id not in tasks:
        raise ValueError(f"cannot bind to unknown task {task_id!r}")
    if not RUN_NAME.fullmatch(run_id):
        raise ValueError(
            f"run name {run_id!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    existing = store.get_run(run_id)
    if existing is not None and existing.task_id != task_id:
        raise ValueError(f"run {run_id!r} already exists for task {existing.task_id!r}")


@dataclass(frozen=True)
class Binding:
    task: str
    run: str
    root: ProgramRoot | None = None  # None: the host's own program root


class Bindings:
    """The clients of a shared server and their runs. Thread-safe."""

    def __init__(self, tasks: dict[str, Task], store: Store) -> None:
        self._tasks, self._store = tasks, store
        self._by_client: dict[str, Binding] = {}
        self._lock = threading.Lock()

    def add(self, client: str, task_id: str, run_id: str, program_root: Path | None) -> None:
        """Bind ``client`` to run ``run_id`` of ``task_id``, its programs from
        ``program_root``; ValueError (nothing changed) if that cannot be."""
        check_binding(self._tasks, self._store, task_id, run_id)
        root = ProgramRoot(program_root, self._store.data_dir) if program_root else None
        with self._lock:
            taken = [c for c, b in self._by_client.items() if b.run == run_id and c != client]
            if taken:
                if root is not None:
                    root.close()
                raise ValueError(f"run {run_id!r} is bound to another client already")
            old = self._by_client.pop(client, None)
            self._by_client[client] = Binding(task_id, run_id, root)
        if old is not None and old.root is not None:
            old.root.close()

    def drop(self, client: str) -> Binding | None:
        with self._lock:
            old = self._by_client.pop(client, None)
        if old is not None and old.root is not None:
            old.root.close()
        return old

    def get(self, client: str | None) -> Binding:
        """The client's binding; ``unknown_run`` for a client with none."""
        with self._lock:
            found = self._by_client.get(client) if client is not None else None
        if found is None:
            raise HostError(
                "unknown_run", "this server serves only the runs its operator bound to clients"
            )
        return found

    def runs(self) -> list[str]:
        with self._lock:
            return [b.run for b in self._by_client.values()]

    def close(self) -> None:
        with self._lock:
            bound, self._by_client = list(self._by_client.values()), {}
        for b in bound:
            if b.root is not None:
                b.root.close()
