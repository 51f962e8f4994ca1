"""File watching (watchdog): the inbox folder and the goal file bring supplements to a running
goal (SPEC §10). Events only set a flag; the loop reads the files at its next step boundary."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from relay import treewrites
from relay.fsread import read_regular_bytes


class _Flag(FileSystemEventHandler):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def on_any_event(self, event: FileSystemEvent) -> None:
        self.event.set()


def file_digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes, or None when it cannot be read."""
    data = read_regular_bytes(path)  # a FIFO or device planted there never blocks
    return None if data is None else hashlib.sha256(data).hexdigest()


def goal_file_to_watch(root: Path, stored: str | None, given: Path | None) -> Path | None:
    """The goal file whose edits become supplements (SPEC §10): the goal's own (``stored``
    repo-relative), else the ``--goal-file`` this run was ``given`` outside the repository —
    its edits count while this run lasts, from the text it had when the run started. None
    when there is none, or when the goal's own resolves outside the tree (a symlink committed
    on a branch, whose goal state names it, would send a file of this machine to the model)."""
    if stored:  # read only inside the tree: a goal state on a branch names it (SPEC §14)
        path, top = root / stored, os.path.realpath(root)
        real = os.path.realpath(path)
        return path if real == top or real.startswith(top.rstrip("/") + "/") else None
    return Path(os.path.abspath(given)) if given is not None else None


class SupplementWatcher:
    """Watches ``inbox`` (a folder) and ``goal_file`` and yields new supplement texts.

    Args:
        inbox: the folder users drop text files into (``inbox/`` in relay's state folder,
            :func:`relay.statedir.inbox_dir`); created.
        processed: where read inbox files are moved (inside the state directory).
        goal_file: the goal file, whose edits become supplements; None when there is none.
    """

    def __init__(
        self,
        inbox: Path,
        processed: Path,
        goal_file: Path | None,
        goal_digest: str | None = None,
    ) -> None:
        self.inbox = inbox
        self.processed = processed
        self.goal_file = goal_file
        self.changed = threading.Event()
        self.changed.set()  # look once at start
        # The digest the goal had when last read: an edit made while no run watched counts.
        self.goal_digest = goal_digest or (file_digest(goal_file) if goal_file else None)
        self._observer: Observer | None = None

    def start(self) -> None:
        """Start watching (a background thread)."""
        self.inbox.mkdir(parents=True, exist_ok=True)
        observer = Observer()
        handler = _Flag(self.changed)
        observer.schedule(handler, str(self.inbox), recursive=False)
        if self.goal_file is not None and self.goal_file.parent.is_dir():
            observer.schedule(handler, str(self.goal_file.parent), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer

    def stop(self) -> None:
        """Stop watching."""
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None

    def snapshot(self) -> tuple[frozenset[str], str | None]:
        """The inbox's file names and the goal file's digest now (before a shell call)."""
        names = (
            frozenset(p.name for p in self.inbox.iterdir()) if self.inbox.is_dir() else frozenset()
        )
        digest = file_digest(self.goal_file) if self.goal_file else None
        return names, digest

    def disown_changes_since(
        self, before: tuple[frozenset[str], str | None], command: str, *, sandboxed: bool = False
    ) -> list[str]:
        """Set aside what a shell ``command`` may have changed since ``before`` (the model's
        doing, SPEC §5, §14): new inbox files move to the processed folder as ``rejected-…``
        and the goal file's current text is taken as read without becoming a supplement.

        Inside the sandbox (``sandboxed``) the command can reach neither the inbox nor the goal
        file (read-only, or outside the tree), so a change made meanwhile is the user's (an
        edit during a long test run) and stays a supplement. Without it, every inbox file that
        appeared and every goal-file edit made while the command ran is set aside: the model
        could have made it through any path, and the user can say it again with ``relay say``.
        Returns what was set aside, in words."""
        names, digest = before
        found = []
        if self.inbox.is_dir() and not sandboxed:
            for path in sorted(self.inbox.iterdir()):
                if path.name not in names and path.is_file():
                    self.processed.mkdir(parents=True, exist_ok=True)
                    path.replace(self.processed / f"rejected-{time.time_ns()}-{path.name}")
                    found.append(f"the inbox file {path.name}")
        if self.goal_file is not None and not sandboxed:
            now = file_digest(self.goal_file)
            if now != digest:
                self.goal_digest = now
                found.append(f"the goal file {self.goal_file.name}")
        return found

    def poll(self) -> list[tuple[str, str]]:
        """New supplements since the last poll: ``[(source, text)]`` with source ``inbox`` or
        ``goal_file``. Inbox files are moved to ``processed``; empty files are dropped."""
        if not self.changed.is_set():
            return []
        self.changed.clear()
        found: list[tuple[str, str]] = []
        if self.inbox.is_dir():
            for path in sorted(self.inbox.iterdir(), key=lambda p: (p.stat().st_mtime, p.name)):
                if not path.is_file() or path.name.startswith("."):
                    continue
                text = path.read_text(encoding="utf-8", errors="replace").strip()
                self.processed.mkdir(parents=True, exist_ok=True)
                path.replace(self.processed / f"{time.time_ns()}-{path.name}")
                if text:
                    found.append(("inbox", text))
        data = read_regular_bytes(self.goal_file) if self.goal_file is not None else None
        if data is not None and hashlib.sha256(data).hexdigest() != self.goal_digest:
            self.goal_digest = hashlib.sha256(data).hexdigest()  # what is read is what counts
            treewrites.wrote(self.goal_file)  # the user's edit: part of the round's commit
            text = data.decode("utf-8", errors="replace").strip()
            found.append(("goal_file", f"The goal file was edited; it now reads:\n{text}"))
        return found
