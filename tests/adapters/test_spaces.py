from __future__ import annotations

import json
import math
import random

import gymnasium
import numpy as np
import pytest

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import InvalidAction

TORQUE = spaces.box(-2.0, 2.0, (1,), names=["torque"], descriptions=["N m"])
PAD = spaces.discrete(4, ["left", "down", "right", "up"])
GRID = spaces.box(0.0, 1.0, (2, 3))
SAMPLES = [
    PAD,
    TORQUE,
    GRID,
    spaces.box(-1.0, 1.0, ()),
    spaces.box(0, 9, (3,), dtype="int64"),
    spaces.box([-np.inf, 0.0], [np.inf, np.inf]),
    spaces.multi_discrete([3, 4]),
    spaces.multi_binary(3),
    spaces.tuple_of(spaces.discrete(32), spaces.discrete(11, start=1)),
    spaces.dict_of({"move": PAD, "force": TORQUE}),
]


def test_space_descriptions_are_strict_json_with_a_type() -> None:
    for space in SAMPLES:
        assert isinstance(space["type"], str)
        assert json.loads(json.dumps(space, allow_nan=False)) == space


def test_box_names_components_and_marks_unbounded_with_null() -> None:
    space = spaces.box([-4.8, -np.inf], [4.8, np.inf], names=["x", "v"], descriptions=["m", ""])
    assert space["low"] == [-4.8, None] and space["high"] == [4.8, None]
    assert [c["name"] for c in space["components"]] == ["x", "v"]
    assert space["components"][0] == {
        "index": 0,
        "name": "x",
        "description": "m",
        "low": -4.8,
        "high": 4.8,
    }


def test_float32_bounds_are_shown_as_short_decimals() -> None:
    space = spaces.describe_gymnasium_space(gymnasium.spaces.Box(-0.07, 0.07, (2,), np.float32))
    assert space["low"] == -0.07 and space["high"] == 0.07
    # The shortest decimal still admits the float32 bound itself.
    assert (
        spaces.validate_action(space, np.array([0.07, -0.07], dtype=np.float32)).dtype == np.float32
    )


def test_discrete_needs_one_meaning_per_value() -> None:
    with pytest.raises(ValueError, match="needs 3 meanings"):
        spaces.discrete(3, ["a", "b"])


def test_gymnasium_spaces_convert_with_their_descriptions() -> None:
    gs = gymnasium.spaces
    described = spaces.describe_gymnasium_space(
        gs.Tuple((gs.Discrete(2), gs.Box(-1, 1, (2,), np.float32))),
        description="pair",
        parts=[{"meanings": ["no", "yes"]}, {"names": ["a", "b"]}],
    )
    assert described["description"] == "pair"
    assert described["spaces"][0]["meanings"] == ["no", "yes"]
    assert [c["name"] for c in described["spaces"][1]["components"]] == ["a", "b"]
    nested = spaces.describe_gymnasium_space(
        gs.Dict({"k": gs.MultiDiscrete([2, 3]), "b": gs.MultiBinary(4)})
    )
    assert nested["spaces"]["k"] == {"type": "multi_discrete", "nvec": [2, 3], "start": [0, 0]}
    assert nested["spaces"]["b"] == {"type": "multi_binary", "shape": [4]}
    assert spaces.describe_gymnasium_space(gs.Discrete(3, start=-1))["start"] == -1


@pytest.mark.parametrize("action", [True, False, 1.0, "1", None, [1], np.bool_(True), np.array(1)])
def test_discrete_rejects_anything_but_an_int(action: object) -> None:
    with pytest.raises(InvalidAction, match=r"expected an int in \[0, 3\]"):
        spaces.validate_action(PAD, action)


def test_discrete_accepts_plain_and_numpy_ints_in_range_only() -> None:
    assert spaces.validate_action(PAD, 3) == 3
    value = spaces.validate_action(PAD, np.int64(2))
    assert value == 2 and type(value) is int
    for bad in (-1, 4):
        with pytest.raises(InvalidAction, match=f"got {bad}"):
            spaces.validate_action(PAD, bad)


def test_box_out_of_range_is_rejected_naming_the_component_not_clipped() -> None:
    with pytest.raises(InvalidAction, match=r"action\[0\] \(torque\) = 2.5 is above high 2"):
        spaces.validate_action(TORQUE, [2.5])
    with pytest.raises(InvalidAction, match=r"is below low -2"):
        spaces.validate_action(TORQUE, np.array([-2.0001]))
    with pytest.raises(InvalidAction, match=r"action\[1, 2\] = 1.5 is above high 1"):
        spaces.validate_action(GRID, [[0, 0, 0], [0, 0, 1.5]])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_box_rejects_non_finite_values(bad: float) -> None:
    with pytest.raises(InvalidAction, match="is not finite"):
        spaces.validate_action(TORQUE, [bad])


def test_box_demands_the_declared_shape() -> None:
    with pytest.raises(
        InvalidAction, match=r"expected a list of shape \[1\].*e\.g\. \[0\.0\].*float 0.5"
    ):
        spaces.validate_action(TORQUE, 0.5)
    with pytest.raises(InvalidAction, match="length 1"):
        spaces.validate_action(TORQUE, [0.5, 0.5])
    with pytest.raises(InvalidAction, match=r"expected shape \[2, 3\], got shape \[3, 2\]"):
        spaces.validate_action(GRID, np.zeros((3, 2)))
    with pytest.raises(InvalidAction, match=r"action\[1\]: expected a list of length 3"):
        spaces.validate_action(GRID, [[0, 0, 0], [0, 0]])
    scalar = spaces.box(-1.0, 1.0, ())
    assert spaces.validate_action(scalar, 0.5) == np.float32(0.5)
    with pytest.raises(InvalidAction, match="expected a number"):
        spaces.validate_action(scalar, [0.5])


