"""Tasks: declarative TOML files, validated by pydantic, loaded without running code.

Owns the task model and loading (``model``), task families (``families``: one file,
many variants), which package extras are installed (``extras``) and the built-in
task files with their baselines (``builtin/``; ``random`` and ``noop`` are shared). More directories come from ``--tasks-dir`` or
``EVOPOLICY_TASKS``.

May import: nothing of the package (a leaf).
"""

from evopolicy_mcp.tasks.model import (
    BUILTIN_TASKS_DIR,
    Catalog,
    FamilyInfo,
    Task,
    TaskError,
    get_task,
    load_catalog,
    load_task_file,
    load_tasks,
    task_dirs,
    unavailable,
)

__all__ = [
    "BUILTIN_TASKS_DIR",
    "Catalog",
    "FamilyInfo",
    "Task",
    "TaskError",
    "get_task",
    "load_catalog",
    "load_task_file",
    "load_tasks",
    "task_dirs",
    "unavailable",
]
