"""The frame codec: every value type round-trips, and malformed input only ever raises FrameError.

The host decodes what an untrusted policy process sends with this codec, so
any other exception on bad bytes would be a host crash a policy can provoke.
"""

from __future__ import annotations

import enum
import math
import os
import random
import select
import struct
from typing import Any

import numpy as np
import pytest

from evopolicy_mcp.kernel import frames
from evopolicy_mcp.kernel.frames import FrameError, FrameReader, decode, encode, frame

U32 = struct.Struct("<I")
ALLOWED_DTYPES = [
    "|b1",
    "|i1",
    "|u1",
    "<i2",
    "<u2",
    "<i4",
    "<u4",
    "<i8",
    "<u8",
    "<f2",
    "<f4",
    "<f8",
]
SHAPES = [(), (0,), (1,), (5,), (2, 3), (2, 0, 3), (1, 1, 1, 1), (3, 4, 2)]


class Colour(enum.IntEnum):
    RED = 1


class Ratio(float):
    pass


def roundtrip(value: Any) -> Any:
    return decode(encode(value))


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, NaN equal to NaN and -0.0 told from 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


PLAIN = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2**63 - 1,
    -(2**63),
    2**63,
    -(2**63) - 1,
    10**100,
    -(10**100),
    0.0,
    -0.0,
    1.5,
    1e-310,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "plain",
    "héllo ✓ 中文 \U0001f600",
    "\x00 nul inside",
    b"",
    b"\x00\xff\x10",
    [],
    [1, "a", None, 2.5, [True, [b"x"]]],
    {},
    {"a": {"b": [1, {"c": None}]}, "": 0, "k2": "v"},
]


@pytest.mark.parametrize("value", PLAIN, ids=[repr(v)[:30] for v in PLAIN])
def test_plain_values_round_trip_with_their_types(value: Any) -> None:
    assert same(roundtrip(value), value), (roundtrip(value), value)


def test_tuples_travel_as_lists_and_bytearrays_as_bytes() -> None:
    assert roundtrip((1, (2, 3))) == [1, [2, 3]]
    assert roundtrip(bytearray(b"ab")) == b"ab"
    assert type(roundtrip(bytearray(b"ab"))) is bytes


def test_int_and_float_subclasses_and_numpy_scalars_become_plain_values() -> None:
    for value, expected in [
        (Colour.RED, 1),
        (Ratio(0.25), 0.25),
        (np.int64(-7), -7),
        (np.uint8(200), 200),
        (np.int32(5), 5),
        (np.float32(0.5), 0.5),
        (np.float64(-2.25), -2.25),
        (np.bool_(True), True),
    ]:
        got = roundtrip(value)
        assert same(got, expected), (value, got)


def test_dict_order_is_kept() -> None:
    value = {k: i for i, k in enumerate("zyxwvu")}
    assert list(roundtrip(value)) == list("zyxwvu")


