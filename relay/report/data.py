"""What a report shows of a goal or a run, read from the store (SPEC §10): only the sums and
records it shows — tokens summed per round by the database, the last answer, the audits —
never every step's text and tool calls."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from relay.config import Price
from relay.errors import GoalStateError
from relay.json_output import goal_json
from relay.models.base import Usage
from relay.prices import ModelPrice, cost_usd, price_for
from relay.store import Round, Store

GUARD_KINDS = frozenset({"loop", "drift", "tool_failures", "api_errors", "tamper"})
"""Event kinds of the guard's detectors (SPEC §8)."""

QUIET_KINDS = frozenset({"round_ended", "run_started"})
"""Events the report leaves out of its event list (the round table shows them)."""

TOKEN_KINDS: tuple[tuple[str, str, str], ...] = (
    ("uncached_input", "uncached input", "#4C72B0"),
    ("cache_write", "cache writes", "#8172B3"),
    ("cached_input", "cache reads", "#55A868"),
    ("output", "output", "#DD8452"),
)
"""``(field, label, colour)`` of each stacked token kind, bottom to top."""


@dataclass
class GoalReport:
    """Everything a report shows of one goal (or of one of its runs).

    Attributes:
        label: the series name in charts (``relay``, ``session #2``, or the goal id).
        scope: ``goal`` or ``run <run id>``.
        summary: the goal's ``--json`` object (SPEC §12).
        totals: tokens (``uncached_input``, ``cache_write``, ``cached_input``, ``output``),
            ``cost_usd``, ``model_calls``, ``tool_calls`` and ``rounds`` of the scope.
        price: the model's price (None: unknown, costs are 0).
        round_costs: USD of each round, its model calls priced one by one.
        rounds: the scope's rounds, oldest first, each with its steps' usage.
        audits: every audit of the goal, oldest first: ``{round, passed, checks, created_at}``.
        events: the scope's events, oldest first (``kind, round, detail, weight, created_at``).
        final_response: the text of the last response that said something.
    """

    label: str
    scope: str
    summary: dict[str, Any]
    mode: str
    model: str
    totals: dict[str, Any]
    price: ModelPrice | None
    round_costs: dict[int, float] = field(default_factory=dict)
    rounds: list[Round] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    final_response: str = ""

    @property
    def priced(self) -> bool:
        """Whether the model has a known price (else costs are 0)."""
        return self.price is not None

    def round_cost(self, r: Round) -> float:
        """USD of round ``r``'s model calls at the model's price (0 when unknown)."""
        return self.round_costs.get(r.n, 0.0)

    @property
    def guard_events(self) -> list[dict[str, Any]]:
        """Events of the guard's detectors."""
        return [e for e in self.events if e["kind"] in GUARD_KINDS]

    @property
    def other_events(self) -> list[dict[str, Any]]:
        """Events of the event list: neither the guard's nor the quiet ones."""
        return [e for e in self.events if e["kind"] not in GUARD_KINDS | QUIET_KINDS]


def load_goal_report(
    store: Store,
    goal_id: str,
    *,
    run_id: str | None = None,
    prices: Mapping[str, Price] | None = None,
    label: str | None = None,
) -> GoalReport:
    """Read one goal (or one run of it, with ``run_id``) from ``store`` for a report.

    Args:
        store: the working tree's store.
        goal_id: the goal.
        run_id: limit rounds, steps and events to this run.
        prices: ``prices`` of relay.yaml (USD per million tokens) for per-round costs.
        label: the series name; default the goal id (and run id).

    Raises:
        GoalStateError: no such goal.
    """
    goal = store.goal(goal_id)
    summary = goal_json(store, goal_id)
    price = price_for(goal.model, prices or {})
    usage = store.usage_by_round(goal_id, run_id)
    rounds = _rounds_with_usage(store, goal_id, run_id, usage)
    round_costs: dict[int, float] = {}
    for n, step_usage in store.step_usages(goal_id, run_id):
        round_costs[n] = round_costs.get(n, 0.0) + cost_usd(step_usage, price)
    tool_calls = sum(r.tool_calls for r in rounds)
    if run_id is None:
        totals: dict[str, Any] = dict(summary["tokens"])
        totals["cost_usd"] = summary["cost_usd"]
        totals["model_calls"] = goal.model_calls
        totals["rounds"] = summary["rounds"]
        if rounds:  # with the rounds an imported goal state summed up instead of listing
            tool_calls += store.round_tally(goal_id, before=rounds[0].n).tool_calls
    else:
        totals = {key: sum(getattr(r.usage, key) for r in rounds) for key, _, _ in TOKEN_KINDS}
        totals["cost_usd"] = round(sum(round_costs.get(r.n, 0.0) for r in rounds), 6)
        totals["model_calls"] = sum(u["calls"] for u in usage.values())
        totals["rounds"] = len(rounds)
    totals["tool_calls"] = tool_calls
    runs = [r for r in store.runs(goal_id) if run_id is None or r["id"] == run_id]
    return GoalReport(
        label=label or (goal_id if run_id is None else f"{goal_id} run {run_id}"),
        scope="goal" if run_id is None else f"run {run_id}",
        summary=summary,
        mode=goal.mode,
        model=goal.model,
        totals=totals,
        price=price,
        round_costs=round_costs,
        rounds=rounds,
        runs=runs,
        audits=store.audits(goal_id),
        events=store.events(goal_id, run_id),
        final_response=store.last_answer(goal_id, run_id),
    )


