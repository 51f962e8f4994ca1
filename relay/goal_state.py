"""The goal state on its branch: ``.relay/goal.json`` beside the progress file (SPEC §6, §11).

Committed with every round, it lets a later job on a fresh machine — a CI runner without the
state database — continue the goal from the branch alone: goal text, supplements, frozen
deliverables and limits, counters, usage, the latest audit, and the rounds the progress file
shows (the newest ``progress.keep_rounds`` + :data:`relay.progress.OLDER_ROUNDS_SHOWN`) with a
tally of the earlier ones. Its size does not grow with the number of rounds, so every round
commits the same few objects (issue 12). The progress file is the human-readable handoff; this
file is its machine-readable twin. relay seals it, and trusts it only with its seal
(:mod:`relay.branch_trust`).

A goal state written before the file became bounded lists every round; it still imports.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from relay.config import Deliverable, Limits, ProgressConfig, without_machine_settings
from relay.config_paths import check_path_text
from relay.errors import StoreError
from relay.goal import GoalStatus
from relay.progress import shown_rounds
from relay.store import GoalRecord, Round, Store, Tally
from relay.store.records import GOAL_COUNTERS, GOAL_USAGE

FORMAT = 1
"""Version of the file's layout; a newer one is refused rather than misread."""

HANDOFF_CHARS = 2000
"""Characters of each round's handoff note kept in the file (the progress file shows them)."""

KEEP_ROUNDS = ProgressConfig().keep_rounds
"""``progress.keep_rounds`` by default: what :func:`goal_state` keeps when not told."""

STORE_INT = 2**63 - 1
"""The largest integer relay's store (SQLite) holds; a goal state's numbers stay within it."""

COMMIT_ID = r"^[0-9a-f]{40}([0-9a-f]{24})?$"
"""A full commit id (SHA-1, or SHA-256 in a repository that uses it)."""

_ROUND_FIELDS = (
    "n",
    "started_at",
    "ended_at",
    "steps",
    "tool_calls",
    "real_tool_calls",
    "commit_sha",
    "end_reason",
)

_ROUND_KEYS = frozenset({*_ROUND_FIELDS, "handoff_auto", "files_changed", "handoff"})
"""The keys of a round in the file (:func:`_round_json`)."""

_GOAL_FIELDS = (
    "id",
    "text",
    "goal_file",
    "branch",
    "base_commit",
    "mode",
    "model",
    "worker",
    "deliverables",
    "limits",
    "overrides",
    "status",
    "reason",
    "message",
    "question",
    *GOAL_COUNTERS,
    *GOAL_USAGE,
    "elapsed_s",
    "diagnosis",
    "risk_score",
    "failure_streak",
    "model_calls",
    "goal_file_digest",
    "created_at",
)


def goal_state(
    store: Store,
    goal_id: str,
    *,
    shown: tuple[list[Round], Tally] | None = None,
    keep_rounds: int = KEEP_ROUNDS,
    audit: dict[str, Any] | bool | None = True,
    **final: Any,
) -> dict[str, Any]:
    """The JSON-able state of a goal, of the same size at every round.

    Args:
        store: the goal's store.
        goal_id: the goal.
        shown: the rounds the progress file shows and the tally of the earlier ones, as
            :func:`relay.progress.shown_rounds` gives them (with the closing round's record
            laid over); None: read them with ``keep_rounds`` (``progress.keep_rounds``).
        audit: the goal's latest audit as :meth:`relay.store.Store.latest_audit` gives it
            (None: there is none); True: read it.
        final: goal fields not stored yet that override the goal's (the counters, status,
            reason and message as the closing round leaves them).

    Raises:
        GoalStateError: no such goal.
    """
    goal = store.goal(goal_id)
    state = {name: getattr(goal, name) for name in _GOAL_FIELDS}
    state.update(final)
    state["overrides"] = without_machine_settings(state["overrides"])  # this machine's
    rounds, earlier = shown or shown_rounds(store, goal_id, keep_rounds)
    return {
        "format": FORMAT,
        "written_at": time.time(),
        "goal": state,
        "supplements": [
            {"text": s["text"], "source": s["source"], "created_at": s["created_at"]}
            for s in goal.supplements
        ],
        "rounds": [_round_json(r) for r in rounds],
        "earlier_rounds": earlier.to_dict() if earlier.count else None,
        "audit": store.latest_audit(goal_id) if audit is True else audit,
    }


