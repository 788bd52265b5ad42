"""The frame codec between the host and a policy process. Stdlib only; numpy optional.

A frame is ``u32 length | u8 kind | payload``; the payload is one value in a
small tagged binary format: None, bool, int, float, str, bytes, list, dict
with str keys, and numpy arrays as raw bytes (a 64x64x3 frame costs
microseconds, where a JSON list costs milliseconds). Tuples travel as lists.

The host decodes what a policy sends with :func:`decode` under hard bounds
(frame size, nesting depth, item count, a dtype allow-list). Nothing a policy
sends is ever unpickled, evaluated or imported: the worst a malformed frame
can do is raise :class:`FrameError`, which ends that episode as a
``protocol_error``.
"""

from __future__ import annotations

import math
import os
import re
import struct
from typing import Any

__all__ = [
    "ACTION",
    "CONTEXT",
    "ERROR",
    "OBSERVATION",
    "READY",
    "STOP",
    "WAKE",
    "FrameError",
    "FrameReader",
    "decode",
    "encode",
    "frame",
    "parse_whole",
    "read_frame",
    "spin_read",
    "whole_frame",
]

# Message kinds. Host -> policy: CONTEXT, OBSERVATION, STOP. Policy -> host: READY, ACTION, ERROR.
CONTEXT, OBSERVATION, STOP = ord("C"), ord("O"), ord("X")
READY, ACTION, ERROR = ord("R"), ord("A"), ord("E")
WAKE = ord("W")  # either way, on a pipe: look at the mailbox (:mod:`evopolicy_mcp.kernel.mailbox`)

MAX_DEPTH = 32
_ALLOWED_DTYPES = frozenset(
    ["|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"]
)

_HEAD = struct.Struct("<IB")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_BIG_INT = re.compile(rb"-?[0-9]+")

try:  # numpy is optional on both sides; arrays need it only to be decoded as arrays
    import numpy as _np

    _DTYPES = {code.encode(): _np.dtype(code) for code in _ALLOWED_DTYPES}
    _ndarray: Any = _np.ndarray
except ImportError:  # pragma: no cover - numpy is a dependency of the package
    _np = None  # type: ignore[assignment]
    _DTYPES = {}
    _ndarray = None

_ARRAY_HEADERS: dict[tuple[Any, tuple[int, ...]], bytes] = {}
_DECODED_HEADERS: dict[bytes, tuple[Any, tuple[int, ...], int]] = {}
_FLOAT_LISTS: dict[int, tuple[struct.Struct, bytes]] = {}
MAX_FLOAT_LIST = 256  # lists of floats up to this length take the fast paths


def _float_list(count: int) -> tuple[struct.Struct, bytes]:
    """The layout of a list of ``count`` floats after its header: each float's
    tag byte (skipped, or written apart) and its 8 bytes; and the tags alone."""
    layout = _FLOAT_LISTS.get(count)
    if layout is None:
        layout = _FLOAT_LISTS[count] = (struct.Struct("<" + "xd" * count), b"d" * count)
    return layout


class FrameError(Exception):
    """A frame is malformed, too large, too deep, or holds an unsupported value."""


