from __future__ import annotations

import time

import pytest

from evopolicy_mcp.host.selectors import (
    MAX_SELECTOR_CHARS,
    SelectorError,
    format_indices,
    parse_selector,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7", [7]),
        ("0:2,4:8", [0, 1, 4, 5, 6, 7]),
        ("0,1,2", [0, 1, 2]),
        ("3:4", [3]),
        ("0:10", list(range(10))),
        ("1,3:5,9", [1, 3, 4, 9]),
        ("0:2,2:4", [0, 1, 2, 3]),  # adjacent half-open ranges do not overlap
        ("099", [99]),
    ],
)
def test_valid_selectors_give_sorted_indices(text: str, expected: list[int]) -> None:
    assert parse_selector(text, pool=100) == expected


@pytest.mark.parametrize("text", [" 0:2 , 4 : 8 ", "\t0:2,\n4:8\n", "0 :2,4: 8"])
def test_spaces_around_items_and_colons_are_ignored(text: str) -> None:
    assert parse_selector(text, pool=100) == [0, 1, 4, 5, 6, 7]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("3:3", "empty"),
        ("5:3", "backwards"),
        ("0:4,2", "strictly increasing"),
        ("0:4,3:6", "strictly increasing"),
        ("3,3", "strictly increasing"),
        ("5,2", "strictly increasing"),
        ("-1", "negative"),
        ("0:-3", "negative"),
        ("1.5", "whole number"),
        ("a", "whole number"),
        ("0x3", "whole number"),
        ("+1", "whole number"),
        ("\u0663", "whole number"),  # an Arabic-Indic digit int() would accept
        ("1 2", "whole number"),
        ("0:2,", "trailing comma"),
        ("0,,2", "doubled"),
        (",0", "empty"),
        ("1:2:3", "more than one"),
        (":4", "empty side"),
        ("4:", "empty side"),
    ],
)
def test_malformed_selectors_are_bad_selector_with_an_example(text: str, words: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text, pool=100)
    assert info.value.code == "bad_selector"
    assert words in info.value.message
    assert "e.g. '0:5'" in info.value.message


@pytest.mark.parametrize(
    "text", ["100", "0:101", "99,100", "98:100,150", str(10**25), "9" * 5000, "0:" + "9" * 5000]
)
def test_indices_past_the_pool_are_out_of_pool(text: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text, pool=100)
    assert info.value.code == "out_of_pool"
    assert "0..99" in info.value.message


def test_a_huge_range_is_rejected_before_it_is_expanded() -> None:
    started = time.monotonic()
    with pytest.raises(SelectorError) as info:
        parse_selector("0:" + "9" * 25, pool=100)
    assert info.value.code == "out_of_pool"
    assert time.monotonic() - started < 0.1


def test_an_overlong_selector_is_rejected() -> None:
    text = ",".join(str(i) for i in range(MAX_SELECTOR_CHARS))
    with pytest.raises(SelectorError) as info:
        parse_selector(text, pool=10**6)
    assert info.value.code == "bad_selector"


def test_a_selector_that_is_not_a_string_is_bad_selector() -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(7, pool=10)  # type: ignore[arg-type]
    assert info.value.code == "bad_selector"


def test_the_whole_pool_can_be_selected_and_no_more() -> None:
    assert parse_selector("0:8", pool=8) == list(range(8))
    with pytest.raises(SelectorError):
        parse_selector("0:9", pool=8)


@pytest.mark.parametrize(
    "indices", [[0], [0, 1, 2], [0, 2, 4], [1, 2, 3, 7, 9, 10], list(range(50))]
)
def test_format_indices_is_the_inverse_of_parsing(indices: list[int]) -> None:
    text = format_indices(indices)
    assert parse_selector(text, pool=100) == indices
