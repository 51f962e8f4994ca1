"""Path confinement of the file tools (SPEC §5).

A path the model gives is relative to the repository root (an absolute path is accepted only if
it lies inside the repository). It is resolved with every symlink followed, including a dangling
final symlink, and refused when the result lies outside the repository, inside a ``.git``
folder, inside relay's state directory, or - for writes - on a protected path.
"""

from __future__ import annotations

import os
from pathlib import Path

from relay.fsread import fixed_real_path, real_path
from relay.globs import first_match, parse_globs
from relay.tools.base import ToolContext


class PathRefused(Exception):
    """A path the file tools will not touch. ``message`` is shown to the model as is."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _real(path: Path | str) -> Path:
    """``path`` with every existing symlink resolved and ``..`` applied (no existence needed)."""
    return Path(real_path(path))


def _inside(path: str, root: str) -> bool:
    """Whether the normalised absolute path ``path`` is ``root`` or lies below it (both as
    strings: a path's ``parents`` cost more than the tool's file I/O)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _parts(path: str, root: str) -> list[str]:
    """The components of ``path`` below ``root`` (``path`` inside ``root``, see :func:`_inside`)."""
    return [part for part in path[len(root) :].split("/") if part]


def protected_entry(ctx: ToolContext, rel_posix: str) -> str | None:
    """The entry of ``ctx.protected_paths`` that protects ``rel_posix``, or ``None``.

    Args:
        ctx: the tool context (its ``protected_paths`` and ``repo_root`` are used).
        rel_posix: a repo-relative POSIX path such as ``"src/app.py"``.

    Entries are matched by :mod:`relay.globs`: a plain path protects itself and everything
    below it (``"tests"``, ``"tests/"``); a glob follows gitignore's rules (``"tests/**"``,
    ``"*.lock"`` at any depth, ``"src/*.py"`` not ``"src/sub/x.py"``).
    """
    if not ctx.protected_paths:
        return None
    return first_match(rel_posix, ctx.protected_paths, _real(ctx.repo_root))


def relative_posix(ctx: ToolContext, resolved: Path) -> str:
    """The repo-relative POSIX form of a path that :func:`resolve_path` returned (``"."`` for
    the root itself)."""
    root, path = fixed_real_path(ctx.repo_root), str(resolved)
    if not _inside(path, root):
        raise ValueError(f"{path} is not inside the repository {root}")
    return "/".join(_parts(path, root)) or "."


def resolve_path(ctx: ToolContext, path: str, *, for_write: bool) -> Path:
    """Resolve a path the model gave and check that the tool may use it.

    Args:
        ctx: the tool context (repository root, state directory, protected paths).
        path: the model's path, relative to the repository root, or absolute inside it.
        for_write: true for ``write_file``/``edit_file``: protected paths are refused too.
            Reads of protected paths are allowed.

    Returns:
        The absolute path with all symlinks resolved (the file may not exist yet).

    Raises:
        PathRefused: the path is empty, contains a NUL byte, or resolves (symlinks included)
            outside the repository, into a ``.git`` folder, into the state directory, or - when
            writing - onto a protected path. The message names the path and the reason.
    """
    return Path(_resolved(ctx, path, fixed_real_path(ctx.repo_root), for_write=for_write))


def resolve_shown(ctx: ToolContext, path: str, *, for_write: bool) -> tuple[Path, str]:
    """:func:`resolve_path` and the :func:`relative_posix` form of its answer, the root's
    real path looked up once."""
    root = fixed_real_path(ctx.repo_root)
    resolved = _resolved(ctx, path, root, for_write=for_write)
    return Path(resolved), "/".join(_parts(resolved, root)) or "."


def _resolved(ctx: ToolContext, path: str, root: str, *, for_write: bool) -> str:
    """:func:`resolve_path` with ``root`` the real path of the repository root."""
    if not isinstance(path, str) or not path.strip():
        raise PathRefused("path is empty; give a path relative to the repository root")
    if "\x00" in path:
        raise PathRefused(f"path {path!r} contains a NUL byte")
    candidate = os.path.join(root, path)  # an absolute path stays as given
    lexical = os.path.normpath(candidate)
    resolved = real_path(candidate)

    if not _inside(resolved, root):
        via = "" if resolved == lexical else " through a symlink"
        raise PathRefused(
            f"path {path!r} resolves{via} outside the repository ({resolved}); "
            "file tools only work inside the repository root"
        )
    lexical_inside = _inside(lexical, root)
    for parts in (_parts(resolved, root), _parts(lexical, root) if lexical_inside else ()):
        if any(part.lower() == ".git" for part in parts):
            raise PathRefused(
                f"path {path!r} is inside .git/; git internals cannot be read or written with "
                "file tools (use git commands in shell)"
            )
    state = fixed_real_path(ctx.state_dir)
    if _inside(resolved, state) or _inside(lexical, state):
        raise PathRefused(
            f"path {path!r} is inside relay's state directory, which the tools may not access"
        )
    if for_write and ctx.protected_paths:
        globs = parse_globs(ctx.protected_paths, root)
        rel = "/".join(_parts(resolved, root)) or "."
        lexical_rel = ("/".join(_parts(lexical, root)) or ".") if lexical_inside else None
        for candidate_rel in {rel, lexical_rel}:
            if candidate_rel is None:
                continue
            entry = next((g.entry for g in globs if g.matches(candidate_rel)), None)
            if entry is not None:
                raise PathRefused(
                    f"path {path!r} is protected (matches {entry!r}) and cannot be written; "
                    "reading it is allowed"
                )
    return resolved
