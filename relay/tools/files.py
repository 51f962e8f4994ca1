"""The file tools ``read_file``, ``write_file`` and ``edit_file`` (SPEC §5).

Each returns a :class:`ToolResult`; refusals (:class:`PathRefused`) and OS errors are left to the
caller (:func:`relay.tools.execute`), which turns them into error results.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from relay.fswrite import replace_file
from relay.tools.base import ToolContext, ToolResult
from relay.tools.paths import resolve_shown

_CHUNK = 65536
MAX_EDIT_BYTES = 32 * 1024 * 1024
"""Largest file ``edit_file`` loads into memory, in bytes; bigger files need ``shell``."""

_MAX_LISTING = 200


def _iter_lines(handle: BinaryIO, cap: int) -> Iterator[tuple[bytes, bool]]:
    """Yield ``(start_of_line, complete)`` for each line, keeping at most ``cap`` bytes of a
    line in memory; the rest of an over-long line is read and dropped."""
    while True:
        piece = handle.readline(cap)
        if not piece:
            return
        if piece.endswith(b"\n") or len(piece) < cap:
            yield piece, True
            continue
        # Over-long line: skip the rest of it in bounded chunks.
        while True:
            rest = handle.readline(_CHUNK)
            if not rest or rest.endswith(b"\n"):
                break
        yield piece, False


def _utf8_cut(data: bytes, size: int) -> bytes:
    """The first ``size`` bytes of ``data``, shortened so no UTF-8 character is split."""
    if len(data) <= size:
        return data
    end = size
    back = 0
    while end > 0 and back < 3 and (data[end] & 0xC0) == 0x80:
        end -= 1
        back += 1
    return data[:end] if end > 0 else data[:size]


def _directory_error(target: Path, shown: str, limit: int) -> ToolResult:
    try:
        names = sorted(
            entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
            for entry in os.scandir(target)
        )
    except OSError as exc:
        return ToolResult(f"{shown} is a directory, not a file ({exc.strerror})", is_error=True)
    head = f"{shown} is a directory, not a file; read_file needs a file. Entries:"
    listed: list[str] = []
    used = len(head)
    for name in names[:_MAX_LISTING]:
        if used + len(name) + 2 > limit:
            break
        listed.append(name)
        used += len(name) + 2
    text = head + ("\n" + "\n".join(listed) if listed else " (none)")
    if len(listed) < len(names):
        text += f"\n[... {len(names) - len(listed)} more entries]"
    return ToolResult(text, is_error=True)


def read_file(
    ctx: ToolContext, path: str, offset: int | None = None, limit: int | None = None
) -> ToolResult:
    """Read a text file of the repository.

    Args:
        ctx: the tool context.
        path: repo-relative path (protected files may be read).
        offset: first line to return, 1-based; default 1.
        limit: number of lines to return; default: as many as fit.

    Returns:
        The text (non-UTF-8 bytes replaced by U+FFFD), at most about
        ``ctx.output_limit_bytes`` bytes; when cut, a final ``[... ...]`` line says which
        ``offset`` reads further. Missing files, folders and bad offsets give error results.

    Raises:
        PathRefused: the path may not be read (outside the repository, ``.git``, state dir).
        OSError: an unexpected OS error.
    """
    if offset is not None and offset < 1:
        return ToolResult(f"read_file: offset must be 1 or more (got {offset})", is_error=True)
    if limit is not None and limit < 1:
        return ToolResult(f"read_file: limit must be 1 or more (got {limit})", is_error=True)
    target, shown = resolve_shown(ctx, path, for_write=False)
    budget = max(1, ctx.output_limit_bytes)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return ToolResult(f"no such file: {shown}", is_error=True)
    if stat.S_ISDIR(info.st_mode):
        return _directory_error(target, shown, budget)
    if not stat.S_ISREG(info.st_mode):
        return ToolResult(f"{shown} is not a regular file", is_error=True)

    start = offset or 1
    out = bytearray()
    shown_lines = 0
    line_no = 0
    note: str | None = None
    with open(target, "rb") as handle:
        for line_no, (line, _complete) in enumerate(_iter_lines(handle, budget + 1), start=1):
            if line_no < start:
                continue
            if limit is not None and shown_lines >= limit:
                break
            if len(out) + len(line) > budget:
                if shown_lines == 0:
                    out += _utf8_cut(line, budget)
                    note = (
                        f"line {line_no} is longer than the output limit of {budget} bytes; "
                        "only its start is shown (use shell, e.g. cut or head -c, for the rest)"
                    )
                else:
                    note = (
                        f"output limit of {budget} bytes reached after line {line_no - 1}; "
                        f"read further with offset={line_no}"
                    )
                break
            out += line
            shown_lines += 1
    if shown_lines == 0 and note is None:
        if line_no == 0:
            return ToolResult(f"(file {shown} is empty)")
        if start > line_no:
            return ToolResult(
                f"(offset {start} is past the end of {shown}, which has {line_no} lines)"
            )
    text = out.decode("utf-8", errors="replace")
    if note is not None:
        if not text.endswith("\n"):
            text += "\n"
        text += f"[... {note} ...]"
    return ToolResult(text)


def write_file(ctx: ToolContext, path: str, content: str) -> ToolResult:
    """Create or overwrite a file with ``content`` encoded as UTF-8, creating parent folders.

    Args:
        ctx: the tool context.
        path: repo-relative path; protected paths are refused and nothing is written.
        content: the whole new text of the file.

    Returns:
        ``"wrote N bytes to PATH"`` with ``paths_written=(PATH,)``.

    Raises:
        PathRefused: the path may not be written.
        OSError: the file or a parent folder cannot be created or written.
    """
    target, shown = resolve_shown(ctx, path, for_write=True)
    if target.is_dir():
        return ToolResult(f"{shown} is a directory; cannot write a file there", is_error=True)
    if target.exists() and not target.is_file():
        return ToolResult(f"{shown} is not a regular file; refusing to write it", is_error=True)
    data = content.encode("utf-8", errors="replace")
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, data)
    return ToolResult(f"wrote {len(data)} bytes to {shown}", paths_written=(shown,))


def _occurrences(text: str, old: str, stop_after: int = 1000) -> list[int]:
    """Start indexes of ``old`` in ``text``, overlapping matches included (at most
    ``stop_after``)."""
    found: list[int] = []
    index = text.find(old)
    while index != -1 and len(found) < stop_after:
        found.append(index)
        index = text.find(old, index + 1)
    return found


def edit_file(ctx: ToolContext, path: str, old: str, new: str) -> ToolResult:
    """Replace the one occurrence of ``old`` in a file with ``new``.

    Args:
        ctx: the tool context.
        path: repo-relative path of an existing file; protected paths are refused.
        old: the exact text to replace; must occur exactly once (not empty).
        new: the replacement text.

    Returns:
        A result naming the line of the change, with ``paths_written=(PATH,)``; an error result
        naming the count when ``old`` occurs zero or several times (nothing is written then).
        Bytes that are not UTF-8 elsewhere in the file are kept unchanged.

    Raises:
        PathRefused: the path may not be written.
        OSError: the file cannot be read or written.
    """
    if old == "":
        return ToolResult(
            "edit_file: old is empty; give the exact text to replace (use write_file to create "
            "or overwrite a whole file)",
            is_error=True,
        )
    target, shown = resolve_shown(ctx, path, for_write=True)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return ToolResult(
            f"no such file: {shown} (use write_file to create a new file)", is_error=True
        )
    if stat.S_ISDIR(info.st_mode):
        return ToolResult(f"{shown} is a directory, not a file", is_error=True)
    if not stat.S_ISREG(info.st_mode):
        return ToolResult(f"{shown} is not a regular file", is_error=True)
    if info.st_size > MAX_EDIT_BYTES:
        return ToolResult(
            f"{shown} has {info.st_size} bytes, more than edit_file handles "
            f"({MAX_EDIT_BYTES}); use shell (e.g. sed) instead",
            is_error=True,
        )
    with open(target, "rb") as handle:
        text = handle.read().decode("utf-8", errors="surrogateescape")
    hits = _occurrences(text, old)
    if len(hits) != 1:
        count = f"{len(hits)}+" if len(hits) >= 1000 else str(len(hits))
        if not hits:
            hint = "; check the exact text (whitespace and indentation count) with read_file"
        else:
            hint = "; give more context in old so that it matches exactly once"
        return ToolResult(
            f"old text found {count} times in {shown}{hint}; nothing was changed", is_error=True
        )
    if old == new:
        return ToolResult(f"old and new are the same; {shown} is unchanged", is_error=True)
    index = hits[0]
    updated = text[:index] + new + text[index + len(old) :]
    replace_file(target, updated.encode("utf-8", errors="surrogateescape"))
    line = text.count("\n", 0, index) + 1
    return ToolResult(f"replaced 1 occurrence in {shown} at line {line}", paths_written=(shown,))