def test_box_rejects_bools_strings_and_object_arrays() -> None:
    for bad in ([True], ["1.0"], np.array([True]), np.array(["x"]), np.array([None])):
        with pytest.raises(InvalidAction):
            spaces.validate_action(TORQUE, bad)


def test_box_converts_valid_actions_to_its_dtype() -> None:
    for good in ([1], (1.5,), np.array([1.5], dtype=np.float64), [np.float32(-2.0)]):
        out = spaces.validate_action(TORQUE, good)
        assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (1,)


def test_integer_box_rejects_fractions() -> None:
    counts = spaces.box(0, 9, (2,), dtype="int64")
    assert spaces.validate_action(counts, [1, 9]).tolist() == [1, 9]
    with pytest.raises(InvalidAction, match="expected integers"):
        spaces.validate_action(counts, [1.0, 2.0])


def test_composite_spaces_validate_each_part() -> None:
    pair = spaces.tuple_of(PAD, TORQUE)
    move, force = spaces.validate_action(pair, [1, [0.5]])
    assert move == 1 and force.tolist() == [0.5]
    with pytest.raises(InvalidAction, match=r"action\[1\]\[0\] \(torque\) = 3"):
        spaces.validate_action(pair, (1, [3.0]))
    both = spaces.dict_of({"move": PAD, "force": TORQUE})
    with pytest.raises(InvalidAction, match="keys"):
        spaces.validate_action(both, {"move": 1})
    with pytest.raises(InvalidAction, match=r"action\['move'\]"):
        spaces.validate_action(both, {"move": 9, "force": [0.0]})
    with pytest.raises(InvalidAction, match="multi"):
        spaces.validate_action(spaces.multi_discrete([3, 4]), [0, 1.0])
    with pytest.raises(InvalidAction, match=r"action\[1\] = 4 is above high 3"):
        spaces.validate_action(spaces.multi_discrete([3, 4]), [0, 4])


@pytest.mark.parametrize("space", SAMPLES, ids=lambda s: s["type"])
def test_sampled_actions_are_valid_and_invalid_examples_are_rejected(space: dict) -> None:
    rng = random.Random(7)
    for _ in range(20):
        spaces.validate_action(space, spaces.sample_action(space, rng))
    examples = spaces.invalid_actions(space)
    assert len(examples) >= 3
    for bad in examples:
        with pytest.raises(InvalidAction):
            spaces.validate_action(space, bad)


def test_plain_turns_numpy_scalars_into_python_values_and_keeps_arrays() -> None:
    obs = {"a": np.int64(3), "b": (np.float32(0.5), [np.bool_(True)]), "c": np.zeros(2)}
    out = spaces.plain(obs)
    assert type(out["a"]) is int and type(out["b"][0]) is float and type(out["b"][1][0]) is bool
    assert isinstance(out["c"], np.ndarray)
    assert spaces.observation_problem(out) is None


def test_observation_problem_names_the_offending_part() -> None:
    assert "observation['a'][1]" in str(spaces.observation_problem({"a": [1, np.int64(2)]}))
    assert "dtype" in str(spaces.observation_problem(np.array(["x"])))
    assert "non-str key" in str(spaces.observation_problem({1: 2}))
    assert spaces.observation_problem(object()) is not None


def _outcome(check: spaces.Validator, action: object) -> tuple[str, object]:
    try:
        out = check(action)
    except InvalidAction as exc:
        return "invalid", str(exc)
    return "ok", (out.dtype, out.tobytes())


def test_flat_lists_of_floats_are_judged_as_the_general_path_judges_them() -> None:
    # A tuple always takes the general path; the same numbers as a list take the quick one.
    rng = random.Random(7)
    cheetah = spaces.box(-1.0, 1.0, (6,), names=[f"joint {i}" for i in range(6)])
    tight = spaces.box(0.0, 0.07, (2,))  # a float32 bound: 0.07 is float32(0.07) inside
    wide = spaces.box(-1e30, 1e30, (2,))  # ints beyond int64 fit: numpy makes objects of them
    edges: list[object] = [
        0.0,
        -1.0,
        1.0,
        math.nextafter(1.0, 2.0),
        math.nextafter(-1.0, -2.0),
        math.nan,
        math.inf,
        -math.inf,
        1,
        -1,
        2,
        True,
        np.float32(0.5),
        np.float64(0.5),
        "0.5",
        None,
        0.07,
        float(np.float32(0.07)),
        math.nextafter(float(np.float32(0.07)), 1.0),
        2**53 + 1,
        2**63,
        10**25,
        -(2**70),
        10**31,
    ]
    for space in (cheetah, tight, wide):
        check = spaces.action_validator(space)
        n = space["shape"][0]
        for _ in range(400):
            action = [
                rng.choice(edges) if rng.random() < 0.3 else rng.uniform(-1.2, 1.2)
                for _ in range(n)
            ]
            assert _outcome(check, action) == _outcome(check, tuple(action)), action


def test_a_float_list_outside_the_box_is_still_refused_naming_the_component() -> None:
    check = spaces.action_validator(spaces.box(-1.0, 1.0, (3,), names=["hip", "knee", "foot"]))
    assert check([0.5, -1.0, 1]).dtype == np.float32
    with pytest.raises(InvalidAction, match=r"action\[1\] \(knee\) = 1.5 is above high 1"):
        check([0.5, 1.5, 0.0])
    with pytest.raises(InvalidAction, match=r"action\[2\] \(foot\) = nan is not finite"):
        check([0.5, 0.0, math.nan])
    with pytest.raises(InvalidAction):
        check([0.5, True, 0.0])
    with pytest.raises(InvalidAction, match="length 3"):
        check([0.5, 0.0])
