"""The rules of the path settings of ``relay.yaml`` (issue 13; SPEC §6, §10, §11, §14).

They run while the configuration is validated (:func:`relay.config.load_config`), before
relay changes anything; each raises ``ValueError`` with what is allowed, which validation turns
into a ``ConfigError`` naming the key and the value.

* Every path setting (``progress.path``, ``state_dir``, ``prompts_dir``, deliverable ``file``
  and ``changed``, ``tools.protected_paths``, ``sandbox.writable_paths``/``hidden_paths``) is
  valid text without NUL, at most :data:`NAME_MAX` bytes per component and :data:`PATH_MAX` in
  all (longer ones fail in the file system with ENAMETOOLONG, possibly late in a run).
* ``progress.path`` names a file inside the working tree, relative to the repository root: not
  absolute, no ``~``, no ``..``, not a folder (``.``, ``docs/``, or an existing folder, which
  relay would delete to write its file there), not below a file, not in git's folder ``.git``,
  not named ``goal.json`` (the goal state's name, written beside it), and none of relay's
  reserved paths (:data:`RESERVED`). Its plain form is kept (``./notes//p.md`` is
  ``notes/p.md``).
* ``state_dir``. SPEC §10 and §14 allow the state inside the working tree (§10's default was
  ``.relay/state/``, excluded from git; the sandbox hides it, and without the sandbox the
  README says it is within the agent's reach); today's default is ``.git/relay``, and an
  absolute path may put it anywhere. So: a relative ``state_dir`` is a folder inside the
  repository (no ``..``: an absolute path is how to put it outside); it is never the
  repository root nor a folder that contains the repository (``..``, ``/``, the home folder:
  relay would write its store beside the user's projects and the sandbox would hide the whole
  tree; relay's own worktrees in its ``compare/`` and ``batch/`` folders aside); never in git's
  folder except ``.git/relay`` (the default's place; ``.git/refs`` would become refs); never a
  file or below one (``~user`` must name a user); and it never holds the progress file or the
  goal state (git ignores the state folder and the sandbox hides it, so relay's committed files
  cannot live in it), nor lies inside them.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

__all__ = [
    "NAME_MAX",
    "PATH_MAX",
    "RESERVED",
    "check_path_text",
    "check_progress_on_disk",
    "check_state_on_disk",
    "plain_progress_path",
    "plain_state_dir",
    "state_overlap",
]

NAME_MAX = 255
"""Bytes of one path component (file or folder name) the file systems of Linux allow."""
PATH_MAX = 4095
"""Bytes of a whole path (Linux' PATH_MAX less the final NUL)."""
GOAL_STATE_NAME = "goal.json"
"""The goal state's file name, beside the progress file (:mod:`relay.own_files`)."""
RESERVED: dict[str, str] = {
    ".relay": "the folder of relay's own files",
    ".relay/state": "where an older relay kept its state, moved once by relay",
    ".relay/inbox": "where an older relay read the inbox",
    "relay.yaml": "relay's configuration",
}
"""Repo-relative paths the progress file must not be or lie in (the folder entries include
everything inside them, except ``.relay`` itself, whose files are relay's own)."""
WORKTREES = ("compare", "batch")
"""Folders of the state folder where ``relay compare`` and ``relay batch`` make their linked
worktrees: a state folder may contain a repository in them (an absolute ``state_dir`` read in
such a worktree)."""
_EXAMPLE = "such as .relay/progress.md"


def check_path_text(value: str) -> str:
    """Checks common to every path setting. Returns ``value``.

    Raises ``ValueError``: empty, a NUL character, a component over :data:`NAME_MAX` bytes or
    the whole over :data:`PATH_MAX` bytes (UTF-8)."""
    if not value.strip():
        raise ValueError("expected a path, not empty text")
    if "\x00" in value:
        raise ValueError("a path cannot contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a path must be valid text (this one holds a lone surrogate)") from None
    longest = max(len(part.encode("utf-8")) for part in value.split("/"))
    if longest > NAME_MAX:
        raise ValueError(f"a file or folder name has at most {NAME_MAX} bytes ({longest} here)")
    if len(value.encode("utf-8")) > PATH_MAX:
        raise ValueError(f"a path has at most {PATH_MAX} bytes")
    return value


def plain_progress_path(value: str) -> str:
    """``progress.path`` in its plain repo-relative POSIX form (``./a//b.md`` → ``a/b.md``).

    Raises ``ValueError`` for a path that breaks the rules of the module docstring that need no
    file system."""
    if not value.strip() or value.startswith(("/", "~")):
        raise ValueError(
            f"expected a file path relative to the repository root (not absolute, no ~), {_EXAMPLE}"
        )
    check_path_text(value)
    parts = PurePosixPath(value).parts
    if ".." in parts:
        raise ValueError(f"the progress file stays inside the repository: no .. ({_EXAMPLE})")
    if value.endswith("/") or not parts:
        raise ValueError(f"expected the path of a file, not a folder ({_EXAMPLE})")
    plain = PurePosixPath(*parts).as_posix()
    if parts[0] == ".git":
        raise ValueError(f"{plain} is in git's own folder .git; give a path in the working tree")
    if parts[-1] == GOAL_STATE_NAME:
        raise ValueError(f"{GOAL_STATE_NAME} is the name of the goal state relay writes beside it")
    for reserved, what in RESERVED.items():
        if plain == reserved or (reserved != ".relay" and plain.startswith(reserved + "/")):
            raise ValueError(f"{reserved} is reserved ({what}); give another path, {_EXAMPLE}")
    return plain


def check_progress_on_disk(root: Path, plain: str) -> None:
    """What the working tree ``root`` must not hold for the progress file ``plain`` (from
    :func:`plain_progress_path`): a folder at its place or at its goal state's place (relay
    writes its files as new files and would delete that folder), a file at a folder above it.
    Symbolic links are not refused: relay replaces them when it writes (SPEC §14).

    Raises ``ValueError`` naming the path in the way."""
    target = root / plain
    for parent in reversed(target.parents):
        if parent == root or not parent.is_relative_to(root):
            continue
        kind = _kind(parent)
        if kind == "file":
            raise ValueError(f"{_rel(root, parent)} is a file, not a folder")
        if kind != "folder":
            return  # nothing below a symbolic link or an absent folder is looked at
    for place, what in ((target, ""), (target.parent / GOAL_STATE_NAME, "its goal state file ")):
        if _kind(place) == "folder":
            raise ValueError(
                f"{what}{_rel(root, place)} is a folder in the repository, and relay writes the "
                "progress file and the goal state beside it as new files in their place (the "
                "folder would be deleted): give another path"
            )


def plain_state_dir(value: str) -> str:
    """``state_dir`` as given, after the rules that need no file system. Raises ``ValueError``."""
    if not value.strip() or "\x00" in value:
        raise ValueError("expected a folder path, or null for the default (.git/relay)")
    check_path_text(value)
    if value.startswith("~") and os.path.expanduser(value) == value:
        raise ValueError(f"{value.split('/')[0]} is no user's home folder here")
    path = Path(value).expanduser()
    if path.is_absolute():
        return value
    parts = Path(os.path.normpath(path)).parts
    if parts == (".",):
        raise ValueError("the repository root itself cannot be relay's state folder")
    if all(part == ".." for part in parts):
        raise ValueError(
            "this folder contains the repository; give a relative folder inside it, or an "
            "absolute path outside it"
        )
    if ".." in path.parts:
        raise ValueError(
            "a relative state_dir is a folder inside the repository: no .. (give an absolute "
            "path for a folder outside it)"
        )
    if parts[0] == ".git" and parts[1:2] != ("relay",):
        raise ValueError(
            "this is in git's own folder .git, where only .git/relay (the default) is relay's; "
            "leave state_dir unset for the default"
        )
    return value


def check_state_on_disk(root: Path, value: str) -> None:
    """Where the state folder ``value`` (checked by :func:`plain_state_dir`) lies from the
    repository root ``root``: not the root, no folder containing it (but the :data:`WORKTREES`
    of its own), not in ``.git`` except ``.git/relay``, not a file or below a file.
    Raises ``ValueError``."""
    state = _state_path(root, value)
    top = root.resolve()
    if state == top:
        raise ValueError("the repository root itself cannot be relay's state folder")
    if top.is_relative_to(state) and not any(top.is_relative_to(state / f) for f in WORKTREES):
        raise ValueError(
            f"this folder contains the repository {top}; give a relative folder inside it, or "
            "an absolute path outside it"
        )
    git_dir = top / ".git"
    if state.is_relative_to(git_dir) and not state.is_relative_to(git_dir / "relay"):
        raise ValueError(
            "this is in git's own folder .git, where only .git/relay (the default) is relay's; "
            "leave state_dir unset for the default"
        )
    for place in (state, *state.parents):
        kind = _kind(place)
        if kind == "file":
            raise ValueError(f"{place} is a file, not a folder")
        if kind == "folder":
            return


def state_overlap(root: Path | None, value: str, progress: str) -> str | None:
    """Why the state folder ``value`` and the progress file ``progress`` (plain, from
    :func:`plain_progress_path`) cannot go together, or None. With ``root`` None only a
    relative ``value`` can be compared."""
    if root is not None:
        try:
            state = _state_path(root, value).relative_to(root.resolve()).as_posix()
        except ValueError:
            return None  # outside the tree: nothing of the tree is in it
    elif Path(value).expanduser().is_absolute():
        return None
    else:
        state = PurePosixPath(os.path.normpath(value)).as_posix()
    own = (progress, (PurePosixPath(progress).parent / GOAL_STATE_NAME).as_posix())
    for file in own:
        if file == state or file.startswith(state + "/"):
            return (
                f"the progress file's place (progress.path = {progress!r}, and its goal state "
                f"{own[1]}) is inside this folder, which git ignores and the sandbox hides; "
                "give them different places"
            )
        if state.startswith(file + "/"):
            return f"this folder is inside relay's own file {file} (progress.path = {progress!r})"
    return None


def _state_path(root: Path, value: str) -> Path:
    """The absolute, resolved state folder of ``value`` for the repository root ``root``."""
    path = Path(value).expanduser()
    return (path if path.is_absolute() else root / path).resolve()


def _kind(path: Path) -> str | None:
    """``folder``, ``file`` (anything else that exists, not a symbolic link), ``link`` or None
    (absent, or unknown because it cannot be looked at)."""
    try:
        if path.is_symlink():
            return "link"
        if not path.exists():
            return None
        return "folder" if path.is_dir() else "file"
    except (OSError, ValueError):
        return None


def _rel(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` (POSIX) for messages."""
    return path.relative_to(root).as_posix()