def _enc(value: Any, out: bytearray, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise FrameError(f"value nested deeper than {MAX_DEPTH} levels")
    t = type(value)
    if t is float:
        out += b"d"
        out += _F64.pack(value)
    elif t is int:
        if _I64_MIN <= value <= _I64_MAX:
            out += b"i"
            out += _I64.pack(value)
        else:
            digits = str(value).encode()
            out += b"L"
            out += _U32.pack(len(digits))
            out += digits
    elif t is bool:
        out += b"T" if value else b"F"
    elif value is None:
        out += b"N"
    elif t is str:
        data = value.encode("utf-8", "surrogatepass")
        out += b"s"
        out += _U32.pack(len(data))
        out += data
    elif t is list or t is tuple:
        out += b"l"
        out += _U32.pack(len(value))
        for item in value:
            _enc(item, out, depth + 1)
    elif t is dict:
        out += b"m"
        out += _U32.pack(len(value))
        for key, item in value.items():
            if type(key) is not str:
                raise FrameError(f"dict keys must be str, got {type(key).__name__}")
            _enc(key, out, depth + 1)
            _enc(item, out, depth + 1)
    elif t is bytes or t is bytearray:
        out += b"b"
        out += _U32.pack(len(value))
        out += value
    elif _np is not None and isinstance(value, _np.ndarray):
        arr = value if value.flags.c_contiguous else _np.ascontiguousarray(value)
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        code = dtype.str.encode()
        if dtype.str not in _ALLOWED_DTYPES:
            raise FrameError(f"array dtype {arr.dtype} is not supported; use bool, int or float")
        raw = arr.astype(dtype, copy=False)  # C-contiguous: its buffer is its bytes in order
        out += b"a"
        out += bytes((len(code),))
        out += code
        out += bytes((arr.ndim,))
        for dim in arr.shape:
            out += _U32.pack(dim)
        out += _U32.pack(raw.nbytes)
        out += raw.data  # copied once, into the frame
    elif _np is not None and isinstance(value, _np.generic):
        _enc(value.item(), out, depth)
    elif isinstance(value, float):  # float subclasses
        _enc(float(value), out, depth)
    elif isinstance(value, int):  # int subclasses (IntEnum); bool was handled above
        _enc(int(value), out, depth)
    else:
        raise FrameError(f"cannot send a {type(value).__name__} value")


def encode(value: Any) -> bytes:
    out = bytearray()
    _enc(value, out, 0)
    return bytes(out)


def _array_header(arr: Any) -> bytes | None:
    """The encoded header of an array of this dtype and shape (cached: shapes repeat)."""
    key = (arr.dtype, arr.shape)
    header = _ARRAY_HEADERS.get(key)
    if header is None:
        code = arr.dtype.str
        if code not in _ALLOWED_DTYPES or len(_ARRAY_HEADERS) > 256:
            return None
        header = (
            b"a"
            + bytes((len(code),))
            + code.encode()
            + bytes((arr.ndim,))
            + b"".join(_U32.pack(d) for d in arr.shape)
            + _U32.pack(arr.nbytes)
        )
        _ARRAY_HEADERS[key] = header
    return header


def frame(kind: int, value: Any = None) -> bytes:
    """One complete frame: header plus encoded payload."""
    t = type(value)
    if t is int and _I64_MIN <= value <= _I64_MAX:
        return _HEAD.pack(10, kind) + b"i" + _I64.pack(value)
    if t is list and 0 < len(value) <= MAX_FLOAT_LIST:
        # A continuous action: a short list of floats, every step.
        for x in value:
            if type(x) is not float:
                break
        else:
            count = len(value)
            layout, tags = _float_list(count)
            out = bytearray(10 + 9 * count)
            _HEAD.pack_into(out, 0, 6 + 9 * count, kind)
            out[5] = 0x6C
            _U32.pack_into(out, 6, count)
            layout.pack_into(out, 10, *value)
            out[10::9] = tags
            return bytes(out)
    if t is _ndarray:
        header = _array_header(value)
        if header is not None:
            raw = value.tobytes()
            return _HEAD.pack(1 + len(header) + len(raw), kind) + header + raw
    out = bytearray(5)
    _enc(value, out, 0)
    _HEAD.pack_into(out, 0, len(out) - 5 + 1, kind)
    return bytes(out)


class _Decoder:
    __slots__ = ("buf", "pos", "end", "items", "max_items", "arrays")

    def __init__(self, buf: bytes, max_items: int, arrays: bool) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)
        self.items = 0
        self.max_items = max_items
        self.arrays = arrays

    def need(self, n: int) -> int:
        """Advance over ``n`` bytes; return where they start."""
        start = self.pos
        if start + n > self.end:
            raise FrameError("frame ends in the middle of a value")
        self.pos = start + n
        return start

    def u32(self) -> int:
        return _U32.unpack_from(self.buf, self.need(4))[0]

    def raw(self, n: int) -> bytes:
        start = self.need(n)
        return self.buf[start : start + n]

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise FrameError(f"value nested deeper than {MAX_DEPTH} levels")
        self.items += 1
        if self.items > self.max_items:
            raise FrameError(f"frame holds more than {self.max_items} values")
        tag = self.buf[self.need(1)]
        if tag == 0x64:  # d
            return _F64.unpack_from(self.buf, self.need(8))[0]
        if tag == 0x69:  # i
            return _I64.unpack_from(self.buf, self.need(8))[0]
        if tag == 0x6C:  # l
            count = self.u32()
            if count > self.end - self.pos:
                raise FrameError("list length exceeds the frame")
            return [self.value(depth + 1) for _ in range(count)]
        if tag == 0x4E:  # N
            return None
        if tag == 0x54:  # T
            return True
        if tag == 0x46:  # F
            return False
        if tag == 0x73:  # s
            try:
                return self.raw(self.u32()).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FrameError(f"string is not valid UTF-8: {exc}") from None
        if tag == 0x6D:  # m
            count = self.u32()
            if count > self.end - self.pos:
                raise FrameError("dict length exceeds the frame")
            result = {}
            for _ in range(count):
                key = self.value(depth + 1)
                if type(key) is not str:
                    raise FrameError("dict keys must be strings")
                result[key] = self.value(depth + 1)
            return result
        if tag == 0x62:  # b
            return self.raw(self.u32())
        if tag == 0x4C:  # L
            digits = self.raw(self.u32())
            if len(digits) > 400 or not _BIG_INT.fullmatch(digits):
                raise FrameError("malformed big integer")
            return int(digits)
        if tag == 0x61:  # a
            return self.array()
        raise FrameError(f"unknown value tag 0x{tag:02x}")

    def array(self) -> Any:
        header_start = self.pos - 1
        code = self.raw(self.buf[self.need(1)])
        dtype = _DTYPES.get(code)
        if dtype is None:
            raise FrameError(f"array dtype {code!r} is not allowed")
        ndim = self.buf[self.need(1)]
        if ndim > MAX_DEPTH:
            raise FrameError("array has too many dimensions")
        shape = struct.unpack_from(f"<{ndim}I", self.buf, self.need(4 * ndim))
        nbytes = self.u32()
        start = self.need(nbytes)
        if math.prod(shape) * dtype.itemsize != nbytes:
            raise FrameError("array byte length does not match its shape and dtype")
        if not self.arrays:
            raise FrameError("arrays are not accepted here")
        if len(_DECODED_HEADERS) < 256:
            _DECODED_HEADERS[self.buf[header_start:start]] = (dtype, shape, nbytes)
        # A bytearray copy gives a writable array the receiver may modify in place.
        arr = _np.frombuffer(bytearray(memoryview(self.buf)[start : start + nbytes]), dtype)
        return arr if ndim == 1 else arr.reshape(shape)


