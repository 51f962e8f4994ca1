"""What the store hands out: goal records, round tallies, and the decoding of JSON columns."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from relay.models.base import Usage

GOAL_COUNTERS = (
    "rounds",
    "counted_rounds",
    "no_progress_streak",
    "blocked_reports",
    "auto_replies",
)
GOAL_USAGE = ("uncached_input", "cache_write", "cached_input", "output", "cost_usd")
"""The goal's token usage (SPEC §7.4) and its cost in USD."""
GOAL_MUTABLE = frozenset(
    {
        "status",
        "reason",
        "message",
        "question",
        "branch",
        "sandbox",
        *GOAL_COUNTERS,
        *GOAL_USAGE,
        "elapsed_s",
        "progress_text",
        "diagnosis",
        "risk_score",
        "failure_streak",
        "goal_file_digest",
        "model_calls",
    }
)
"""Goal columns that change while a goal runs (the others are frozen at creation)."""


@dataclass
class GoalRecord:
    """One row of ``goals``; ``deliverables`` and ``limits`` are decoded JSON (frozen at creation)."""

    id: str
    text: str
    goal_file: str | None
    branch: str | None
    base_commit: str
    mode: str
    model: str
    deliverables: list[dict[str, Any]]
    limits: dict[str, Any]
    status: str
    reason: str | None
    message: str | None
    question: str | None
    rounds: int
    counted_rounds: int
    no_progress_streak: int
    blocked_reports: int
    auto_replies: int
    uncached_input: int
    cache_write: int
    cached_input: int
    output: int
    cost_usd: float
    elapsed_s: float
    progress_text: str | None
    diagnosis: str | None
    risk_score: float
    failure_streak: int
    model_calls: int
    overrides: dict[str, Any]
    goal_file_digest: str | None
    created_at: float
    updated_at: float
    sandbox: str = "off"
    """The sandbox in force in the goal's latest run: ``bwrap`` or ``off`` (SPEC §14)."""
    worker: str = "builtin"
    """Who does the rounds' work: ``builtin``, ``claude-code`` or ``codex`` (SPEC §15)."""
    supplements: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Tally:
    """A run of finished rounds summed up: how many, the first and last number (0 when there
    are none) and their tool calls. The progress file folds old rounds into one such line, and
    a goal state carries one for the rounds it leaves out (SPEC §6)."""

    count: int = 0
    first: int = 0
    last: int = 0
    tool_calls: int = 0

    def __add__(self, other: Tally) -> Tally:
        if not other.count:
            return self
        if not self.count:
            return other
        return Tally(
            self.count + other.count,
            min(self.first, other.first),
            max(self.last, other.last),
            self.tool_calls + other.tool_calls,
        )

    def to_dict(self) -> dict[str, int]:
        """``{count, first, last, tool_calls}`` (the goal state's ``earlier_rounds``)."""
        return {
            "count": self.count,
            "first": self.first,
            "last": self.last,
            "tool_calls": self.tool_calls,
        }


@dataclass(frozen=True)
class Round:
    """One round's record (SPEC §4, §10): the one type every reader of rounds shares — the
    progress file, the goal state on the branch, reports, the guard's loop window, recovery.

    Times are UNIX seconds (``ended_at`` None while the round runs or after it was
    interrupted); ``files_changed`` are repository-relative paths; ``commit_sha`` is the
    round's commit (None until it is made); ``handoff`` the note for the next round, written
    by the model or, when ``handoff_auto``, by relay; ``end_reason`` why the round ended;
    ``model_calls`` the goal's model calls when the round started (None in records imported
    from a goal state); ``claim`` the ``update_goal`` arguments of a ``complete`` claim kept
    until an audit answers it (:meth:`relay.store.Store.add_claim`). ``usage`` is the sum of the round's steps' usage where a reader added
    it (the report, from :meth:`relay.store.Store.usage_by_round`); the store leaves it zero.
    """

    n: int
    started_at: float | None = None
    ended_at: float | None = None
    steps: int = 0
    tool_calls: int = 0
    real_tool_calls: int = 0
    files_changed: tuple[str, ...] = ()
    commit_sha: str | None = None
    handoff: str | None = None
    handoff_auto: bool = False
    end_reason: str | None = None
    run_id: str | None = None
    model_calls: int | None = None
    claim: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files_changed", tuple(self.files_changed))
        object.__setattr__(self, "handoff_auto", bool(self.handoff_auto))

    @property
    def finished(self) -> bool:
        """Whether the round ended (an interrupted round's record has no end)."""
        return self.ended_at is not None


ROUND_COLUMNS = tuple(f.name for f in fields(Round) if f.name != "usage")
"""The columns of ``rounds`` a :class:`Round` holds (``claim`` stays in the store)."""


def round_from_row(row: Any) -> Round:
    """A :class:`Round` from a ``rounds`` row (``sqlite3.Row``); an unreadable
    ``files_changed`` (something outside relay wrote it) reads as none (SPEC §14)."""
    values = {name: row[name] for name in ROUND_COLUMNS}
    values["files_changed"] = [
        f for f in decoded(values["files_changed"], []) if isinstance(f, str)
    ]
    values["claim"] = _claim(values["claim"])
    return Round(**values)


def _claim(text: Any) -> dict[str, Any] | None:
    """A claim column decoded; None when empty or not a JSON object."""
    try:
        claim = json.loads(text) if text else None
    except (TypeError, ValueError, RecursionError):
        return None
    return claim if isinstance(claim, dict) else None


def decoded(text: Any, default: list[Any]) -> list[Any]:
    """A JSON list column; ``default`` when something outside relay wrote garbage there (the
    row stays readable: no traceback from a tampered store, SPEC §14)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return default
    return value if isinstance(value, list) else default


def decoded_rows(rows: Any, column: str) -> list[dict[str, Any]]:
    """``rows`` (``sqlite3.Row``) as dicts, with the JSON list in ``column`` decoded
    (:func:`decoded`; an empty list when unreadable)."""
    out = []
    for r in rows:
        d = dict(r)
        d[column] = decoded(d[column], [])
        out.append(d)
    return out


def new_id() -> str:
    """A short random id (12 hex characters) for goals and runs."""
    return uuid.uuid4().hex[:12]
