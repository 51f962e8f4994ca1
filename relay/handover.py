"""Former name of :mod:`relay.goal_state` (kept while ``relay.loop`` and ``relay.runner`` move
over to the new name)."""

from relay.goal_state import FORMAT, HANDOFF_CHARS, dumps, goal_state, import_goal, loads

__all__ = ["FORMAT", "HANDOFF_CHARS", "dumps", "goal_state", "import_goal", "loads"]