def decode(payload: bytes | memoryview, *, max_items: int = 1_000_000, arrays: bool = True) -> Any:
    """Decode one payload; the whole payload must be consumed.

    Any malformation raises :class:`FrameError` and nothing else, whatever the bytes.
    """
    try:
        return _decode(bytes(payload), max_items, arrays)
    except FrameError:
        raise
    except (IndexError, ValueError, TypeError, OverflowError, MemoryError, struct.error) as exc:
        raise FrameError(f"malformed frame ({type(exc).__name__}: {exc})") from None


def _decode(buf: bytes, max_items: int, arrays: bool) -> Any:
    if len(buf) == 9 and buf[0] == 0x69:  # fast path: an int, the commonest action
        return _I64.unpack_from(buf, 1)[0]
    if arrays and len(buf) > 3 and buf[0] == 0x61:  # fast path: an array with a known header
        head_len = 7 + buf[1] + 4 * buf[2 + buf[1]]
        known = _DECODED_HEADERS.get(buf[:head_len])
        if known is not None and len(buf) == head_len + known[2]:
            arr = _np.frombuffer(bytearray(memoryview(buf)[head_len:]), known[0])
            return arr if len(known[1]) == 1 else arr.reshape(known[1])
    if len(buf) > 14 and buf[0] == 0x6C:  # fast path: a list of floats (a continuous action)
        count = _U32.unpack_from(buf, 1)[0]
        if count <= MAX_FLOAT_LIST and count < max_items and len(buf) == 5 + 9 * count:
            layout, tags = _float_list(count)
            if buf[5::9] == tags:
                return list(layout.unpack_from(buf, 5))
    dec = _Decoder(buf, max_items, arrays)
    value = dec.value(0)
    if dec.pos != dec.end:
        raise FrameError("trailing bytes after the value")
    return value


