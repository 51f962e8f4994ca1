"""Where relay keeps its state: the store, the run folders and the inbox (SPEC §10, §14).

By default the state lives in the working tree's own git directory, ``<git dir>/relay/``
(``.git/relay/`` in a normal repository, ``<common>/.git/worktrees/<name>/relay/`` in a linked
worktree, so that every working tree keeps its own store), out of the working tree that the
model's tools work in. A configured ``state_dir`` overrides it: a relative one is relative to
the repository root (excluded from git through ``info/exclude``), an absolute one is used as is.

Older versions of relay kept the state in ``<repo>/.relay/state/`` and the inbox in
``<repo>/.relay/inbox/``. :func:`migrate_legacy_state` moves them to the new place once.

Layout of the state folder: ``relay.db`` (the store), ``run.lock``, ``runs/<run id>/``,
``inbox/`` (files the user drops there become supplements), ``inbox-processed/``, and the
folders of ``relay report``, ``relay compare`` and ``relay batch``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from relay.config import Config
from relay.errors import GoalStateError, StoreError
from relay.gitrepo import GitRepo
from relay.runlock import take_lock
from relay.text import counted

STORE_FILE = "relay.db"
LOCK_FILE = "run.lock"
INBOX = "inbox"
PROCESSED = "inbox-processed"
DEFAULT_NAME = "relay"
"""The state folder's name inside the git directory."""
LEGACY_STATE = ".relay/state"
"""Where relay before this version kept its state (relative to the repository root)."""
LEGACY_INBOX = ".relay/inbox"
"""Where relay before this version read the user's inbox files."""

__all__ = [
    "LEGACY_INBOX",
    "LEGACY_STATE",
    "Migration",
    "exclude_state_dir",
    "inbox_dir",
    "migrate_legacy_state",
    "processed_dir",
    "ready_state_dir",
    "state_dir",
    "state_dir_and_move",
    "store_path",
]


def state_dir(git: GitRepo, config: Config) -> Path:
    """The absolute path of the state folder of the working tree ``git`` (it may not exist).

    Args:
        git: the working tree.
        config: its configuration; ``config.state_dir`` None means the default
            ``<git dir>/relay``, a relative path is relative to ``git.root``.
    """
    if config.state_dir is None:
        return git.git_dir / DEFAULT_NAME
    configured = Path(config.state_dir).expanduser()
    if configured.is_absolute():
        return configured.resolve()
    return (git.root / configured).resolve()


def store_path(state: Path) -> Path:
    """The store file in the state folder ``state``."""
    return state / STORE_FILE


def inbox_dir(state: Path) -> Path:
    """The inbox folder in the state folder ``state``: a text file dropped there becomes a
    supplement of the open goal (SPEC §10)."""
    return state / INBOX


def processed_dir(state: Path) -> Path:
    """Where read (or rejected) inbox files are moved, in the state folder ``state``."""
    return state / PROCESSED


def exclude_state_dir(git: GitRepo, state: Path) -> None:
    """Keep a state folder inside the working tree out of git (``info/exclude``), so that
    relay's own files never make the tree dirty (SPEC §11); nothing for one outside it."""
    try:
        rel = state.resolve().relative_to(git.root).as_posix()
    except ValueError:
        return
    if rel != ".":
        git.exclude(rel.strip("/") + "/")


# ------------------------------------------------------------------------------ migration


@dataclass(frozen=True)
class Migration:
    """A move of an older relay's state to the new place.

    Attributes:
        source: the old state folder (``<repo>/.relay/state``).
        target: the new one.
        copied: True when it was copied and deleted (another file system), not renamed.
        inbox_files: files of the old inbox (``<repo>/.relay/inbox``) moved into the new one.
        worktrees: linked worktrees (``relay compare``/``relay batch``) inside it, re-linked.
    """

    source: Path
    target: Path
    copied: bool = False
    inbox_files: int = 0
    worktrees: int = 0

    @property
    def notice(self) -> str:
        """One sentence for the user (stderr) and the goal's events."""
        how = "copied (another file system) and removed" if self.copied else "moved"
        extra = ""
        if self.inbox_files:
            extra += f", with {counted(self.inbox_files, 'unread file')} of the old inbox"
        if self.worktrees:
            extra += (
                f", with {counted(self.worktrees, 'worktree')} of relay compare/batch (re-linked)"
            )
        return (
            f"relay's state {how} from {self.source} to {self.target}{extra}; "
            f"the inbox folder is now {inbox_dir(self.target)}"
        )


def _has_store(folder: Path) -> bool:
    return store_path(folder).exists()


def migrate_legacy_state(git: GitRepo, config: Config) -> Migration | None:
    """Move ``<repo>/.relay/state`` (and unread files of ``<repo>/.relay/inbox``) to the
    default state folder, once: only when ``config.state_dir`` is unset, the old folder holds a
    store and the new one does not. A rename where possible (atomic); across file systems a
    copy, then the old folder is deleted. Concurrent relay commands migrate one at a time.

    Returns:
        What was moved, or None when there was nothing to do.

    Raises:
        GoalStateError: a relay run of an older version still works with the old folder (it
            holds its run lock); nothing is moved.
        StoreError: the move failed (names both folders and the reason).
    """
    if config.state_dir is not None:
        return None
    source = git.root / LEGACY_STATE
    target = state_dir(git, config)
    if not _has_store(source) or _has_store(target):
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked_dir(target.parent):
        if not _has_store(source) or _has_store(target):  # another command was quicker
            return None
        with _legacy_run_lock(source):
            worktrees = _worktrees_under(git, source)
            try:
                copied = move_tree(source, target)
                inbox_files = _move_legacy_inbox(git.root / LEGACY_INBOX, inbox_dir(target))
            except OSError as exc:
                raise StoreError(
                    f"cannot move relay's state from {source} to {target}: "
                    f"{exc.strerror or exc}; move the folder there by hand"
                ) from None
    _repair_worktrees(git, [target / p.relative_to(source) for p in worktrees])
    with contextlib.suppress(OSError):  # .relay/ itself, when nothing else is left in it
        (git.root / ".relay").rmdir()
    return Migration(source, target, copied, inbox_files, len(worktrees))


