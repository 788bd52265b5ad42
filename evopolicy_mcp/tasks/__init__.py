"""Tasks: declarative TOML files, validated by pydantic, loaded without running code.

Owns the task model and loading (``model``) and the built-in task files with their
baselines (``builtin/``). More directories come from ``--tasks-dir`` or
``EVOPOLICY_TASKS``.

May import: nothing of the package (a leaf).
"""

from evopolicy_mcp.tasks.model import (
    BUILTIN_TASKS_DIR,
    Task,
    TaskError,
    get_task,
    load_task_file,
    load_tasks,
    task_dirs,
)

__all__ = [
    "BUILTIN_TASKS_DIR",
    "Task",
    "TaskError",
    "get_task",
    "load_task_file",
    "load_tasks",
    "task_dirs",
]
