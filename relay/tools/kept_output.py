"""What relay keeps on disk of a command's output (SPEC §5; issue 27): its head and its tail.

A command can print without end (a test that dumps a buffer at exit, ``yes``): the run folder
keeps at most ``kept_output_bytes`` (``tools.kept_output_bytes``, 8 MiB by default) of it.
:class:`KeptOutput` streams the output into its file: the first half of that budget goes to
the file as it comes, the last half is held in a :class:`TailRing` (a fixed buffer that never
grows) and written at the end, after a note naming the full size and the bytes dropped in
between. Nothing ever holds the whole output, in memory or on disk.
"""

from __future__ import annotations

import contextlib
from typing import BinaryIO

__all__ = ["DEFAULT_KEPT_BYTES", "KeptOutput", "TailRing", "dropped_note"]

DEFAULT_KEPT_BYTES = 8 * 1024 * 1024
"""Bytes of a command's output kept on disk by default (head and tail halves)."""


class TailRing:
    """The last ``size`` bytes given to :meth:`add`, in a buffer that grows with them up to
    ``size`` bytes and never past it, whatever is added.

    Args:
        size: bytes kept (at least 1).
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._buffer: bytearray | None = None
        self._end = 0  # where the next byte goes
        self._full = False

    def __len__(self) -> int:
        return self.size if self._full else self._end

    def add(self, data: bytes | memoryview) -> None:
        """Keep ``data``'s bytes as the newest; the oldest beyond ``size`` are forgotten."""
        view = memoryview(data)
        if self._buffer is None:
            self._buffer = bytearray()
        buffer, size = self._buffer, self.size
        if len(buffer) < size:  # still growing: appended up to ``size``
            room = size - len(buffer)
            buffer += view[:room]
            view = view[room:]
            self._full = len(buffer) == size
            self._end = len(buffer) % size
            if not view:
                return
        if len(view) >= size:
            buffer[:] = view[len(view) - size :]
            self._end = 0
            return
        end = self._end + len(view)
        if end <= size:
            buffer[self._end : end] = view
        else:
            first = size - self._end
            buffer[self._end :] = view[:first]
            buffer[: end - size] = view[first:]
        self._end = end % size

    def parts(self) -> tuple[memoryview, ...]:
        """The kept bytes, oldest first, as at most two views of the buffer (no copy)."""
        if self._buffer is None:
            return ()
        view = memoryview(self._buffer)
        if not self._full:
            return (view[: self._end],)
        return (view[self._end :], view[: self._end])


def dropped_note(total: int, head: int, tail: int) -> str:
    """The line put where the middle of an output was dropped (in the kept file)."""
    dropped = total - head - tail
    return (
        f"\n[relay: {dropped} bytes dropped here; the command printed {total} bytes, of which "
        f"this file keeps the first {head} and the last {tail} (tools.kept_output_bytes)]\n"
    )


class KeptOutput:
    """The head and tail of an output, streamed into ``handle`` (:mod:`relay.tools.kept_output`).

    Args:
        handle: the open file (binary, written from its start).
        keep: bytes of output kept in all (the first ``keep - keep // 2`` and the last
            ``keep // 2``); at least 2.

    Raises:
        OSError: from :meth:`write` and :meth:`finish`, when the file cannot be written.
    """

    def __init__(self, handle: BinaryIO, keep: int) -> None:
        keep = max(2, keep)
        self.handle = handle
        self.total = 0
        self.head = 0
        self._head_room = keep - keep // 2
        self._tail = TailRing(keep // 2)

    @property
    def tail_bytes(self) -> int:
        """Bytes of the output's end kept (written by :meth:`finish`)."""
        return len(self._tail)

    @property
    def dropped(self) -> int:
        """Bytes of the output between the head and the tail that are not kept."""
        return self.total - self.head - len(self._tail)

    def write(self, data: bytes) -> None:
        """Add the next bytes of the output."""
        self.total += len(data)
        if self._head_room > 0:
            part = data[: self._head_room]
            self.handle.write(part)
            self.head += len(part)
            self._head_room -= len(part)
            data = data[len(part) :]
        if data:
            self._tail.add(data)

    def finish(self) -> None:
        """Write the note (when bytes were dropped) and the tail; the file is then complete
        (closing it is the caller's)."""
        if self.dropped:
            note = dropped_note(self.total, self.head, len(self._tail))
            self.handle.write(note.encode("ascii"))
        for part in self._tail.parts():
            self.handle.write(part)
        with contextlib.suppress(OSError):
            self.handle.flush()
