"""The repository paths the model must not change (SPEC §5, §9 step 4, §14).

One set serves the goal's run and ``relay audit``: the file tools refuse to write these paths,
the sandbox mounts them read-only, a shell command's change to them is undone, and the audit
fails a goal whose change touches them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from relay.baseline import relay_owned

if TYPE_CHECKING:
    from relay.config import Config

__all__ = ["goal_state_path", "protected_paths", "rel_inside"]


def rel_inside(root: Path, path: Path | None) -> str | None:
    """``path`` relative to ``root`` (POSIX), or None when it is outside or None."""
    if path is None:
        return None
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def goal_state_path(config: Config) -> str:
    """Repo-relative path of the committed goal state (``goal.json`` beside the progress
    file)."""
    return relay_owned(Path(config.progress.path).as_posix())[1]


def protected_paths(
    root: Path,
    config: Config,
    *,
    files: Iterable[Path | None] = (),
    goal_file: str | None = None,
) -> tuple[str, ...]:
    """The protected entries of a goal, in order and without repeats (SPEC §5, §14).

    They are relay's own files (the progress file and the goal state beside it), ``relay.yaml``,
    the configuration and goal files in ``files`` that lie inside the repository, the goal's
    own goal file and ``tools.protected_paths`` (paths or globs).

    Args:
        root: the repository root (absolute, resolved).
        config: the goal's configuration (``progress.path``, ``tools.protected_paths``).
        files: absolute or cwd-relative paths (``--config``, ``--goal-file``; None skipped);
            those outside the repository are left out.
        goal_file: the goal's goal file as stored (repo-relative), if any.
    """
    entries = [*relay_owned(Path(config.progress.path).as_posix()), "relay.yaml"]
    entries += [rel for rel in (rel_inside(root, f) for f in files) if rel]
    if goal_file:
        entries.append(goal_file)
    entries += config.tools.protected_paths
    return tuple(dict.fromkeys(entries))
