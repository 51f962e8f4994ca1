"""The goal's row in the store is relay's, not the model's (SPEC §10, §14).

With the sandbox the store is out of the model's reach. Without it, a model's shell command can
rewrite the SQLite file directly (``update goals set status='complete'``, other deliverables,
higher limits, zero usage). Two mechanisms make such a change harmless:

* **within a run**, :class:`GoalSeal` holds what the loop itself last wrote to the guarded fields
  (it is the authority: decisions use its values). At every step boundary and at every round's
  end the loop compares the row with the seal; a difference is restored and recorded as
  ``tamper``. A status changed from outside counts only when it is one a user command sets
  (``paused``, ``cleared``); any other is tamper;
* **across runs**, :func:`branch_findings` compares the row with the goal state relay committed
  and sealed on the goal's branch with its last round (``.relay/goal.json``; only a state
  whose seal verifies is used, :mod:`relay.branch_trust`): the frozen goal (text,
  deliverables, limits, the settings it was started with) and a status the model could have
  forged after relay's last commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from relay.config import MACHINE_SETTINGS, without_machine_settings
from relay.store import GoalRecord
from relay.store.records import GOAL_COUNTERS, GOAL_USAGE

__all__ = [
    "FROZEN_FIELDS",
    "GUARDED_FIELDS",
    "USER_STATUSES",
    "GoalSeal",
    "branch_findings",
    "foreign_status",
]

FROZEN_FIELDS = (
    "text",
    "base_commit",
    "deliverables",
    "limits",
    "overrides",
    "mode",
    "worker",
)
"""Fields fixed when the goal is created: no run changes them."""

GUARDED_FIELDS = (
    *FROZEN_FIELDS,
    "branch",
    *GOAL_COUNTERS,
    *GOAL_USAGE,
    "risk_score",
    "failure_streak",
)
"""Fields only the running loop writes while a goal is active."""

USER_STATUSES = frozenset({"paused", "cleared"})
"""Statuses another relay process (``relay pause``, ``relay clear``) may set on a running goal."""

_FLOAT_TOLERANCE = 1e-6


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= _FLOAT_TOLERANCE * max(1.0, abs(float(b)))
        except (TypeError, ValueError):
            return False
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@dataclass
class GoalSeal:
    """The guarded fields of one goal as the running loop last wrote them.

    Build it with :meth:`of` from the row the run started with; call :meth:`wrote` after every
    write of the loop and :meth:`added_usage` after every usage addition; :meth:`check` finds
    what someone else changed.
    """

    expected: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, goal: GoalRecord) -> GoalSeal:
        """The seal of ``goal`` as read at the start of a run."""
        return cls({name: getattr(goal, name) for name in GUARDED_FIELDS})

    def wrote(self, fields: Mapping[str, Any]) -> None:
        """Record the loop's own write of ``fields`` (others are ignored)."""
        for name, value in fields.items():
            if name in self.expected:
                self.expected[name] = value

    def added_usage(self, usage: Mapping[str, int], cost_usd: float) -> None:
        """Record the loop's own ``Store.add_usage`` (token keys of :class:`relay.models.Usage`)."""
        for name in ("uncached_input", "cache_write", "cached_input", "output"):
            self.expected[name] = int(self.expected.get(name) or 0) + int(usage.get(name, 0))
        self.expected["cost_usd"] = float(self.expected.get("cost_usd") or 0.0) + cost_usd

    def check(self, goal: GoalRecord) -> tuple[dict[str, Any], list[str]]:
        """Compare the row with the seal.

        Returns:
            ``(restore, findings)``: the fields to write back (the seal's values) and one
            human-readable line per changed field, e.g. ``"limits changed in the store behind
            relay's back (found {...}); restored"``. Both empty when nothing changed.
        """
        restore: dict[str, Any] = {}
        findings: list[str] = []
        for name, value in self.expected.items():
            found = getattr(goal, name)
            if _same(found, value):
                continue
            restore[name] = value
            shown = json.dumps(found, sort_keys=True, default=str)
            shown = shown if len(shown) <= 120 else shown[:119] + "…"
            findings.append(
                f"the goal's {name} was changed in relay's store behind its back "
                f"(found {shown}); restored"
            )
        return restore, findings


def foreign_status(status: str) -> bool:
    """True when a running goal's status was set by something that is not a user command."""
    return status not in USER_STATUSES and status != "active"


def branch_findings(goal: GoalRecord, committed: Mapping[str, Any]) -> tuple[dict, list[str]]:
    """Compare a goal's row with the goal state relay committed on its branch.

    Args:
        goal: the row of the store.
        committed: the ``goal`` object of ``.relay/goal.json`` relay sealed on the branch
            (same id; :func:`relay.branch_trust.relays_state`).

    Returns:
        ``(restore, findings)`` as :meth:`GoalSeal.check`: frozen fields that differ, and a
        final status in the store that differs from the final status relay committed with the
        goal's last round (a row still ``active`` is a crash after that commit, and a row
        ``paused``/``cleared`` is the user's word: both are left alone).
    """
    restore: dict[str, Any] = {}
    findings: list[str] = []
    for name in FROZEN_FIELDS:
        mine = getattr(goal, name)
        if name == "overrides":  # the branch never carries this machine's settings
            mine = without_machine_settings(mine)
        if name in committed and not _same(mine, committed[name]):
            restore[name] = committed[name]
            if name == "overrides":
                restore[name] = {**committed[name], **_machine_part(goal.overrides)}
            findings.append(
                f"the goal's {name} in relay's store differs from the goal state relay sealed "
                f"on the branch; relay's sealed one is used"
            )
    status = committed.get("status")
    if (
        isinstance(status, str)
        and status != "active"
        and goal.status != status
        and goal.status not in USER_STATUSES
        and goal.status != "active"  # a crash after the last commit: `relay resume` goes on
    ):
        restore.update(status=status, reason=committed.get("reason"))
        findings.append(
            f"the goal's status in relay's store is {goal.status}, but relay ended it as "
            f"{status} in the goal state it sealed on the branch; the sealed status is used"
        )
    return restore, findings


def _machine_part(overrides: dict[str, Any]) -> dict[str, Any]:
    """The :data:`relay.config.MACHINE_SETTINGS` of a goal's start settings."""
    return {k: v for k, v in overrides.items() if k in MACHINE_SETTINGS}