def ready_state_dir(
    git: GitRepo, config: Config, notify: Callable[[str], None] | None = None
) -> Path:
    """The state folder (:func:`state_dir`) after the one-time migration of an older
    relay's state; the migration's notice goes to ``notify`` (default: stderr).

    Raises:
        GoalStateError, StoreError: see :func:`migrate_legacy_state`.
    """
    return state_dir_and_move(git, config, notify)[0]


def state_dir_and_move(
    git: GitRepo, config: Config, notify: Callable[[str], None] | None = None
) -> tuple[Path, Migration | None]:
    """:func:`ready_state_dir` and the one-time move it made, if any (a run records it as an
    event of the goal it served). Raises GoalStateError, StoreError."""
    moved = migrate_legacy_state(git, config)
    if moved is not None:
        (notify or _to_stderr)(moved.notice)
    return state_dir(git, config), moved


def _to_stderr(text: str) -> None:
    print(f"note: {text}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _locked_dir(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on a directory (no file is left behind), blocking."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _legacy_run_lock(source: Path) -> Iterator[None]:
    """Hold the old folder's run lock during the move, so that no older relay run uses it
    meanwhile. Raises ``GoalStateError`` when a live run holds it."""
    path = source / LOCK_FILE
    if not path.exists():
        yield
        return
    with path.open("a+") as fh:
        holder = take_lock(fh)
        if holder is not None:
            raise GoalStateError(
                f"a relay run of an older version (pid {holder}) still works with its state in "
                f"{source}; let it finish, or stop it (Ctrl+C in its terminal, or "
                f"kill -TERM {holder}), then run this command again: relay moves the state "
                "out of the working tree first"
            ) from None
        yield


def move_tree(source: Path, target: Path) -> bool:
    """Move the folder ``source`` to ``target``: a rename when ``target`` is absent (or an
    empty folder), else the entries are merged in (an entry already in ``target`` wins; the
    moved one is kept beside it with a ``.moved-<n>`` suffix). Across file systems each piece
    is copied under a temporary name, renamed into place, and the original deleted.

    Returns:
        True when anything had to be copied (another file system).

    Raises:
        OSError: the move failed; what was moved so far stays moved.
    """
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        target.rmdir()
    if not target.exists() and not target.is_symlink():
        return _move_one(source, target)
    copied = False
    for child in sorted(source.iterdir()):
        dest = target / child.name
        if dest.is_dir() and child.is_dir() and not child.is_symlink():
            copied = move_tree(child, dest) or copied
        else:
            copied = _move_one(child, _free_name(dest)) or copied
    source.rmdir()
    return copied


def _free_name(dest: Path) -> Path:
    if not dest.exists() and not dest.is_symlink():
        return dest
    n = 1
    while True:
        candidate = dest.with_name(f"{dest.name}.moved-{n}")
        if not candidate.exists() and not candidate.is_symlink():
            return candidate
        n += 1


def _move_one(source: Path, target: Path) -> bool:
    """Rename ``source`` to the free path ``target``; copy + delete across file systems."""
    try:
        os.rename(source, target)
        return False
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    partial = target.with_name(f".{target.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, partial, symlinks=True)
        else:
            shutil.copy2(source, partial, follow_symlinks=False)
        os.rename(partial, target)
    except OSError:
        if partial.is_dir() and not partial.is_symlink():
            shutil.rmtree(partial, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                partial.unlink()
        raise
    if source.is_dir() and not source.is_symlink():
        shutil.rmtree(source)
    else:
        source.unlink()
    return True


def _move_legacy_inbox(old: Path, new: Path) -> int:
    """Move the files of the old inbox into the new one; the old folder goes when empty."""
    if not old.is_dir() or old.is_symlink():
        return 0
    moved = 0
    for path in sorted(old.iterdir()):
        if path.is_file() and not path.is_symlink():
            new.mkdir(parents=True, exist_ok=True)
            _move_one(path, _free_name(new / path.name))
            moved += 1
    with contextlib.suppress(OSError):
        old.rmdir()
    return moved


def _worktrees_under(git: GitRepo, folder: Path) -> list[Path]:
    """The linked worktrees of the repository that live inside ``folder``."""
    proc = subprocess.run(
        ["git", "-C", str(git.root), "worktree", "list", "--porcelain", "-z"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    found = []
    for field in proc.stdout.split("\0"):
        if field.startswith("worktree "):
            path = Path(field.removeprefix("worktree "))
            if path != folder and path.is_relative_to(folder):
                found.append(path)
    return found


def _repair_worktrees(git: GitRepo, paths: list[Path]) -> None:
    """Tell git where moved linked worktrees are now (``git worktree repair``), so that a
    later ``git worktree prune`` does not drop them."""
    existing = [str(p) for p in paths if p.exists()]
    if existing:
        subprocess.run(
            ["git", "-C", str(git.root), "worktree", "repair", *existing],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
