"""relay's own files in the working tree: the progress file and the goal state beside it
(SPEC §6, §11, §14).

Both are written as new files, atomically and inside the tree: a symlink, a file or a folder
the model put at their place, or at the place of a folder above them (``.relay`` ->
elsewhere), is removed first, so that relay never writes outside the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

from relay.fsread import read_regular_text
from relay.fswrite import put_own_file
from relay.pathalarm import PathAlarm

GOAL_STATE_NAME = "goal.json"
"""The goal state's file name, in the progress file's folder."""


class OwnFiles:
    """The progress file (``progress_rel``, relative to ``root``) and the goal state.

    ``progress_text`` is the progress file as relay last wrote it (``""`` before).
    """

    def __init__(self, root: Path, progress_rel: str, progress_text: str = "") -> None:
        self.root = root
        self.progress_rel = progress_rel
        self.progress_path = root / progress_rel
        self.goal_state_path = self.progress_path.parent / GOAL_STATE_NAME
        self.goal_state_rel = self.goal_state_path.relative_to(root).as_posix()
        self.progress_text = progress_text
        self._alarm: PathAlarm | None = None  # armed before relay last looked at the file

    @property
    def paths(self) -> frozenset[str]:
        """Both files' paths relative to the root (never counted as the model's changes)."""
        return frozenset({self.progress_rel, self.goal_state_rel})

    def write_progress(self, text: str) -> None:
        """Write the progress file."""
        self._put(self.progress_path, text)
        self.progress_text = text

    def write_goal_state(self, text: str) -> None:
        """Write the goal state (``goal.json``)."""
        self._put(self.goal_state_path, text)

    def restore_progress(self, *, watched: bool = False) -> bool:
        """Put the progress file back when something changed it since relay wrote it (a
        planted FIFO never blocks the read); True when it had changed. ``watched`` (in the
        sandbox, where the file is read-only to the model's commands): it is read only when
        the kernel told of a change to it since the last look (:mod:`relay.pathalarm`);
        otherwise always (a write through ``mmap`` tells the kernel's file events nothing)."""
        if watched:
            alarm = self._alarm
            if alarm is not None and not alarm.rang():
                return False
            path = os.path.abspath(self.progress_path)
            self._alarm = alarm.rearmed() if alarm else PathAlarm([path], contents=True)
        current = read_regular_text(self.progress_path)
        if current == self.progress_text and not self.progress_path.is_symlink():
            return False
        self._put(self.progress_path, self.progress_text)
        return True

    def _put(self, path: Path, text: str) -> None:
        put_own_file(self.root, path, text.encode("utf-8"))
