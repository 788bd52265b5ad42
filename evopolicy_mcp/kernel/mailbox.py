"""A shared-memory mailbox for the hand-over between the host and a policy process. Stdlib only.

With a worker and its policy process spinning on two CPUs, a hand-over
through the frame pipes costs a write, a read and a poll per try on each
side: system calls that also evict the host's caches between two
environment steps. Through shared memory a hand-over is a copy and a
counter, with no system call while both sides spin.

One sealed memfd per episode, made by the host and mapped by both::

    0       host -> policy sequence number (u64)
    64      policy -> host sequence number (u64)
    128     1 while the policy sleeps waiting for the host (u8)
    192     1 while the host sleeps waiting for the policy (u8)
    4096    host -> policy slot: one whole frame
    +H2P    policy -> host slot: one whole frame

A message is a frame (:mod:`evopolicy_mcp.kernel.frames`) written into the
sender's slot before its sequence number is raised; a frame too large for
the slot goes through the sender's pipe instead, and the slot then holds
:data:`ON_PIPE`. The pipes stay: they carry those frames, a ``WAKE``
frame to a receiver that went to sleep, and the end of the process.

Every message in a mailbox answers one from the other side (the host's
CONTEXT is answered by READY, each OBSERVATION by an ACTION), so an honest
sender never rewrites a slot its peer may still be copying. The receiver
copies a frame out before it reads it, bounded by the slot, so a policy that
scribbles on the shared pages at any moment can only send itself garbage: the host decodes a copy, under the same bounds as a
pipe frame. Stores become visible in program order only on x86-64 (TSO),
so the mailbox is used there and nowhere else (:func:`supported`).

A sleeper sets its flag, checks once more, then sleeps for a nap that starts
at :data:`NAP_SECONDS` and doubles up to :data:`MAX_NAP_SECONDS`: a wake-up
lost to the store/load reordering x86 does allow costs at most that, never a
hang, and a long wait costs the sleeper a few wake-ups a second.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import platform
import struct
from collections.abc import Callable

__all__ = [
    "H2P_SLOT",
    "MAX_NAP_SECONDS",
    "NAP_SECONDS",
    "CHECKS_PER_TRY",
    "ON_PIPE",
    "P2H_SLOT",
    "SIZE",
    "Mailbox",
    "create",
    "supported",
]

H2P_SLOT = 4 << 20  # observations and the context; larger frames take the pipe
P2H_SLOT = (1 << 20) + 64  # actions: the host takes none larger (MAX_ACTION_FRAME)
_HEADER = 4096
SIZE = _HEADER + H2P_SLOT + P2H_SLOT
NAP_SECONDS = 0.001  # a sleeper's first nap; each next one is twice as long ...
MAX_NAP_SECONDS = 0.05  # ... up to this: a lost wake-up costs at most this much
CHECKS_PER_TRY = 8  # mailbox looks per spin try (a try at a pipe costs about eight looks)
ON_PIPE = b"\xff\xff\xff\xff"  # in a slot: the frame with this sequence number is on the pipe

_SEQ = struct.Struct("<Q")
_LEN = struct.Struct("<I")
_H2P_SEQ, _P2H_SEQ, _POLICY_ASLEEP, _HOST_ASLEEP = 0, 64, 128, 192
_H2P, _P2H = _HEADER, _HEADER + H2P_SLOT


def supported() -> bool:
    return platform.machine() in ("x86_64", "AMD64") and hasattr(os, "memfd_create")


def create() -> int:
    """A new mailbox memfd of :data:`SIZE` bytes whose size nobody can change (sealed)."""
    fd = os.memfd_create("evopolicy-mailbox", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, SIZE)
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except OSError:
        os.close(fd)
        raise
    return fd


class Mailbox:
    """One side's view: ``host=True`` sends host -> policy and receives policy -> host."""

    __slots__ = (
        "_asleep",
        "_in",
        "_in_cap",
        "_in_seq",
        "_mm",
        "_out",
        "_out_cap",
        "_out_seq",
        "_peer_asleep",
        "received",
        "sent",
    )

    def __init__(self, fd: int, *, host: bool) -> None:
        if os.fstat(fd).st_size != SIZE:
            raise OSError("the mailbox has the wrong size")
        self._mm = mmap.mmap(fd, SIZE)
        if host:
            self._out, self._out_cap, self._out_seq = _H2P, H2P_SLOT, _H2P_SEQ
            self._in, self._in_cap, self._in_seq = _P2H, P2H_SLOT, _P2H_SEQ
            self._asleep, self._peer_asleep = _HOST_ASLEEP, _POLICY_ASLEEP
        else:
            self._out, self._out_cap, self._out_seq = _P2H, P2H_SLOT, _P2H_SEQ
            self._in, self._in_cap, self._in_seq = _H2P, H2P_SLOT, _H2P_SEQ
            self._asleep, self._peer_asleep = _POLICY_ASLEEP, _HOST_ASLEEP
        self.sent = 0  # messages sent
        self.received = 0  # the peer's sequence number last taken

    def send(self, frame: bytes) -> bool:
        """Put ``frame`` in the slot and raise the sequence number; False if it does not
        fit, after which the caller writes it to its pipe and calls :meth:`sent_on_pipe`."""
        if len(frame) > self._out_cap:
            return False
        mm = self._mm
        mm[self._out : self._out + len(frame)] = frame
        self.sent += 1
        _SEQ.pack_into(mm, self._out_seq, self.sent)
        return True

    def sent_on_pipe(self) -> None:
        mm = self._mm
        mm[self._out : self._out + 4] = ON_PIPE
        self.sent += 1
        _SEQ.pack_into(mm, self._out_seq, self.sent)

    def peer_asleep(self) -> bool:
        return self._mm[self._peer_asleep] != 0

    def post(self, frame: bytes, write_pipe: Callable[[bytes], None]) -> bool:
        """Send ``frame``, through ``write_pipe`` when it does not fit the slot; True if
        the peer sleeps, and so needs a ``WAKE`` frame on the pipe."""
        if not self.send(frame):
            write_pipe(frame)
            self.sent_on_pipe()
        return self.peer_asleep()

    def take(self) -> bytes | None:
        """A copy of the peer's newest message if one came that was not taken, else None.

        :data:`ON_PIPE` means the message is on the pipe: take it from there and call
        :meth:`took_from_pipe`. A frame whose length field does not fit the slot
        comes back cut at the slot's end, for the frame parser to reject.
        """
        mm = self._mm
        seq = _SEQ.unpack_from(mm, self._in_seq)[0]
        if seq <= self.received:
            return None
        start = self._in
        head = mm[start : start + 4]
        if head == ON_PIPE:
            self.received = seq - 1  # all before it are past; it waits on the pipe
            return ON_PIPE
        self.received = seq
        end = start + min(4 + _LEN.unpack(head)[0], self._in_cap)
        return mm[start:end]

    def took_from_pipe(self) -> None:
        """A message (not a WAKE) was taken from the pipe: its sequence number is past.

        Counting it keeps a marker the receiver never looked at (the frame came
        first, as it is written first) from being taken for a message still to come.
        """
        self.received += 1

    def pending(self) -> bool:
        """Whether a message came that :meth:`take` has not taken."""
        return _SEQ.unpack_from(self._mm, self._in_seq)[0] > self.received

    def spin(self, tries: int) -> bytes | None:
        """:meth:`take` until a message comes, at most ``tries`` looks.

        The GIL stays held: the interpreter hands it to a thread that asks for it
        after its switch interval, which the executor lowers for a spinning host.
        Letting go of it here did not serve other threads better: ``time.sleep(0)``
        sleeps for the timer slack (60 us here) and the answer waits, and a release
        without a sleep is taken back before a waiting thread wakes."""
        mm, at, last = self._mm, self._in_seq, self.received
        unpack = _SEQ.unpack_from
        for _ in range(tries):
            if unpack(mm, at)[0] > last:
                return self.take()
        return None

    def sleeping(self, asleep: bool) -> None:
        self._mm[self._asleep] = 1 if asleep else 0

    def doze(self) -> bool:
        """Raise the sleep flag before going to sleep; False, with the flag down again,
        if a message came meanwhile (take it instead of sleeping)."""
        self.sleeping(True)
        if self.pending():
            self.sleeping(False)
            return False
        return True

    def close(self) -> None:
        self._mm.close()
