"""Task families: one TOML file declares many tasks as variants of one family.

A family file has a ``[family]`` table instead of a task's ``id``::

    [family]
    id = "minigrid"
    title = "MiniGrid: gridworld navigation with keys, doors and lava"
    summary = "one line for the family"
    extra = "minigrid"                # the package extra its tasks need (optional)

    [defaults]                        # task fields every variant starts from
    adapter = "minigrid"
    baseline = "random"
    description = "Reach the goal in the ${size} grid ..."
    [defaults.parameters]
    env_id = "MiniGrid-DoorKey-${size}-v0"
    ...

    [[variants]]                      # one task each: id "minigrid/doorkey-8x8"
    id = "doorkey-8x8"
    vars = { size = "8x8" }
    # any task field here overrides the defaults (tables merge key by key)

    [[modes]]                         # optional: every variant once per mode
    suffix = "-ram"                   # appended to the variant's id ("" for none)
    vars = { observation = "the 128 bytes of RAM" }

A variant is the defaults, then its mode, then its own fields, merged table by
table. ``${name}`` in any string is replaced by the family's, the mode's or the
variant's ``vars`` (the variant's win), or by ``family``, ``variant`` and
``id``; ``$$`` is a literal ``$``. Nothing here runs code from the file.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

__all__ = ["FamilyInfo", "expand_family", "is_family"]

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_FAMILY_KEYS = {"id", "title", "summary", "extra", "vars"}
_SECTION_KEYS = {"family", "defaults", "variants", "modes"}


class FamilyInfo:
    """What a family file says about the family itself."""

    def __init__(self, id: str, title: str, summary: str, extra: str | None) -> None:
        self.id = id
        self.title = title
        self.summary = summary
        self.extra = extra

    def __repr__(self) -> str:
        return f"FamilyInfo({self.id!r})"


def is_family(data: Mapping[str, Any]) -> bool:
    return isinstance(data.get("family"), Mapping)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _substitute(value: Any, names: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):
        try:
            return string.Template(value).substitute(names)
        except KeyError as exc:
            raise ValueError(f"{where}: no var {exc.args[0]!r} for ${{{exc.args[0]}}}") from None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc} (write $$ for a literal $)") from None
    if isinstance(value, list):
        return [_substitute(v, names, where) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, names, where) for k, v in value.items()}
    return value


def _vars(table: Mapping[str, Any], where: str) -> dict[str, str]:
    found = table.get("vars", {})
    if not isinstance(found, Mapping) or not all(
        isinstance(v, str | int | float) and not isinstance(v, bool) for v in found.values()
    ):
        raise ValueError(f"{where}: vars must be a table of strings or numbers")
    return {k: str(v) for k, v in found.items()}


def _table_list(data: Mapping[str, Any], key: str, default: list[Any]) -> list[dict[str, Any]]:
    items = data.get(key, default)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ValueError(f"{key} must be an array of tables ([[{key}]])")
    return items


def expand_family(data: Mapping[str, Any]) -> tuple[FamilyInfo, list[dict[str, Any]]]:
    """The family and one raw task table per variant (and mode), ids ``family/variant``.

    Raises ValueError naming the variant and the problem.
    """
    unknown = sorted(set(data) - _SECTION_KEYS)
    if unknown:
        raise ValueError(
            f"unknown key(s) {unknown} in a family file (allowed: {sorted(_SECTION_KEYS)})"
        )
    head = data["family"]
    if not isinstance(head, Mapping):
        raise ValueError("[family] must be a table")
    stray = sorted(set(head) - _FAMILY_KEYS)
    if stray:
        raise ValueError(f"unknown key(s) {stray} in [family] (allowed: {sorted(_FAMILY_KEYS)})")
    family_id = head.get("id")
    if not isinstance(family_id, str) or not _NAME.fullmatch(family_id):
        raise ValueError(
            f"family.id must be lower-case letters, digits, '-', '_' or '.', got {family_id!r}"
        )
    extra = head.get("extra")
    if extra is not None and (not isinstance(extra, str) or not _NAME.fullmatch(extra)):
        raise ValueError(f"family.extra must be an extra's name, got {extra!r}")
    info = FamilyInfo(
        family_id, str(head.get("title", family_id)), str(head.get("summary", "")), extra
    )
    defaults = data.get("defaults", {})
    if not isinstance(defaults, Mapping):
        raise ValueError("[defaults] must be a table")
    if "id" in defaults:
        raise ValueError("[defaults] cannot set id; each variant has its own")
    family_vars = _vars(head, "[family]")
    variants = _table_list(data, "variants", [])
    if not variants:
        raise ValueError("a family declares at least one [[variants]]")
    modes = _table_list(data, "modes", [{"suffix": ""}])
    tasks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for mode in modes:
        suffix = mode.get("suffix", "")
        if not isinstance(suffix, str) or (suffix and not re.fullmatch(r"[a-z0-9_.-]+", suffix)):
            raise ValueError(f"mode suffix must be a short lower-case name, got {suffix!r}")
        mode_vars = _vars(mode, f"mode {suffix!r}")
        mode_fields = {k: v for k, v in mode.items() if k not in ("suffix", "vars")}
        for variant in variants:
            name = variant.get("id")
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ValueError(
                    f"variant id must be lower-case letters, digits, '-', '_' or '.', got {name!r}"
                )
            variant_id = name + suffix
            task_id = f"{family_id}/{variant_id}"
            if task_id in seen:
                raise ValueError(f"two variants make the task id {task_id!r}")
            seen.add(task_id)
            where = f"variant {variant_id!r}"
            names = {
                **family_vars,
                **mode_vars,
                **_vars(variant, where),
                "family": family_id,
                "variant": variant_id,
                "id": task_id,
            }
            fields = {k: v for k, v in variant.items() if k not in ("id", "vars")}
            merged = _merge(_merge(defaults, mode_fields), fields)
            task = _substitute(merged, names, where)
            task["id"] = task_id
            task.setdefault("family", family_id)
            if extra is not None:
                task.setdefault("extra", extra)
            tasks.append(task)
    return info, tasks
