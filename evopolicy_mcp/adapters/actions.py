"""Actions: strict validation against a space description, sampling, counter-examples.

Validation never clips or repairs. An action outside the space raises
:class:`~evopolicy_mcp.adapters.protocol.InvalidAction` with a message that says what
was expected and what came, naming the offending component::

    >>> from evopolicy_mcp.adapters.spaces import box
    >>> check = action_validator(box(-2.0, 2.0, (1,), names=["torque"]))
    >>> check([3.0])
    Traceback (most recent call last):
    ...
    evopolicy_mcp.adapters.protocol.InvalidAction: action[0] (torque) = 3 is above high 2

Accepted forms: a discrete action is an int (numpy integers too; never bool,
float or str). A box action is a list, tuple or numpy array of exactly the
declared shape, holding finite numbers within ``[low, high]``; a bare number
only for shape ``[]``. A text action is a str of allowed length and characters; a
sequence action a list (or tuple) of valid items. ``sample_action`` and
``invalid_actions`` serve the adapter conformance checker.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from evopolicy_mcp.adapters.protocol import InvalidAction

__all__ = [
    "Validator",
    "action_validator",
    "invalid_actions",
    "sample_action",
    "validate_action",
]

Validator = Callable[[Any], Any]


def _show(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"numpy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, list | tuple):
        return f"{type(value).__name__} of length {len(value)}"
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type(value).__name__} {text}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _is_number(value: Any) -> bool:
    return _is_int(value) or isinstance(value, float | np.floating)


def validate_action(space: Mapping[str, Any], action: Any) -> Any:
    """Return ``action`` in the form an environment takes (int, array of the
    declared dtype, tuple, dict), or raise InvalidAction. Adapters that validate
    every step should build the checker once with :func:`action_validator`."""
    return action_validator(space)(action)


def action_validator(space: Mapping[str, Any], where: str = "action") -> Validator:
    """A function that validates actions for ``space`` (bounds prepared once)."""
    kind = space.get("type")
    if kind == "discrete":
        lo = int(space["start"])
        hi = lo + int(space["n"]) - 1
        return lambda value: _check_discrete(value, lo, hi, where)
    if kind == "box":
        return _box_validator(space, where)
    if kind == "multi_discrete":
        start = np.asarray(space["start"], dtype=np.int64)
        last = start + np.asarray(space["nvec"], dtype=np.int64) - 1
        return lambda value: _check_range(
            _integer_array(value, list(start.shape), where, "multi_discrete"),
            start,
            last,
            where,
            None,
        )
    if kind == "multi_binary":
        shape = [int(s) for s in space["shape"]]
        zeros, ones = np.zeros(shape), np.ones(shape)
        return lambda value: _check_range(
            _integer_array(value, shape, where, "multi_binary"), zeros, ones, where, None
        ).astype(np.int8)
    if kind == "tuple":
        items = [action_validator(s, f"{where}[{i}]") for i, s in enumerate(space["spaces"])]

        def check_tuple(value: Any) -> tuple[Any, ...]:
            if not isinstance(value, list | tuple) or len(value) != len(items):
                raise InvalidAction(
                    f"{where}: expected a list of {len(items)} items, got {_show(value)}"
                )
            return tuple(check(v) for check, v in zip(items, value, strict=True))

        return check_tuple
    if kind == "dict":
        keys = {k: action_validator(s, f"{where}[{k!r}]") for k, s in space["spaces"].items()}

        def check_dict(value: Any) -> dict[str, Any]:
            if not isinstance(value, Mapping) or set(value) != set(keys):
                got = sorted(map(str, value)) if isinstance(value, Mapping) else _show(value)
                raise InvalidAction(f"{where}: expected a dict with keys {sorted(keys)}, got {got}")
            return {k: check(value[k]) for k, check in keys.items()}

        return check_dict
    if kind == "text":
        return _text_validator(space, where)
    if kind == "sequence":
        item = action_validator(space["item"], f"{where}[i]")

        def check_sequence(value: Any) -> tuple[Any, ...]:
            if not isinstance(value, list | tuple):
                raise InvalidAction(f"{where}: expected a list of items, got {_show(value)}")
            return tuple(item(v) for v in value)

        return check_sequence
    raise ValueError(f"cannot validate actions for a space of type {kind!r}")


def _text_validator(space: Mapping[str, Any], where: str) -> Validator:
    shortest, longest = int(space.get("min_length", 0)), space.get("max_length")
    charset = space.get("charset")
    allowed = None if charset is None else frozenset(charset)

    def check_text(value: Any) -> str:
        if type(value) is not str:
            raise InvalidAction(f"{where}: expected a str, got {_show(value)}")
        if len(value) < shortest or (longest is not None and len(value) > int(longest)):
            most = "any number of" if longest is None else f"at most {longest}"
            raise InvalidAction(
                f"{where}: expected at least {shortest} and {most} characters, got {len(value)}"
            )
        if allowed is not None:
            bad = next((c for c in value if c not in allowed), None)
            if bad is not None:
                raise InvalidAction(f"{where}: character {bad!r} is not in the space's charset")
        return value

    return check_text


def _check_discrete(value: Any, lo: int, hi: int, where: str) -> int:
    if type(value) is int and lo <= value <= hi:  # the usual action, checked every step
        return value
    if not _is_int(value):
        hint = " (booleans are not actions)" if isinstance(value, bool | np.bool_) else ""
        raise InvalidAction(f"{where}: expected an int in [{lo}, {hi}], got {_show(value)}{hint}")
    if not lo <= int(value) <= hi:
        raise InvalidAction(f"{where}: expected an int in [{lo}, {hi}], got {int(value)}")
    return int(value)


def _numeric_array(value: Any, shape: list[int], where: str, what: str) -> np.ndarray:
    """An ndarray of ``shape`` from a list/tuple/ndarray of plain numbers."""
    expect = "a number (box of shape [])" if not shape else f"a list of shape {shape} ({what})"
    if isinstance(value, np.ndarray):
        arr = value
    elif not shape:
        if not _is_number(value):
            raise InvalidAction(f"{where}: expected {expect}, got {_show(value)}")
        arr = np.asarray(value)
    else:
        if not isinstance(value, list | tuple):
            tip = ""
            if len(shape) == 1 and shape[0] <= 4:
                tip = ", e.g. [" + ", ".join(["0.0"] * shape[0]) + "]"
            raise InvalidAction(f"{where}: expected {expect}{tip}, got {_show(value)}")
        _check_nesting(value, shape, where)
        arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise InvalidAction(f"{where}: expected {expect}, got {_show(arr)}")
    if list(arr.shape) != list(shape):
        raise InvalidAction(f"{where}: expected shape {shape}, got shape {list(arr.shape)}")
    return arr


def _check_nesting(value: Any, shape: list[int], where: str) -> None:
    if not shape:
        if not _is_number(value):
            raise InvalidAction(f"{where}: expected a number, got {_show(value)}")
        return
    if not isinstance(value, list | tuple) or len(value) != shape[0]:
        raise InvalidAction(f"{where}: expected a list of length {shape[0]}, got {_show(value)}")
    for i, item in enumerate(value):
        _check_nesting(item, shape[1:], f"{where}[{i}]")


def _integer_array(value: Any, shape: list[int], where: str, what: str) -> np.ndarray:
    arr = _numeric_array(value, shape, where, what)
    if arr.dtype.kind not in "iu":
        raise InvalidAction(f"{where}: expected integers ({what}), got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _bounds_array(bound: Any, shape: tuple[int, ...], missing: float) -> np.ndarray:
    objects = np.asarray(bound, dtype=object)
    filled = np.asarray(
        [missing if b is None else float(b) for b in objects.reshape(-1)], dtype=np.float64
    ).reshape(objects.shape)
    return np.broadcast_to(filled, shape)


def _component(where: str, index: tuple[int, ...], names: list[str] | None) -> str:
    label = f"{where}[{', '.join(map(str, index))}]" if index else where
    if names and len(index) == 1:
        label += f" ({names[index[0]]})"
    return label


def _check_range(
    arr: np.ndarray, low: np.ndarray, high: np.ndarray, where: str, names: list[str] | None
) -> np.ndarray:
    values = arr.astype(np.float64)
    for bad, say in (
        (~np.isfinite(values), "is not finite"),
        (values < low, "is below low {low}"),
        (values > high, "is above high {high}"),
    ):
        if np.any(bad):
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            # Bounds to 7 digits: a float32 bound shows as 0.07, not 0.0700000003.
            text = say.format(low=f"{low[index]:.7g}", high=f"{high[index]:.7g}")
            shown = _plain_number(values[index])
            raise InvalidAction(f"{_component(where, index, names)} = {shown} {text}")
    return arr


def _plain_number(x: Any) -> Any:
    x = float(x)
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


def _box_validator(space: Mapping[str, Any], where: str) -> Validator:
    shape = [int(s) for s in space["shape"]]
    dtype = np.dtype(space.get("dtype", "float32"))
    low = _bounds_array(space["low"], tuple(shape), -math.inf)
    high = _bounds_array(space["high"], tuple(shape), math.inf)
    if dtype.kind == "f":
        # Descriptions show short decimals (0.07); the box holds float32(0.07),
        # which an action in that dtype may equal.
        low, high = low.astype(dtype).astype(np.float64), high.astype(dtype).astype(np.float64)
    names = [c["name"] for c in space.get("components", [])] or None
    what = f"box of {dtype}"
    # The usual action of a continuous-control task, every step: a flat list of
    # plain floats within finite bounds. Checked in plain Python (a few numpy
    # calls on a small array cost more than the simulator's step); anything
    # else, or anything out of bounds, takes the general path below, which
    # accepts and refuses exactly as before and says why.
    bounds: list[tuple[float, float]] = []
    if dtype.kind == "f" and len(shape) == 1 and np.isfinite(low).all() and np.isfinite(high).all():
        bounds = list(zip(low.tolist(), high.tolist(), strict=True))
    quick = bool(bounds)

    def check_box(value: Any) -> np.ndarray:
        if quick and type(value) is list and len(value) == len(bounds):
            for x, (lo, hi) in zip(value, bounds, strict=True):
                if not ((type(x) is float or type(x) is int) and lo <= x <= hi):
                    break
            else:
                arr = np.asarray(value)
                if arr.dtype.kind in "if":  # ints beyond int64 make an object array
                    return arr.astype(dtype)
        arr = _numeric_array(value, shape, where, what)
        if dtype.kind in "iu" and arr.dtype.kind not in "iu":
            raise InvalidAction(f"{where}: expected integers ({what}), got dtype {arr.dtype}")
        return _check_range(arr, low, high, where, names).astype(dtype)

    return check_box


# --- sampling and counter-examples for the conformance checker --------------


def sample_action(space: Mapping[str, Any], rng: random.Random) -> Any:
    """A valid action as plain Python values (int, float, nested lists)."""
    kind = space["type"]
    if kind == "discrete":
        return rng.randrange(int(space["start"]), int(space["start"]) + int(space["n"]))
    if kind == "box":
        shape = tuple(int(s) for s in space["shape"])
        low = _bounds_array(space["low"], shape, -math.inf).reshape(-1)
        high = _bounds_array(space["high"], shape, math.inf).reshape(-1)
        integer = np.dtype(space.get("dtype", "float32")).kind in "iu"
        flat = [_sample_number(lo, hi, integer, rng) for lo, hi in zip(low, high, strict=True)]
        return np.asarray(flat, dtype=object).reshape(shape).tolist()
    if kind == "multi_discrete":
        return [s + rng.randrange(n) for n, s in zip(space["nvec"], space["start"], strict=True)]
    if kind == "multi_binary":
        size = int(np.prod(space["shape"]))
        return np.asarray([rng.randrange(2) for _ in range(size)]).reshape(space["shape"]).tolist()
    if kind == "tuple":
        return [sample_action(s, rng) for s in space["spaces"]]
    if kind == "dict":
        return {k: sample_action(s, rng) for k, s in space["spaces"].items()}
    if kind == "text":
        shortest = int(space.get("min_length", 0))
        longest = space.get("max_length")
        top = max(shortest, min(int(longest) if longest is not None else 16, shortest + 16))
        chars = space.get("charset") or "abcdefghijklmnopqrstuvwxyz "
        return "".join(rng.choice(chars) for _ in range(rng.randint(shortest, top)))
    if kind == "sequence":
        return [sample_action(space["item"], rng) for _ in range(rng.randint(0, 4))]
    raise ValueError(f"cannot sample from a space of type {kind!r}")


def _sample_number(lo: float, hi: float, integer: bool, rng: random.Random) -> float | int:
    finite_lo, finite_hi = math.isfinite(lo), math.isfinite(hi)
    if finite_lo and finite_hi:
        x = rng.uniform(lo, hi)
    elif finite_lo:
        x = lo + rng.expovariate(1.0)
    elif finite_hi:
        x = hi - rng.expovariate(1.0)
    else:
        x = rng.gauss(0.0, 1.0)
    if integer:
        return min(max(round(x), math.ceil(lo)), math.floor(hi))
    return x


def invalid_actions(space: Mapping[str, Any]) -> list[Any]:
    """Actions that :func:`validate_action` must reject for ``space``."""
    kind = space["type"]
    junk: list[Any] = [None, "0"]
    if kind == "discrete":
        lo, n = int(space["start"]), int(space["n"])
        return [*junk, lo - 1, lo + n, True, float(lo), [lo], math.nan]
    if kind == "box":
        shape = [int(s) for s in space["shape"]]
        wrong_shape = np.zeros([s + 1 for s in shape] or [1])
        good = sample_action(space, random.Random(0))
        flat = np.asarray(good, dtype=np.float64).reshape(-1)
        if flat.size == 0:
            return [*junk, wrong_shape]
        low = _bounds_array(space["low"], tuple(shape), -math.inf).reshape(-1)
        high = _bounds_array(space["high"], tuple(shape), math.inf).reshape(-1)
        changes: list[float] = [math.nan, math.inf]
        if math.isfinite(high[0]):
            changes.append(float(high[0]) + max(1.0, abs(float(high[0]))))
        if math.isfinite(low[0]):
            changes.append(float(low[0]) - max(1.0, abs(float(low[0]))))
        if np.dtype(space.get("dtype", "float32")).kind in "iu":
            changes.append(float(flat[0]) + 0.5)  # a fraction in an integer box
        out: list[Any] = [*junk, wrong_shape]
        for change in changes:
            bad = flat.copy()
            bad[0] = change
            out.append(bad.reshape(shape).tolist() if shape else float(bad[0]))
        if shape:
            out += [float(flat[0]), [*good, good[0]], [True] * shape[0]]
        else:
            out += [[good], True]
        return out
    if kind == "multi_discrete":
        start = np.asarray(space["start"], dtype=np.int64)
        top = start + np.asarray(space["nvec"], dtype=np.int64)
        return [*junk, (start - 1).tolist(), top.tolist(), np.zeros(start.size + 1).tolist()]
    if kind == "multi_binary":
        shape = [int(s) for s in space["shape"]]
        return [*junk, np.full(shape, 2).tolist(), np.zeros([s + 1 for s in shape]).tolist()]
    if kind == "tuple":
        good = sample_action(space, random.Random(0))
        first = invalid_actions(space["spaces"][0]) if space["spaces"] else []
        return [*junk, [*good, good[0] if good else 0]] + [[bad, *good[1:]] for bad in first[:3]]
    if kind == "dict":
        good = sample_action(space, random.Random(0))
        out = [*junk, {**good, "unexpected key": 0}]
        if good:
            key = next(iter(good))
            out.append({k: v for k, v in good.items() if k != key})
            out += [{**good, key: bad} for bad in invalid_actions(space["spaces"][key])[:3]]
        return out
    if kind == "text":
        out = [None, 0, b"bytes", ["a"]]
        longest, charset = space.get("max_length"), space.get("charset")
        if longest is not None:
            out.append("a" * (int(longest) + 1) if not charset else charset[0] * (int(longest) + 1))
        if int(space.get("min_length", 0)) > 0:
            out.append("")
        if charset is not None:
            outside = next(chr(c) for c in range(0x20, 0x3000) if chr(c) not in charset)
            out.append(outside * max(1, int(space.get("min_length", 0))))
        return out
    if kind == "sequence":
        item_bad = invalid_actions(space["item"])[:3]
        return [None, "0", 3, *[[bad] for bad in item_bad]]
    raise ValueError(f"no invalid examples for a space of type {kind!r}")
