"""Goal files (SPEC §12 ``--goal-file``): optional YAML front matter, then the goal text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from relay.errors import ConfigError

__all__ = ["parse_goal_file"]


def parse_goal_file(path: Path) -> tuple[str, dict[str, Any]]:
    """Read a goal file: optional YAML front matter between ``---`` lines, then the goal text.

    Returns ``(goal_text, front_matter)``. Raises ``ConfigError`` when the file is unreadable,
    the front matter is not a YAML mapping, or the goal text is empty.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the goal file {path}: {exc}") from None
    front: dict[str, Any] = {}
    lines = text.splitlines(keepends=True)
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in {"---", "..."}), None)
        if end is None:
            raise ConfigError(f"{path}: the front matter starts with --- but never ends")
        try:
            loaded = yaml.safe_load("".join(lines[1:end]))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: the front matter is not valid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the front matter must be a mapping of configuration keys")
        front = loaded or {}
        text = "".join(lines[end + 1 :])
    if not text.strip():
        raise ConfigError(f"{path}: the goal text (after the front matter) is empty")
    return text.strip() + "\n", front