@pytest.mark.parametrize("dtype", ALLOWED_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_arrays_of_every_allowed_dtype_and_shape_round_trip(dtype: str, shape: tuple) -> None:
    rng = np.random.default_rng(0)
    arr = (rng.random(shape) * 100).astype(dtype) if shape else np.array(3, dtype=dtype)
    for _ in range(2):  # the second decode of a known header takes the fast path
        got = roundtrip(arr)
        assert isinstance(got, np.ndarray)
        assert got.dtype == arr.dtype and got.shape == arr.shape
        assert np.array_equal(got, arr, equal_nan=arr.dtype.kind == "f")
        assert got.flags.writeable, "a received array may be modified in place"


def test_arrays_inside_containers_round_trip() -> None:
    image = np.zeros((4, 4, 3), dtype=np.uint8)
    got = roundtrip({"frame": image, "extra": [np.arange(3), 1]})
    assert np.array_equal(got["frame"], image) and got["frame"].dtype == np.uint8
    assert np.array_equal(got["extra"][0], np.arange(3)) and got["extra"][1] == 1


@pytest.mark.parametrize(
    "arr",
    [
        np.arange(12.0).reshape(3, 4)[:, ::2],  # strided view
        np.arange(12).reshape(3, 4).T,  # transposed
        np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        np.arange(5, dtype=">f8"),  # big-endian
        np.arange(5, dtype=">i4"),
    ],
    ids=["strided", "transposed", "fortran", "big-endian-float", "big-endian-int"],
)
def test_non_contiguous_and_big_endian_arrays_arrive_with_the_same_values(arr: Any) -> None:
    got = roundtrip(arr)
    assert got.shape == arr.shape
    assert np.array_equal(got, arr)
    assert got.dtype.byteorder in ("<", "=", "|")
    via_frame = decode(frame(frames.OBSERVATION, arr)[5:])
    assert np.array_equal(via_frame, arr) and via_frame.shape == arr.shape


@pytest.mark.parametrize(
    "value",
    [
        0,
        -5,
        2**63 - 1,
        2**64,
        1.5,
        None,
        [1, 2],
        {"a": 1},
        np.zeros(3, dtype=np.float32),
        np.zeros((2, 2), dtype=np.uint8),
        np.arange(4, dtype=">i8"),
        np.int64(3),
    ],
    ids=lambda v: type(v).__name__ + (str(getattr(v, "dtype", "")) or ""),
)
def test_a_frame_is_its_length_its_kind_and_the_encoded_value(value: Any) -> None:
    data = frame(frames.ACTION, value)
    length, kind = struct.unpack_from("<IB", data)
    assert kind == frames.ACTION
    assert length == len(data) - 4
    assert data[5:] == encode(value)


@pytest.mark.parametrize(
    "value",
    [
        object(),
        {1, 2},
        1 + 2j,
        {1: "int key"},
        {"ok": {(1,): "tuple key"}},
        print,
        np.array([1 + 1j]),
        np.array(["text"]),
        np.array([object()], dtype=object),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        range(3),
    ],
    ids=lambda v: type(v).__name__,
)
def test_values_outside_the_format_cannot_be_encoded(value: Any) -> None:
    with pytest.raises(FrameError):
        encode(value)
    with pytest.raises(FrameError):
        frame(frames.ACTION, value)


def nested(depth: int) -> Any:
    value: Any = None
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_is_bounded_on_both_sides() -> None:
    assert roundtrip(nested(frames.MAX_DEPTH)) == nested(frames.MAX_DEPTH)
    with pytest.raises(FrameError, match="nested deeper"):
        encode(nested(frames.MAX_DEPTH + 1))
    deep = b"l" + U32.pack(1)
    with pytest.raises(FrameError, match="nested deeper"):
        decode(deep * (frames.MAX_DEPTH + 1) + b"N")
    with pytest.raises(FrameError, match="nested deeper"):
        decode(deep * 100_000 + b"N")  # never a RecursionError
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(FrameError):
        encode(loop)


def array_bytes(code: bytes, shape: tuple[int, ...], data: bytes) -> bytes:
    dims = b"".join(U32.pack(d) for d in shape)
    return (
        b"a" + bytes([len(code)]) + code + bytes([len(shape)]) + dims + U32.pack(len(data)) + data
    )


MALFORMED = {
    "empty": b"",
    "bad tag": b"Z",
    "high tag": b"\xff",
    "truncated float": b"d\x00\x00",
    "truncated int": b"i" + bytes(7),
    "truncated string": b"s" + U32.pack(10) + b"abc",
    "truncated bytes": b"b" + U32.pack(3) + b"a",
    "truncated length": b"s\x01\x00",
    "string not utf-8": b"s" + U32.pack(2) + b"\xff\xfe",
    "lone surrogate": b"s" + U32.pack(3) + "\ud800".encode("utf-8", "surrogatepass"),
    "trailing bytes": b"N" + b"x",
    "trailing after int": b"i" + bytes(8) + b"\x00",
    "huge list count": b"l" + U32.pack(2**32 - 1) + b"N",
    "huge dict count": b"m" + U32.pack(2**32 - 1) + b"N",
    "list count past end": b"l" + U32.pack(3) + b"NN",
    "dict with int key": b"m" + U32.pack(1) + b"i" + bytes(8) + b"N",
    "dict key missing value": b"m" + U32.pack(1) + b"s" + U32.pack(1) + b"k",
    "big int not digits": b"L" + U32.pack(3) + b"abc",
    "big int too long": b"L" + U32.pack(401) + b"9" * 401,
    "big int just a sign": b"L" + U32.pack(1) + b"-",
    "array disallowed complex": array_bytes(b"<c16", (1,), bytes(16)),
    "array disallowed object": array_bytes(b"|O", (1,), bytes(8)),
    "array disallowed big-endian": array_bytes(b">f8", (1,), bytes(8)),
    "array unknown dtype text": array_bytes(b"rubbish", (1,), bytes(8)),
    "array bytes shorter than shape": array_bytes(b"<f8", (2, 2), bytes(24)),
    "array bytes longer than shape": array_bytes(b"<f8", (2,), bytes(24)),
    "array too many dimensions": array_bytes(b"|u1", (1,) * 40, b"\x00"),
    "array data missing": array_bytes(b"<f8", (4,), bytes(32))[:-8],
    "array huge shape": array_bytes(b"|u1", (2**32 - 1, 2**32 - 1), b"\x00"),
}


@pytest.mark.parametrize("payload", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_payloads_raise_frame_error(payload: bytes) -> None:
    with pytest.raises(FrameError):
        decode(payload)


def test_a_big_integer_with_two_signs_raises_frame_error() -> None:
    with pytest.raises(FrameError):
        decode(b"L" + U32.pack(3) + b"--1")


@pytest.mark.parametrize("payload", [b"a\xff\x00\x00", b"a\x03<f8", b"a\x03|u1"])
def test_a_truncated_array_header_raises_frame_error(payload: bytes) -> None:
    with pytest.raises(FrameError):
        decode(payload)


def test_big_integers_within_bounds_round_trip_and_fit_the_format() -> None:
    for value in (2**64, -(2**200), int("9" * 400)):
        assert roundtrip(value) == value


def test_the_item_count_is_bounded() -> None:
    payload = encode([0] * 100)
    assert decode(payload, max_items=101) == [0] * 100
    with pytest.raises(FrameError, match="more than"):
        decode(payload, max_items=50)


def test_arrays_can_be_refused_on_both_decode_paths() -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    payload = encode(arr)
    decode(payload)  # makes the header known to the fast path
    with pytest.raises(FrameError):
        decode(payload, arrays=False)
    with pytest.raises(FrameError):
        decode(encode([arr]), arrays=False)


def test_a_known_array_header_with_the_wrong_data_length_is_rejected() -> None:
    arr = np.arange(4, dtype=np.float64)
    good = encode(arr)
    decode(good)
    with pytest.raises(FrameError):
        decode(good[:-8])
    with pytest.raises(FrameError):
        decode(good + bytes(8))


def test_mutated_payloads_raise_nothing_but_frame_error() -> None:
    rng = random.Random(0)
    seeds = [
        encode(v)
        for v in [
            None,
            -3,
            2.5,
            "text",
            b"xy",
            [1, [2, None]],
            {"a": 1, "b": [True]},
            10**30,
            np.arange(6, dtype=np.float32).reshape(2, 3),
            np.zeros(3, dtype=np.uint8),
            [np.ones(2)],
        ]
    ]
    for _ in range(20_000):
        data = _mutated(rng, rng.choice(seeds), rng.randint(1, 4))
        try:
            decode(bytes(data))
        except FrameError:
            pass


def _mutated(rng: random.Random, data: bytes, times: int) -> bytearray:
    """``data`` with ``times`` random edits: a byte changed, the tail cut, a byte inserted."""
    out = bytearray(data)
    for _ in range(times):
        op = rng.random()
        if op < 0.4 and out:
            out[rng.randrange(len(out))] = rng.randrange(256)
        elif op < 0.7 and out:
            del out[rng.randrange(len(out)) :]
        else:
            out.insert(rng.randrange(len(out) + 1), rng.randrange(256))
    return out


def _slow_read(data: bytes, max_frame: int) -> tuple[int, Any]:
    kind, payload = frames.parse_whole(data, max_frame)
    return kind, decode(payload)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            type(a) is type(b)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
            and a.flags.writeable
        )
    return type(a) is type(b) and (a == b or (a != a and b != b))  # NaN is NaN here


def test_read_frame_takes_what_parse_whole_and_decode_take_and_refuses_the_rest() -> None:
    rng = random.Random(1)
    arrays = [np.arange(4, dtype=np.float32), np.zeros((2, 3), dtype=np.int64)]
    seeds = [frame(frames.ACTION, v) for v in [1, -(2**63), 2.5, None, [1, 2], *arrays]]
    for arr in arrays:  # their headers are known from now on: read_frame's short way
        frames.read_frame(frame(frames.OBSERVATION, arr), 1 << 20)
    for n in range(20_000):
        data = _mutated(rng, rng.choice(seeds), rng.randint(0, 3) if n % 2 else 0)
        if n % 3 == 0 and len(data) >= 5:  # a length field that agrees with the bytes
            struct.pack_into("<I", data, 0, len(data) - 4)
        bound = rng.choice([1 << 20, 12])
        try:
            expected: Any = _slow_read(bytes(data), bound)
        except FrameError as exc:
            expected = exc
        try:
            got: Any = frames.read_frame(bytes(data), bound)
        except FrameError as exc:
            got = exc
        if isinstance(expected, FrameError):
            assert isinstance(got, FrameError), (bytes(data), got)
        else:
            assert not isinstance(got, FrameError), (bytes(data), got)
            assert got[0] == expected[0] and _same(got[1], expected[1]), (bytes(data), got)


# -- FrameReader ----------------------------------------------------------------


def test_the_reader_reassembles_frames_fed_byte_by_byte() -> None:
    stream = frame(frames.ACTION, [1, 2.5]) + frame(frames.READY) + frame(frames.ERROR, {"k": "v"})
    reader = FrameReader(max_frame=1 << 10)
    got = []
    for i in range(len(stream)):
        reader.feed(stream[i : i + 1])
        item = reader.next()
        if item is not None:
            got.append((item[0], decode(item[1])))
    assert got == [(frames.ACTION, [1, 2.5]), (frames.READY, None), (frames.ERROR, {"k": "v"})]
    assert reader.next() is None and reader.pending == 0


def test_the_reader_yields_several_frames_from_one_feed_in_order() -> None:
    reader = FrameReader(max_frame=1 << 10)
    reader.feed(b"".join(frame(frames.ACTION, i) for i in range(5)) + frame(frames.ACTION, 9)[:3])
    values = []
    while (item := reader.next()) is not None:
        values.append(decode(item[1]))
    assert values == [0, 1, 2, 3, 4]
    assert reader.pending == 3


def test_the_reader_refuses_a_frame_over_its_bound_from_the_header_alone() -> None:
    reader = FrameReader(max_frame=100)
    reader.feed(struct.pack("<IB", 101, frames.ACTION))  # no payload sent yet
    with pytest.raises(FrameError, match="exceeds the limit"):
        reader.next()
    at_bound = FrameReader(max_frame=100)
    payload = encode("x" * 94)
    at_bound.feed(struct.pack("<IB", len(payload) + 1, frames.ACTION) + payload)
    item = at_bound.next()
    assert item is not None and decode(item[1]) == "x" * 94


def test_the_reader_refuses_an_empty_frame() -> None:
    reader = FrameReader(max_frame=100)
    reader.feed(struct.pack("<IB", 0, frames.ACTION))
    with pytest.raises(FrameError):
        reader.next()


def test_a_partial_frame_waits_for_more_bytes() -> None:
    data = frame(frames.OBSERVATION, np.zeros(10))
    reader = FrameReader(max_frame=1 << 10)
    reader.feed(data[:4])
    assert reader.next() is None
    reader.feed(data[4:-1])
    assert reader.next() is None
    reader.feed(data[-1:])
    item = reader.next()
    assert item is not None and item[0] == frames.OBSERVATION
    assert np.array_equal(decode(item[1]), np.zeros(10))


def test_whole_frame_takes_exactly_one_frame_and_nothing_else() -> None:
    one = frames.frame(frames.ACTION, 3)
    assert frames.whole_frame(one, 1 << 20) == (frames.ACTION, one[5:])
    assert frames.decode(frames.whole_frame(one, 1 << 20)[1]) == 3  # type: ignore[index]
    assert frames.whole_frame(one[:-1], 1 << 20) is None  # a partial frame
    assert frames.whole_frame(one + one, 1 << 20) is None  # two frames
    assert frames.whole_frame(one, 4) is None  # larger than the bound
    assert frames.whole_frame(b"\x00\x00\x00\x00A", 1 << 20) is None  # empty length


def test_spin_read_returns_what_came_nothing_or_the_end() -> None:
    r, w = os.pipe()
    try:
        os.set_blocking(r, False)
        poller = select.poll()
        poller.register(r, select.POLLIN)
        assert frames.spin_read(r, poller, 50) is None  # nothing came
        os.write(w, b"abc")
        assert frames.spin_read(r, poller, 50) == b"abc"
        os.close(w)
        w = -1
        assert frames.spin_read(r, poller, 50) == b""  # the writer is gone
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_lists_of_floats_take_a_fast_path_that_agrees_with_the_general_codec() -> None:
    rng = random.Random(3)
    specials = [math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308]
    for count in (1, 2, 6, 17, frames.MAX_FLOAT_LIST, frames.MAX_FLOAT_LIST + 1):
        value = [
            rng.choice(specials) if rng.random() < 0.2 else rng.uniform(-9, 9) for _ in range(count)
        ]
        general = bytearray(5)
        frames._enc(value, general, 0)
        struct.pack_into("<IB", general, 0, len(general) - 4, frames.ACTION)
        assert frame(frames.ACTION, value) == bytes(general)
        back = decode(bytes(general[5:]))
        slow = frames._Decoder(bytes(general[5:]), 1_000_000, True).value(0)
        assert [struct.pack("<d", x) for x in back] == [struct.pack("<d", x) for x in slow]
        assert all(type(x) is float for x in back)


def test_a_list_that_only_looks_like_floats_is_decoded_by_the_general_path() -> None:
    payload = bytearray(encode([1.0, 2.0, 3.0]))
    payload[5 + 9] = ord("i")  # the second item is now an int of the same size
    assert decode(bytes(payload)) == [1.0, 2**62, 3.0]
    assert decode(encode([1.0, 2, 3.0])) == [1.0, 2, 3.0]
    with pytest.raises(FrameError, match="more than"):
        decode(encode([0.5] * 10), max_items=10)
    with pytest.raises(FrameError):
        decode(encode([0.5] * 10)[:-1])
