"""Who wrote into working trees since a moment: what a remembered scan of a tree may trust.

relay scans a working tree with git (``git status``, ``git add -A``) and, to scan it once per
round (SPEC §11), remembers what a scan found (:mod:`relay.gitscan`). A remembered answer stays
true until something writes the tree, so every writer relay starts says so here:

* relay's own writes name the file (:func:`wrote`): :func:`relay.fswrite.replace_file` (the
  file tools, the progress file, the goal state, restored protected paths and
  ``.gitattributes`` lines) and :func:`relay.fswrite.own_folder` when it replaces a component;
* a command may write anything (:func:`wrote_anything`): :func:`relay.tools.shell.run_shell`
  (the model's ``shell`` and the audit's commands) when it starts and when it ended, and
  :func:`relay.sandbox.reaper.stop_escaped` when it found processes that outlived their call.

A reader takes :func:`mark` before it scans and later asks :func:`since`: the files named
since the mark, or None when anything may have been written. Writes relay does not start (the
user editing files while a goal runs) are not seen, as a scan does not see what is written
just after it.

The log is process-wide (goals run in threads of one process share it: a command of one goal
makes every remembered scan fall back to a new one) and thread-safe.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path

__all__ = ["KEEP", "mark", "since", "wrote", "wrote_anything"]

KEEP = 4096
"""Named writes kept; a reader whose mark is older than the oldest kept one gets None."""

_lock = threading.Lock()
_count = 0  # writes so far; each write gets the next number
_anything_at = 0  # the number of the last write that named no file
_named: deque[tuple[int, Path, bool]] = deque(maxlen=KEEP)  # (number, path, replaced)


def mark() -> int:
    """The current position of the log, to pass to :func:`since` later."""
    with _lock:
        return _count


def wrote(path: Path | str, *, replaced: bool = False) -> None:
    """Record that the file (or folder entry) at ``path`` was written, created or removed;
    ``replaced``: the writer replaced a file that was there (so git tracks it or not as it
    did before the write), else the path may be new (see :func:`since`)."""
    global _count
    absolute = Path(os.path.abspath(path))
    with _lock:
        _count += 1
        _named.append((_count, absolute, replaced))


def wrote_anything() -> None:
    """Record that a command ran which may have written any file."""
    global _count, _anything_at
    with _lock:
        _count += 1
        _anything_at = _count


def since(position: int, *, new_only: bool = False) -> frozenset[Path] | None:
    """The absolute paths written after ``position`` (from :func:`mark`) — with
    ``new_only``, those of them that some write since may have created (not recorded as
    ``replaced``); None when something that names no file ran since, or when more files were
    named than :data:`KEEP`."""
    with _lock:
        if _anything_at > position:
            return None
        if _count == position:
            return frozenset()
        if not _named or _named[0][0] > position + 1:
            return None  # some of the writes since have been dropped from the log
        found = set()
        for number, path, replaced in reversed(_named):  # newest first: stop at the mark
            if number <= position:
                break
            if not (new_only and replaced):
                found.add(path)
        return frozenset(found)
