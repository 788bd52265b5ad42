"""The shipped tasks the tests sample: one per family in the default run, all of them
under the ``exhaustive`` marker. Tasks whose extra is not installed are left out here
(tests/tasks/test_extras.py checks what those say)."""

from __future__ import annotations

from evopolicy_mcp.tasks.model import Task, load_tasks, unavailable


def installed_tasks() -> list[Task]:
    return [t for t in load_tasks().values() if unavailable(t) is None]


def sample_tasks() -> list[Task]:
    """The first installed task of each family (id order)."""
    first: dict[str, Task] = {}
    for task in installed_tasks():
        first.setdefault(task.family, task)
    return list(first.values())