def _rounds_with_usage(
    store: Store, goal_id: str, run_id: str | None, usage: dict[int, dict[str, int]]
) -> list[Round]:
    """The goal's (or run's) rounds, oldest first, each with its steps' usage (``usage``:
    from :meth:`relay.store.Store.usage_by_round`)."""
    return [
        replace(r, usage=Usage(**{k: usage.get(r.n, {}).get(k, 0) for k, _, _ in TOKEN_KINDS}))
        for r in store.rounds(goal_id, run_id=run_id)
    ]


def resolve_target(store: Store, ident: str | None) -> tuple[str, str | None]:
    """``(goal_id, run_id or None)`` named by ``ident``: a goal id, a run id, or None for
    the open goal (else the latest one).

    Raises:
        GoalStateError: nothing matches, or the store has no goal.
    """
    if ident is None:
        goal = store.latest_goal(open_only=True) or store.latest_goal()
        if goal is None:
            raise GoalStateError('no goal here yet: start one with relay run "GOAL"')
        return goal.id, None
    try:
        return store.goal(ident).id, None
    except GoalStateError:
        pass
    record = store.run_record(ident)
    if record is None:
        raise GoalStateError(f"no goal or run with id {ident} (relay status shows the goal id)")
    return record["goal_id"], ident


def stamp(ts: float | None) -> str:
    """A UNIX time as ``YYYY-MM-DD HH:MM:SS UTC`` (``-`` for None)."""
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def summary_pairs(report: GoalReport) -> list[tuple[str, str]]:
    """The ``(label, value)`` rows of a report's summary table."""
    s, t = report.summary, report.totals
    status = s["status"] + (
        f" ({s['reason']})" if s["reason"] and s["reason"] != s["status"] else ""
    )
    audit = s.get("audit")
    audit_text = "none" if not audit else ("passed" if audit["passed"] else "failed")
    if audit:
        n = len(audit["checks"])
        audit_text += f" (round {audit.get('round')}, {n} check{'' if n == 1 else 's'})"
    return [
        ("goal", s["goal_id"] + ("" if report.scope == "goal" else f" ({report.scope})")),
        ("status", status),
        ("mode", report.mode),
        ("model", report.model),
        ("branch", str(s.get("branch"))),
        ("base commit", str(s.get("base_commit") or "")[:12]),
        ("rounds", str(t["rounds"])),
        ("model calls", str(t["model_calls"])),
        ("tool calls", str(t["tool_calls"])),
        ("tokens counted (budget)", str(t["uncached_input"] + t["cache_write"] + t["output"])),
        ("uncached input tokens", str(t["uncached_input"])),
        ("cache reads (tokens), not counted", str(t["cached_input"])),
        ("cache writes (tokens)", str(t["cache_write"])),
        ("output tokens", str(t["output"])),
        ("cost (USD)", f"{t['cost_usd']:.4f}" + ("" if report.priced else " (no price known)")),
        ("active time (s)", f"{s['elapsed_s']:.1f}"),
        ("audit", audit_text),
    ]