def _round_json(r: Round) -> dict[str, Any]:
    """A round as the file carries it (bounded: 50 paths, :data:`HANDOFF_CHARS` of note)."""
    return {
        **{name: getattr(r, name) for name in _ROUND_FIELDS},
        "handoff_auto": int(r.handoff_auto),
        "files_changed": list(r.files_changed[:50]),
        "handoff": (r.handoff or "")[:HANDOFF_CHARS],
    }


def dumps(state: dict[str, Any]) -> str:
    """The file's text (stable key order, one trailing newline)."""
    return json.dumps(state, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


class _Goal(BaseModel):
    """The goal of a goal state, checked as strictly as relay checks what it stores: the
    frozen deliverables and limits by the rules of ``relay.yaml``, a full commit id, a goal
    file inside the repository (SPEC §9, §14)."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    text: str
    goal_file: str | None = None
    branch: str | None = None
    base_commit: str = Field(pattern=COMMIT_ID)
    mode: Literal["relay", "session"]
    model: str
    worker: Literal["builtin", "claude-code", "codex"] = "builtin"
    deliverables: list[dict[str, Any]]
    limits: dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)
    status: GoalStatus
    reason: str | None = None
    message: str | None = None
    question: str | None = None
    rounds: int = Field(ge=0)
    counted_rounds: int = Field(ge=0)
    no_progress_streak: int = Field(ge=0)
    blocked_reports: int = Field(ge=0)
    auto_replies: int = Field(ge=0)
    uncached_input: int = Field(ge=0)
    cache_write: int = Field(ge=0)
    cached_input: int = Field(ge=0)
    output: int = Field(ge=0)
    cost_usd: float = Field(ge=0)
    elapsed_s: float = Field(ge=0)
    diagnosis: str | None = None
    risk_score: float = 0.0
    failure_streak: int = 0
    model_calls: int = 0
    goal_file_digest: str | None = None
    created_at: float | None = None

    @field_validator("deliverables")
    @classmethod
    def _deliverables(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, item in enumerate(value):
            _checked_by(Deliverable, item, f"deliverable {i + 1}: ")
        return value

    @field_validator("limits")
    @classmethod
    def _limits(cls, value: dict[str, Any]) -> dict[str, Any]:
        _checked_by(Limits, value, "")
        return value

    @field_validator("overrides")
    @classmethod
    def _not_the_machines(cls, value: dict[str, Any]) -> dict[str, Any]:
        return without_machine_settings(value)  # never taken from a branch (SPEC §14)

    @field_validator("goal_file")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        if value is None:
            return value
        check_path_text(value)
        parts = PurePosixPath(value).parts
        if value.startswith(("/", "~")) or ".." in parts or (parts and parts[0] == ".git"):
            raise ValueError(f"{value!r} is not a path inside the repository's working tree")
        return value


def _checked_by(model: type[BaseModel], value: dict[str, Any], prefix: str) -> None:
    """Check ``value`` by the rules of ``relay.yaml``'s ``model`` (a deliverable, the
    limits). Raises ``ValueError`` naming the first bad key, what is allowed and the value
    found, after ``prefix``."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{prefix}{key}: {first['msg']} (found {first.get('input')!r})") from None


class _Supplement(BaseModel):
    text: str
    source: str
    created_at: float | None = None


class _Earlier(BaseModel):
    """The tally of the rounds before the carried ones (absent in older files)."""

    model_config = ConfigDict(extra="ignore")
    count: int = Field(ge=1)
    first: int = Field(ge=1)
    last: int = Field(ge=1)
    tool_calls: int = Field(ge=0)

    @model_validator(mode="after")
    def _a_range(self) -> _Earlier:
        if self.first > self.last or self.count > self.last - self.first + 1:
            raise ValueError(f"{self.count} rounds cannot be numbered {self.first}-{self.last}")
        return self


class _Audit(BaseModel):
    model_config = ConfigDict(extra="ignore")
    round: int | None = None
    passed: bool
    checks: list[dict[str, Any]]
    created_at: float | None = None


