"""The tools' JSON schemas as clients receive them, and arguments that fail them.

:func:`lean_schema` writes a schema the way an agent and a client need it:
references inlined, ``X | None`` as a type list, no generated titles and no
``additionalProperties: false`` noise (output schemas also drop defaults). The
documents described are the same.

:func:`argument_error` turns pydantic's report on rejected arguments (several
lines and a URL) into one sentence per argument naming what is allowed.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

__all__ = ["argument_error", "lean_schema"]

# Keys of a schema object that hold a mapping of name -> schema, not keywords.
_NAMED = ("properties", "patternProperties")


def lean_schema(schema: dict[str, Any], *, output: bool = False) -> dict[str, Any]:
    """``schema`` with every ``$ref`` inlined and the keys no reader needs left out.

    Clients validate each result against the output schema; reference lookups
    and ``anyOf`` branches made the SDK's own client spend ~30 ms on a
    100-submission ``run_status``. Titles repeat the property names, and
    ``tools/list`` goes into every agent's context.
    """
    defs = schema.get("$defs", {})
    # An output field whose default is null is left out rather than sent as null
    # (results are compact), so its schema need not allow null; descriptions of output
    # fields are for no reader (agents get the tool's description, not its output schema).
    dropped = {"title", "$defs"} | ({"default", "description"} if output else set())

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            rest = walk({k: v for k, v in node.items() if k != "$ref"})
            return {**target, **rest}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in dropped or (key == "additionalProperties" and isinstance(value, bool)):
                continue
            if key in _NAMED and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
                if output:
                    for name, sub in value.items():
                        if name not in node.get("required", ()) and sub.get("default", 0) is None:
                            out[key][name] = _not_null(out[key][name])
            else:
                out[key] = walk(value)
        branches = out.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
            other = branches[0] if branches[1] == {"type": "null"} else branches[1]
            if isinstance(other.get("type"), str):
                del out["anyOf"]
                out = {**other, **out, "type": [other["type"], "null"]}
        return out

    return walk(schema)


def _not_null(prop: dict[str, Any]) -> dict[str, Any]:
    kinds = prop.get("type")
    if isinstance(kinds, list) and "null" in kinds:
        rest = [k for k in kinds if k != "null"]
        return {**prop, "type": rest[0] if len(rest) == 1 else rest}
    return prop


_KINDS = {
    "number": "a number",
    "integer": "a whole number",
    "string": "a string",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_PLURAL = {"number": "numbers", "integer": "whole numbers", "string": "strings"}


def _allowed(prop: dict[str, Any]) -> str:
    """What a property accepts, in words: 'a number from 0 to 50'."""
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    types = prop.get("type", [])
    kinds = [types] if isinstance(types, str) else list(types)
    words = []
    for kind in (k for k in kinds if k != "null"):
        word = _KINDS.get(kind, kind)
        if kind == "array" and isinstance(prop.get("items"), dict):
            inner = prop["items"].get("type")
            word = f"a list of {_PLURAL.get(inner, 'items')}" if isinstance(inner, str) else word
            if prop.get("minItems"):
                word += (
                    f" with at least {prop['minItems']} item{'s' if prop['minItems'] > 1 else ''}"
                )
        if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
            inner = prop["additionalProperties"].get("type")
            if isinstance(inner, str):
                word = f"an object of {inner} values"
        words.append(word)
    text = " or ".join(words) or "a valid value"
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        text += f" from {low:g} to {high:g}"
    elif low is not None:
        text += f" of at least {low:g}"
    elif high is not None:
        text += f" of at most {high:g}"
    return text + (" (or null)" if "null" in kinds and words else "")


def _meaning(prop: dict[str, Any]) -> str:
    """What to give for a property: its type and, briefly, its description."""
    described = str(prop.get("description", ""))
    if len(described) > 120:
        described = described[:117] + "..."
    return _allowed(prop) + (f" ({described})" if described else "")


def _shown(value: Any) -> str:
    """A rejected value, briefly (never a large input echoed back)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        if len(value) <= 40:
            return f"the string {value!r}"
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def argument_error(error: ValidationError, schema: dict[str, Any]) -> str:
    """One sentence naming each rejected argument and what it allows."""
    props: dict[str, Any] = schema.get("properties", {})
    problems: dict[str, str] = {}
    for err in error.errors():
        loc = [str(part) for part in err.get("loc", ())]
        name = loc[0] if loc else "arguments"
        if name in problems:
            continue  # one sentence per argument (a union reports once per branch)
        prop = props.get(name)
        if err.get("type") == "missing":
            problems[name] = f"{name} is required" + (f": {_meaning(prop)}" if prop else "")
        elif prop is None:
            problems[name] = f"{name} is not an argument; the arguments are {', '.join(props)}"
        elif len(loc) > 1:
            where = name + "".join(f"[{part!r}]" for part in loc[1:])
            message = str(err.get("msg", "is not valid")).split("\n")[0]
            problems[name] = f"{where}: {message[:1].lower() + message[1:]}"
        else:
            problems[name] = f"{name} must be {_allowed(prop)}, not {_shown(err.get('input'))}"
    return "; ".join(problems.values()) + "."
