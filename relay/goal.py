"""Goal statuses, who may set them, and the exit code each one maps to (SPEC §7.1, §10, §12)."""

from __future__ import annotations

from enum import StrEnum


class GoalStatus(StrEnum):
    """Every status a goal can have."""

    ACTIVE = "active"
    COMPLETE = "complete"
    NEEDS_USER_INPUT = "needs_user_input"
    BLOCKED = "blocked"
    LIMIT_REACHED = "limit_reached"
    BUDGET_LIMITED = "budget_limited"
    TERMINATED = "terminated"
    FAILED = "failed"
    PAUSED = "paused"
    CLEARED = "cleared"


MODEL_STATUSES = frozenset({GoalStatus.COMPLETE, GoalStatus.NEEDS_USER_INPUT, GoalStatus.BLOCKED})
"""The only statuses the model may ask for through ``update_goal`` (SPEC §7.1)."""

RESUMABLE_STATUSES = frozenset(
    {
        GoalStatus.ACTIVE,
        GoalStatus.PAUSED,
        GoalStatus.NEEDS_USER_INPUT,
        GoalStatus.BLOCKED,
        GoalStatus.LIMIT_REACHED,
        GoalStatus.BUDGET_LIMITED,
        GoalStatus.FAILED,
        GoalStatus.TERMINATED,
    }
)
"""Statuses that ``relay resume`` (or ``relay run`` without a goal) continues (SPEC §10)."""

CLOSED_STATUSES = frozenset({GoalStatus.COMPLETE, GoalStatus.CLEARED})
"""A goal in one of these is no longer open: a new goal may start on the branch (SPEC §12)."""

EXIT_CODES: dict[GoalStatus, int] = {
    GoalStatus.COMPLETE: 0,
    GoalStatus.NEEDS_USER_INPUT: 2,
    GoalStatus.BLOCKED: 3,
    GoalStatus.LIMIT_REACHED: 4,
    GoalStatus.BUDGET_LIMITED: 5,
    GoalStatus.TERMINATED: 6,
    GoalStatus.FAILED: 7,
    GoalStatus.PAUSED: 130,
    GoalStatus.CLEARED: 130,
    GoalStatus.ACTIVE: 1,
}
"""Process exit code for the status a run ends with (SPEC §12). SIGTERM pauses exit 143; a run
whose goal ``relay clear`` dropped while it ran was stopped by the user, like a pause (130)."""


def exit_code_for(status: GoalStatus | str) -> int:
    """Return the exit code of SPEC §12 for ``status``."""
    return EXIT_CODES[GoalStatus(status)]