def whole_frame(data: bytes, max_frame: int) -> tuple[int, bytes] | None:
    """``(kind, payload)`` if ``data`` is exactly one frame of at most ``max_frame`` bytes."""
    if len(data) >= 5:
        length, kind = _HEAD.unpack_from(data, 0)
        if len(data) == 4 + length and 1 <= length <= max_frame:
            return kind, data[5:]
    return None


def parse_whole(data: bytes, max_frame: int) -> tuple[int, bytes]:
    """``(kind, payload)`` of ``data``, which must be exactly one frame; FrameError if not."""
    whole = whole_frame(data, max_frame)
    if whole is not None:
        return whole
    reader = FrameReader(max_frame)
    got = reader.take(data)  # raises for a length out of bounds
    if got is None:
        raise FrameError("the frame ends before its length says")
    raise FrameError("bytes after the end of the frame")


def read_frame(data: bytes, max_frame: int) -> tuple[int, Any]:
    """``(kind, value)`` of ``data``, which must be exactly one frame: :func:`parse_whole`
    and :func:`decode` in one step, raising as they do. The commonest frames of an
    episode, an int or an array whose header came before, take a few operations."""
    n = len(data)
    if n > 8:
        length, kind = _HEAD.unpack_from(data, 0)
        if length == n - 4 and length <= max_frame:
            tag = data[5]
            if tag == 0x69 and n == 14:  # i
                return kind, _I64.unpack_from(data, 6)[0]
            if tag == 0x61 and 8 + data[6] <= n:  # a
                end = 12 + data[6] + 4 * data[7 + data[6]]  # of the array's header
                known = _DECODED_HEADERS.get(data[5:end])
                if known is not None and n == end + known[2]:
                    arr = _np.frombuffer(bytearray(data[end:]), known[0])
                    return kind, arr if len(known[1]) == 1 else arr.reshape(known[1])
    kind, payload = parse_whole(data, max_frame)
    return kind, decode(payload)


class FrameReader:
    """Accumulates bytes from a pipe and yields complete ``(kind, payload)`` frames.

    ``max_frame`` bounds a single frame so a policy cannot make the host
    buffer without limit.
    """

    __slots__ = ("_buf", "max_frame")

    def __init__(self, max_frame: int) -> None:
        self._buf = bytearray()
        self.max_frame = max_frame

    def feed(self, data: bytes) -> None:
        self._buf += data

    def take(self, data: bytes) -> tuple[int, bytes] | None:
        """``feed(data)`` then ``next()``; a chunk that is exactly one frame (the usual
        case: one read, one frame) is parsed in place, without buffering."""
        if not self._buf:
            whole = whole_frame(data, self.max_frame)
            if whole is not None:
                return whole
        self._buf += data
        return self.next()

    def next(self) -> tuple[int, bytes] | None:
        buf = self._buf
        if len(buf) < 5:
            return None
        length, kind = _HEAD.unpack_from(buf, 0)
        if length < 1 or length > self.max_frame:
            raise FrameError(f"frame of {length} bytes exceeds the limit of {self.max_frame}")
        total = 4 + length
        if len(buf) < total:
            return None
        payload = bytes(buf[5:total])
        del buf[:total]
        return kind, payload

    @property
    def pending(self) -> int:
        return len(self._buf)


def spin_read(fd: int, poller: Any, tries: int) -> bytes | None:
    """Poll a non-blocking pipe ``tries`` times without sleeping, then read it; None if
    nothing came. ``poller`` is a ``select.poll`` with only ``fd`` registered.

    Both ends of a hand-over spin with it before they sleep (see ``Runner.open``).
    A zero-timeout poll costs half a microsecond here, a read that finds the pipe
    empty three times that (it raises)."""
    poll = poller.poll
    for _ in range(tries):
        if poll(0):
            try:
                return os.read(fd, 1 << 16)
            except BlockingIOError:  # another reader took it (never here) or a spurious wake
                continue
    return None
