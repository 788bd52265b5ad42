"""The tasks an agent may list and read: the catalog, a client's binding to one task,
each task's public spec (its adapter's, loaded once). A part of
:class:`~evopolicy_mcp.host.authority.Host`.

Invariant: a task whose extra is missing, or whose adapter cannot load, is a
:class:`HostError` that names what to do, never an import traceback.
"""

from __future__ import annotations

import logging

from evopolicy_mcp.adapters.protocol import EnvSpec, load_adapter
from evopolicy_mcp.host.bindings import Binding
from evopolicy_mcp.host.errors import HostError
from evopolicy_mcp.host.public import task_info, task_list, task_spec
from evopolicy_mcp.host.views import TaskInfo, TaskList, TaskSpec
from evopolicy_mcp.tasks.families import FamilyInfo
from evopolicy_mcp.tasks.model import Task, unavailable, unknown_task

log = logging.getLogger(__name__)


class Catalog:
    """Listing and describing tasks (mixed into ``Host``)."""

    tasks: dict[str, Task]
    _families: dict[str, FamilyInfo]
    _specs: dict[str, EnvSpec]

    def _binding(self, client: str | None) -> Binding | None:
        raise NotImplementedError

    def list_tasks(self, family: str | None = None, *, client: str | None = None) -> list[TaskInfo]:
        return [task_info(t) for t in self._listed(family, client)]

    def task_list(
        self,
        family: str | None = None,
        *,
        offset: int = 0,
        max_chars: int | None = None,
        client: str | None = None,
    ) -> TaskList:
        """``list_tasks`` for an agent: a line per family, then the tasks in pages."""
        return task_list(
            self._listed(family, client), self._families, offset=offset, max_chars=max_chars
        )

    def _listed(self, family: str | None, client: str | None) -> list[Task]:
        tasks = list(self.tasks.values())
        bound = self._binding(client)
        if bound is not None:
            tasks = [t for t in tasks if t.id == bound.task]
        if family is not None:
            tasks = [t for t in tasks if t.family == family]
            if not tasks:
                known = ", ".join(sorted({t.family for t in self.tasks.values()})) or "none"
                raise HostError(
                    "unknown_task", f"no tasks in family {family[:60]!r}; families: {known}"
                )
        return tasks

    def task_info(self, task_id: str, *, client: str | None = None) -> TaskInfo:
        return task_info(self._task(task_id, client))

    def describe_task(
        self,
        task_id: str,
        *,
        page: int = 1,
        max_chars: int | None = None,
        client: str | None = None,
    ) -> TaskSpec:
        """The task's public spec: whole, or with ``max_chars`` page ``page`` of it."""
        task = self._task(task_id, client)
        return task_spec(task, self._spec(task), page=page, max_chars=max_chars)

    def _task(self, task_id: str, client: str | None = None) -> Task:
        bound = self._binding(client)
        if bound is not None and task_id != bound.task:
            raise HostError(
                "unknown_task", f"this server serves only task {bound.task!r}; use that id"
            )
        task = self.tasks.get(task_id)
        if task is None:
            raise HostError("unknown_task", unknown_task(task_id, self.tasks) + " (see list_tasks)")
        return task

    def _spec(self, task: Task) -> EnvSpec:
        if task.id not in self._specs:
            self._check_available(task)
            try:
                self._specs[task.id] = load_adapter(task.adapter).spec(task.parameters)
            except Exception as exc:  # AdapterError, or a broken plugin
                log.error("task %s: adapter %s unavailable: %s", task.id, task.adapter, exc)
                raise HostError(
                    "task_unavailable",
                    f"the environment of task {task.id!r} ({task.adapter}) cannot be loaded "
                    "on this server; choose another task and tell the operator",
                ) from None
        return self._specs[task.id]

    @staticmethod
    def _check_available(task: Task) -> None:
        missing = unavailable(task)
        if missing is not None:
            raise HostError(
                "task_unavailable",
                f"{missing}. Choose another task (list_tasks shows available = true) or ask "
                "the operator to install it",
            )
