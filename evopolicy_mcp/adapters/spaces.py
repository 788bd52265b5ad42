"""Space descriptions shared by adapters: build them, check observations.

A space description is a JSON-able dict with a ``type`` key. It is what a
policy sees in ``context.observation_space`` / ``context.action_space`` and
what :func:`validate_action` checks actions against::

    >>> discrete(2, ["push cart left", "push cart right"])["type"]
    'discrete'
    >>> validate_action(box(-2.0, 2.0, (1,), names=["torque"]), [0.5])
    array([0.5], dtype=float32)

Types: ``discrete`` (``n``, ``start``, optional ``meanings`` and ``noop``), ``box``
(``shape``, ``dtype``, ``low``/``high`` as one number when uniform else nested
lists, ``null`` where unbounded, optional ``components`` for 1-D boxes),
``multi_discrete`` (``nvec``, ``start``), ``multi_binary`` (``shape``),
``tuple`` (``spaces`` list), ``dict`` (``spaces`` mapping), ``text`` (a str:
``min_length``, ``max_length`` (``null`` = no limit), ``charset`` (``null`` = any
character)) and ``sequence`` (a list of any length of items of ``item``).

Action validation, sampling and counter-examples live in
:mod:`evopolicy_mcp.adapters.actions` and are re-exported here, so an adapter needs one
import: ``from evopolicy_mcp import spaces``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evopolicy_mcp.adapters.actions import (
    Validator,
    action_validator,
    invalid_actions,
    sample_action,
    validate_action,
)

__all__ = [
    "Validator",
    "action_validator",
    "box",
    "describe_gymnasium_space",
    "dict_of",
    "discrete",
    "invalid_actions",
    "multi_binary",
    "multi_discrete",
    "observation_problem",
    "plain",
    "same_value",
    "sample_action",
    "sequence_of",
    "text",
    "tuple_of",
    "validate_action",
]

Space = dict[str, Any]


def _with_description(space: Space, description: str) -> Space:
    if description:
        space["description"] = description
    return space


def discrete(
    n: int,
    meanings: Sequence[str] | None = None,
    start: int = 0,
    description: str = "",
    noop: int | None = None,
) -> Space:
    """Integers ``start .. start+n-1``; ``meanings[i]`` describes value ``start+i``;
    ``noop`` is the value that does nothing, where there is one."""
    if meanings is not None and len(meanings) != n:
        raise ValueError(f"discrete({n}) needs {n} meanings, got {len(meanings)}")
    if noop is not None and not start <= noop < start + n:
        raise ValueError(f"noop {noop} is not a value of discrete({n}, start={start})")
    space: Space = {"type": "discrete", "n": int(n), "start": int(start)}
    if meanings is not None:
        space["meanings"] = list(meanings)
    if noop is not None:
        space["noop"] = int(noop)
    return _with_description(space, description)


def _bound(value: float, integer: bool = False) -> float | int | None:
    if math.isinf(value):
        return None
    return int(value) if integer else float(value)


def _shortest(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    narrow = values.astype(dtype)
    return np.asarray([float(str(v)) for v in narrow.reshape(-1)]).reshape(values.shape)


def _bounds_json(values: np.ndarray, integer: bool) -> Any:
    flat = values.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return _bound(float(flat[0]), integer)
    items = [_bound(float(v), integer) for v in flat]
    return np.asarray(items, dtype=object).reshape(values.shape).tolist()


def box(
    low: float | Sequence[Any] | np.ndarray,
    high: float | Sequence[Any] | np.ndarray,
    shape: Sequence[int] | None = None,
    dtype: str = "float32",
    *,
    names: Sequence[str] | None = None,
    descriptions: Sequence[str] | None = None,
    description: str = "",
) -> Space:
    """Arrays of ``shape`` with ``low <= x <= high`` element-wise (infinite = unbounded).

    ``names`` and ``descriptions`` label the components of a 1-D box.
    """
    lo = np.asarray(low, dtype=np.float64)
    hi = np.asarray(high, dtype=np.float64)
    if shape is None:
        shape = np.broadcast_shapes(lo.shape, hi.shape)
    shape = tuple(int(s) for s in shape)
    lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
    kind = np.dtype(dtype)
    integer = kind.kind in "iu"
    if kind.kind == "f" and kind.itemsize < 8:
        # Show 4.8, not 4.800000190734863. The shortest decimal rounds back to
        # the same float32, so validation admits exactly what the box holds.
        lo, hi = _shortest(lo, kind), _shortest(hi, kind)
    if np.any(lo > hi):
        raise ValueError("box low must not exceed high")
    space: Space = {
        "type": "box",
        "shape": list(shape),
        "dtype": str(np.dtype(dtype)),
        "low": _bounds_json(lo, integer),
        "high": _bounds_json(hi, integer),
    }
    if names is not None or descriptions is not None:
        if len(shape) != 1:
            raise ValueError("component names need a 1-D box")
        count = shape[0]
        names = list(names) if names is not None else [f"x{i}" for i in range(count)]
        texts = list(descriptions) if descriptions is not None else [""] * count
        if len(names) != count or len(texts) != count:
            raise ValueError(f"box of shape {list(shape)} needs {count} names/descriptions")
        space["components"] = [
            {
                "index": i,
                "name": names[i],
                "description": texts[i],
                "low": _bound(float(lo[i]), integer),
                "high": _bound(float(hi[i]), integer),
            }
            for i in range(count)
        ]
    return _with_description(space, description)


def multi_discrete(
    nvec: Sequence[int] | np.ndarray,
    start: Sequence[int] | np.ndarray | None = None,
    description: str = "",
) -> Space:
    """Integer vectors with ``start[i] <= x[i] < start[i] + nvec[i]``."""
    counts = np.asarray(nvec, dtype=np.int64)
    starts = np.zeros_like(counts) if start is None else np.asarray(start, dtype=np.int64)
    space: Space = {
        "type": "multi_discrete",
        "nvec": counts.tolist(),
        "start": starts.tolist(),
    }
    return _with_description(space, description)


def multi_binary(shape: int | Sequence[int], description: str = "") -> Space:
    """Arrays of 0/1 of ``shape``."""
    dims = [int(shape)] if isinstance(shape, int) else [int(s) for s in shape]
    return _with_description({"type": "multi_binary", "shape": dims}, description)


def tuple_of(*spaces: Space, description: str = "") -> Space:
    """A fixed-length sequence whose item ``i`` lies in ``spaces[i]``."""
    return _with_description({"type": "tuple", "spaces": list(spaces)}, description)


def dict_of(spaces: Mapping[str, Space], description: str = "") -> Space:
    """A mapping with exactly the keys of ``spaces``."""
    return _with_description({"type": "dict", "spaces": dict(spaces)}, description)


def text(
    max_length: int | None = None,
    min_length: int = 0,
    charset: str | None = None,
    description: str = "",
) -> Space:
    """A str of ``min_length`` to ``max_length`` characters (None: no upper limit), each
    in ``charset`` (None: any character)."""
    space: Space = {
        "type": "text",
        "min_length": int(min_length),
        "max_length": None if max_length is None else int(max_length),
        "charset": charset,
    }
    return _with_description(space, description)


def sequence_of(item: Space, description: str = "") -> Space:
    """A list of any length whose every item lies in ``item``."""
    return _with_description({"type": "sequence", "item": item}, description)


def describe_gymnasium_space(space: Any, **descriptions: Any) -> Space:
    """Convert a gymnasium space into a description.

    Keyword arguments pass on to the builder: ``description`` for any space,
    ``meanings`` and ``noop`` for Discrete, ``names`` / ``descriptions`` for a 1-D Box,
    ``parts`` (a list for Tuple, a dict for Dict) with keyword arguments for
    each sub-space, and ``item`` (keyword arguments) for a Sequence's items. A
    space of another class whose samples are strings (MiniGrid's mission) is
    described as ``text``.
    """
    from gymnasium import spaces as gs  # the caller already imported gymnasium

    note = descriptions.get("description", "")
    if isinstance(space, gs.Discrete):
        meanings, noop = descriptions.get("meanings"), descriptions.get("noop")
        return discrete(int(space.n), meanings, int(space.start), note, noop)
    if isinstance(space, gs.Box):
        return box(
            space.low,
            space.high,
            space.shape,
            str(space.dtype),
            names=descriptions.get("names"),
            descriptions=descriptions.get("descriptions"),
            description=note,
        )
    if isinstance(space, gs.MultiDiscrete):
        return multi_discrete(space.nvec, space.start, note)
    if isinstance(space, gs.MultiBinary):
        return multi_binary(list(space.shape), note)
    if isinstance(space, gs.Tuple):
        parts = descriptions.get("parts") or [{}] * len(space.spaces)
        items = [describe_gymnasium_space(s, **p) for s, p in zip(space.spaces, parts, strict=True)]
        return tuple_of(*items, description=note)
    if isinstance(space, gs.Dict):
        parts = descriptions.get("parts") or {}
        return dict_of(
            {k: describe_gymnasium_space(s, **parts.get(k, {})) for k, s in space.spaces.items()},
            note,
        )
    if isinstance(space, gs.Text):
        charset = "".join(sorted(space.character_set))
        return text(space.max_length, space.min_length, charset, note)
    if isinstance(space, gs.Sequence):
        item = describe_gymnasium_space(space.feature_space, **descriptions.get("item", {}))
        return sequence_of(item, note)
    if _samples_text(space):
        return text(None, 0, None, note)
    raise TypeError(f"no description for gymnasium space {type(space).__name__}")


def _samples_text(space: Any) -> bool:
    try:
        return isinstance(space.sample(), str)
    except Exception:  # a space that cannot sample is none of ours
        return False


# --- observations -------------------------------------------------------------


def plain(obs: Any) -> Any:
    """``obs`` with numpy scalars turned into Python values (arrays stay arrays)."""
    if type(obs) is np.ndarray:  # the commonest observation, every step
        return obs
    if isinstance(obs, np.generic):
        return obs.item()
    if isinstance(obs, list):
        return [plain(x) for x in obs]
    if isinstance(obs, tuple):
        return tuple(plain(x) for x in obs)
    if isinstance(obs, dict):  # dicts of arrays (NetHack, dm_control, robots) skip the call
        return {k: v if type(v) is np.ndarray else plain(v) for k, v in obs.items()}
    return obs


def observation_problem(obs: Any, where: str = "observation") -> str | None:
    """Why ``obs`` is not an allowed observation, or None when it is.

    Allowed: None, bool, int, float, str, list, tuple, dict with str keys, and
    numpy arrays of bool, integer or float dtype.
    """
    if obs is None or type(obs) in (bool, int, float, str):
        return None
    if isinstance(obs, np.ndarray):
        if obs.dtype.kind in "biuf":
            return None
        return f"{where} is a numpy array of dtype {obs.dtype} (need bool, int or float)"
    if type(obs) in (list, tuple):
        for i, item in enumerate(obs):
            problem = observation_problem(item, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if type(obs) is dict:
        for key, value in obs.items():
            if type(key) is not str:
                return f"{where} has a non-str key {key!r}"
            problem = observation_problem(value, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    return f"{where} is {type(obs).__module__}.{type(obs).__qualname__} (convert with spaces.plain)"


def same_value(a: Any, b: Any) -> bool:
    """Whether two observations (or any values of the allowed kinds) are identical:
    arrays by shape, dtype and contents (NaN equals NaN), everything else by type and value."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)
