"""Places relay will write, checked before a command changes anything (issue 28, items 4, 9).

A read-only repository is refused by ``relay run`` and ``relay audit`` before any change
(:func:`check_repository`); an output path that cannot be written (``relay run --junit``,
``relay compare --out``) is refused before the run, not after it (:func:`check_output`). The
checks look, they do not write: what can still fail at the end (a full disk) is the caller's
to report, its results kept.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from relay.errors import ConfigError, RepoStateError

if TYPE_CHECKING:
    from relay.config import Config
    from relay.gitrepo import GitRepo

__all__ = ["check_output", "check_repository", "unwritable"]


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _read_only_fs(path: Path) -> bool:
    """Whether ``path`` (which exists) lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def unwritable(path: Path, *, folder: bool) -> str | None:
    """Why relay could not write ``path``, in words; None when it can, as far as can be seen
    without writing (a full disk shows only when writing).

    Args:
        path: a file to write (``folder`` False) or a folder to write files into (True); it
            and its parents may not exist yet (they would be created).
    """
    path = Path(os.path.abspath(path.expanduser()))
    found = _existing(path)
    if found == path and path.is_dir() != folder:
        return "it is a folder" if path.is_dir() else "it is a file, not a folder"
    if found != path and not found.is_dir():
        return f"{found} is a file, not a folder"
    if _read_only_fs(found):
        return f"{found} is on a read-only file system"
    need = os.W_OK | (os.X_OK if found.is_dir() else 0)
    if not os.access(found, need):
        return f"no permission to write {found}"
    return None


def check_output(path: Path, flag: str) -> None:
    """Refuse the output path of ``flag`` (``--junit``, a file; ``--out``, a folder) when it
    cannot be written, before anything runs.

    Raises:
        ConfigError: naming the flag, the path and why (exit code 1).
    """
    why = unwritable(path, folder=flag == "--out")
    if why is not None:
        raise ConfigError(
            f"{flag} {path}: cannot be written ({why}); give a path relay can write to"
        )


def check_repository(git: GitRepo, config: Config, command: str) -> None:
    """Refuse a repository relay cannot write (a read-only mount or checkout) before any
    change: ``relay run`` commits to its working tree and git folder, and ``relay run`` and
    ``relay audit`` keep their state in the state folder of ``config``
    (:func:`relay.statedir.state_dir`; SPEC §11).

    Args:
        command: the command refused, in the message (``run``, ``audit``, ``compare``).

    Raises:
        RepoStateError: naming the repository, what is read-only and why (exit code 1).
    """
    from relay.statedir import state_dir

    state = state_dir(git, config)
    for place in (git.root, git.git_dir, state):
        why = unwritable(place, folder=True)
        if why is not None:
            raise RepoStateError(
                f"the repository {git.root} is read-only for relay ({why}): relay {command} "
                f"writes its state in {state}"
                + (" and commits to the repository" if command != "audit" else "")
                + "; make it writable, or work in a writable clone"
            )