class _State(BaseModel):
    model_config = ConfigDict(extra="ignore")
    format: int = Field(ge=1, le=FORMAT)
    goal: _Goal
    supplements: list[_Supplement] = Field(default_factory=list)
    rounds: list[Round] = Field(default_factory=list)
    earlier_rounds: _Earlier | None = None
    audit: _Audit | None = None

    @field_validator("rounds", mode="before")
    @classmethod
    def _only_what_the_file_carries(cls, value: Any) -> Any:
        """A round of the file has the fields :func:`_round_json` writes; others are dropped
        (a goal state carries no usage, claim or run of a round)."""
        if not isinstance(value, list):
            return value
        return [
            {k: v for k, v in r.items() if k in _ROUND_KEYS} if isinstance(r, dict) else r
            for r in value
        ]

    @field_validator("rounds")
    @classmethod
    def _finished_rounds(cls, rounds: list[Round]) -> list[Round]:
        for r in rounds:
            if r.n < 1:
                raise ValueError(f"round {r.n}: rounds are numbered from 1")
            if r.ended_at is None:
                raise ValueError(f"round {r.n} has no ended_at: the file carries finished rounds")
        return rounds

    @model_validator(mode="after")
    def _earlier_before_the_rounds(self) -> _State:
        first = min((r.n for r in self.rounds), default=None)
        earlier = self.earlier_rounds
        if earlier is not None and first is not None and earlier.last >= first:
            raise ValueError(
                f"the earlier rounds (up to {earlier.last}) must come before the first round "
                f"listed ({first})"
            )
        return self


def loads(text: str, where: str) -> dict[str, Any]:
    """Parse and check the file; raises ``StoreError`` naming ``where`` and the bad field when
    it is not a goal state this version can continue. Its seal is not looked at
    (:mod:`relay.branch_trust` does)."""
    return checked(parse(text, where), where)


def parse(text: str, where: str) -> Any:
    """The file's JSON, as parsed (its seal included); raises ``StoreError`` naming ``where``
    when it is not JSON Python can read."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StoreError(f"{where} is not valid JSON ({exc.msg}); it cannot be resumed") from None
    except RecursionError:
        raise StoreError(f"{where} is nested too deeply; it cannot be resumed") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise StoreError(f"{where} cannot be read ({exc}); it cannot be resumed") from None


def checked(raw: Any, where: str) -> dict[str, Any]:
    """The goal state of the parsed file ``raw``, checked as :func:`loads` says."""
    if isinstance(raw, dict) and isinstance(raw.get("format"), int) and raw["format"] > FORMAT:
        raise StoreError(f"{where} was written by a newer goal-relay; upgrade relay")
    problem = _unstorable(raw)
    if problem is not None:
        raise StoreError(f"{where} is not a goal state relay can continue: {problem}")
    try:
        state = _State.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise StoreError(
            f"{where} is not a goal state relay can continue: {field}: "
            + first["msg"].removeprefix("Value error, ")
        ) from None
    return {**state.model_dump(exclude={"rounds"}), "rounds": state.rounds}


def _unstorable(raw: Any) -> str | None:
    """The first number of the parsed file ``raw`` that relay's store cannot hold (an integer
    beyond :data:`STORE_INT`, an infinite or NaN float, which Python's JSON reads), as
    ``"<key path>: <why>"``; None when there is none."""
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack += [(f"{where}.{k}" if where else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{where}.{i}", v) for i, v in enumerate(value)]
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > STORE_INT:
            return f"{where}: {value} is beyond the integers relay stores (at most 2**63-1)"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"{where}: {value} is not a finite number"
    return None


def import_goal(store: Store, state: dict[str, Any]) -> GoalRecord:
    """Recreate a goal (same id) with its supplements, rounds, the tally of the rounds left
    out, and its latest audit in an empty or unrelated store, from a state :func:`loads` read
    (written by :func:`goal_state` on another machine, or by an older relay listing every
    round). Raises ``GoalStateError`` when the store has a goal with that id."""
    g = state["goal"]
    store.import_goal_row({name: g.get(name) for name in _GOAL_FIELDS})
    try:
        for s in state.get("supplements", []):
            store.add_supplement(g["id"], s["text"], s["source"], created_at=s.get("created_at"))
        for r in state.get("rounds", []):
            store.import_round(g["id"], r)
        earlier = state.get("earlier_rounds")
        if earlier:
            store.import_earlier_rounds(g["id"], Tally(**earlier))
        audit = state.get("audit")
        if audit:
            store.add_audit(
                g["id"],
                audit.get("round"),
                bool(audit["passed"]),
                audit["checks"],
                created_at=audit.get("created_at"),
            )
        store.add_event(
            g["id"], "imported", f"continued from the branch's goal state (round {g['rounds']})"
        )
    except BaseException:
        store.delete_goal(g["id"])  # never half a goal: the next run imports it afresh
        raise
    return store.goal(g["id"])
