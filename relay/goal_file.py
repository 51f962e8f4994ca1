"""Goal files (SPEC §12 ``--goal-file``): optional YAML front matter, then the goal text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relay.config import MACHINE_SETTINGS, load_yaml
from relay.errors import ConfigError

__all__ = ["parse_goal_file"]


def parse_goal_file(path: Path) -> tuple[str, dict[str, Any]]:
    """Read a goal file: optional YAML front matter between ``---`` lines, then the goal text.
    A UTF-8 byte order mark before the first ``---`` (editors on Windows write one) is not
    part of the file's text.

    Returns ``(goal_text, front_matter)``. Raises ``ConfigError`` when the file is unreadable
    or not UTF-8, the front matter never ends, is not YAML, is nested too deeply to read, is
    not a mapping or sets one of :data:`relay.config.MACHINE_SETTINGS` (``sandbox``,
    ``base_url``), or the goal text is empty.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the goal file {path}: {exc}") from None
    front: dict[str, Any] = {}
    lines = text.splitlines(keepends=True)
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in {"---", "..."}), None)
        if end is None:
            raise ConfigError(f"{path}: the front matter starts with --- but never ends")
        # a blank line for the opening ---: the lines messages name are the file's
        loaded = load_yaml("\n" + "".join(lines[1:end]), f"{path}: the front matter")
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the front matter must be a mapping of configuration keys")
        front = loaded or {}
        text = "".join(lines[end + 1 :])
    machine = [key for key in MACHINE_SETTINGS if key in front]
    if machine:  # a goal file may come with the branch, from whoever can push it (SPEC §14)
        raise ConfigError(
            f"{path}: the front matter sets {', '.join(machine)}, a setting of the machine a "
            "run runs on, not of a goal: set it in relay.yaml, --config, a RELAY_* variable "
            "or a flag"
        )
    if not text.strip():
        raise ConfigError(f"{path}: the goal text (after the front matter) is empty")
    return text.strip() + "\n", front
