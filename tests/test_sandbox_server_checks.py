"""The kept sandbox server's look for System V IPC objects (relay.sandbox.session_server):
the kernel's counts, and the ``/proc/sysvipc`` tables where a count cannot be had."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import pytest

from relay.sandbox.session_server import IpcObjects, ProcFiles


def tables(tmp_path: Path, rows: tuple[int, int, int]) -> ProcFiles:
    names = []
    for kind, count in zip(("shm", "msg", "sem"), rows, strict=True):
        path = tmp_path / kind
        path.write_text("       key      id perms\n" + "  1 2 666\n" * count)
        names.append(str(path))
    return ProcFiles(tuple(names))


def counting(ipc: IpcObjects, counts: tuple[int, int, int]) -> None:
    """Make ``ipc``'s three calls fill its buffer with ``counts`` at their offsets."""

    def call(offset: int, value: int) -> Callable[[], int]:
        def fill() -> int:
            ctypes.c_int.from_buffer(ipc._buffer, offset).value = value
            return 0

        return fill

    offsets = [offset for _, offset in ipc._counts]
    ipc._counts = tuple(
        (call(offset, value), offset) for offset, value in zip(offsets, counts, strict=True)
    )


@pytest.mark.parametrize("counts", [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 3)])
def test_an_object_of_any_kind_is_seen_in_the_counts(counts: tuple[int, int, int]) -> None:
    ipc = IpcObjects()
    counting(ipc, counts)
    assert ipc.exist() is any(counts)


@pytest.mark.parametrize("rows", [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 2)])
def test_without_counts_the_tables_are_read(tmp_path: Path, rows: tuple[int, int, int]) -> None:
    ipc = IpcObjects()
    ipc._counts = ((lambda: -1, 0),)
    ipc._tables = tables(tmp_path, rows)
    assert ipc.exist() is any(rows)
