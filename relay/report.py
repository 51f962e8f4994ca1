"""Reports of a goal, a run or a comparison: Markdown, and self-contained HTML with charts.

The charts are drawn by matplotlib (Agg, rendered to SVG) and embedded inline, so the HTML file
needs nothing from the network: tokens per round (stacked uncached input / cache writes /
cache reads / output), cumulative cost, a round timeline coloured by how each round ended,
and guard events. A comparison draws every run on the same axes. Everything is read from the
store (goals, rounds, steps, events, audits); nothing is taken from the model's words.
"""

from __future__ import annotations

import html
import io
import json
import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from relay import runner
from relay.compare import CompareResult, compare_markdown, table
from relay.config import Price
from relay.errors import GoalStateError
from relay.models.base import Usage
from relay.prices import cost_usd, price_for
from relay.store import Store

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

SERIES_HATCHES = ("", "///", "...", "xxx", "\\\\\\", "++")
SERIES_COLOURS = ("#1f4e9c", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#7f8c8d")
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P")
SERIES_LINES = ("-", "--", ":", "-.", "-", "--")
REASON_COLOURS = {
    "handoff": "#4C9F70",
    "no_tool_call": "#A0A0A0",
    "max_steps": "#E1A43B",
    "complete": "#1f6fbf",
    "interrupted": "#7f7f7f",
    "needs_user_input": "#9b59b6",
    "blocked": "#c0392b",
    "no_progress": "#e67e22",
    "total_rounds": "#d35400",
    "guard": "#b03a2e",
    "token_budget": "#8e6c3a",
    "time_budget": "#8e6c3a",
    "cost_budget": "#8e6c3a",
}
_EXTRA_COLOURS = ("#17becf", "#bcbd22", "#e377c2", "#8c564b", "#7f7f7f")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass
class RoundPoint:
    """One round as the report shows it. Times are UNIX seconds; tokens are the sum over the
    round's steps; ``cost_usd`` is priced from the model's price (0 when unknown)."""

    n: int
    started_at: float
    ended_at: float | None
    steps: int
    tool_calls: int
    real_tool_calls: int
    files_changed: list[str]
    end_reason: str | None
    handoff: str | None
    commit: str | None
    uncached_input: int = 0
    cache_write: int = 0
    cached_input: int = 0
    output: int = 0
    cost_usd: float = 0.0

    @property
    def input_tokens(self) -> int:
        """All input tokens of the round: uncached + cache writes + cache reads."""
        return self.uncached_input + self.cache_write + self.cached_input


@dataclass
class GoalReport:
    """Everything a report shows of one goal (or of one of its runs).

    Attributes:
        label: the series name in charts (``relay``, ``session #2``, or the goal id).
        scope: ``goal`` or ``run <run id>``.
        summary: the goal's ``--json`` object (SPEC §12).
        totals: tokens (``uncached_input``, ``cache_write``, ``cached_input``, ``output``),
            ``cost_usd``, ``model_calls``, ``tool_calls`` and ``rounds`` of the scope.
        priced: whether the model has a known price (else costs are 0).
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
    priced: bool
    rounds: list[RoundPoint] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    final_response: str = ""

    @property
    def guard_events(self) -> list[dict[str, Any]]:
        """Events of the guard's detectors."""
        return [e for e in self.events if e["kind"] in GUARD_KINDS]


def _all_audits(store_path: Path, goal_id: str) -> list[dict[str, Any]]:
    """Every audit of the goal, oldest first (read-only; the store keeps them all)."""
    db = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT round, passed, checks, created_at FROM audits WHERE goal_id=? ORDER BY id",
            (goal_id,),
        ).fetchall()
    except sqlite3.DatabaseError:
        return []
    finally:
        db.close()
    return [
        {"round": r[0], "passed": bool(r[1]), "checks": json.loads(r[2]), "created_at": r[3]}
        for r in rows
    ]


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
    summary = runner.goal_json(store, goal_id)
    price = price_for(goal.model, prices or {})
    steps = store.steps(goal_id)
    rounds_raw = store.rounds(goal_id)
    events = store.events(goal_id)
    if run_id is not None:
        steps = [s for s in steps if s["run_id"] == run_id]
        rounds_raw = [r for r in rounds_raw if r["run_id"] == run_id]
        events = [e for e in events if e["run_id"] == run_id]
    by_round: dict[int, RoundPoint] = {}
    for r in rounds_raw:
        by_round[r["n"]] = RoundPoint(
            n=r["n"],
            started_at=r["started_at"],
            ended_at=r["ended_at"],
            steps=r["steps"],
            tool_calls=r["tool_calls"],
            real_tool_calls=r["real_tool_calls"],
            files_changed=list(r["files_changed"]),
            end_reason=r["end_reason"],
            handoff=r["handoff"],
            commit=r["commit_sha"],
        )
    for s in steps:
        point = by_round.get(s["round"])
        if point is None:
            continue
        for key, _, _ in TOKEN_KINDS:
            setattr(point, key, getattr(point, key) + int(s[key]))
        point.cost_usd += cost_usd(
            Usage(s["uncached_input"], s["cache_write"], s["cached_input"], s["output"]), price
        )
    rounds = [by_round[n] for n in sorted(by_round)]
    if run_id is None:
        totals: dict[str, Any] = dict(summary["tokens"])
        totals["cost_usd"] = summary["cost_usd"]
        totals["model_calls"] = goal.model_calls
        totals["rounds"] = summary["rounds"]
    else:
        totals = {key: sum(getattr(r, key) for r in rounds) for key, _, _ in TOKEN_KINDS}
        totals["cost_usd"] = round(sum(r.cost_usd for r in rounds), 6)
        totals["model_calls"] = len(steps)
        totals["rounds"] = len(rounds)
    totals["tool_calls"] = sum(r.tool_calls for r in rounds)
    runs = store.runs(goal_id)
    if run_id is not None:
        runs = [r for r in runs if r["id"] == run_id]
    final = next((s["text"] for s in reversed(steps) if (s["text"] or "").strip()), "")
    return GoalReport(
        label=label or (goal_id if run_id is None else f"{goal_id} run {run_id}"),
        scope="goal" if run_id is None else f"run {run_id}",
        summary=summary,
        mode=goal.mode,
        model=goal.model,
        totals=totals,
        priced=price is not None,
        rounds=rounds,
        runs=runs,
        audits=_all_audits(store.path, goal_id),
        events=events,
        final_response=final,
    )


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


# --------------------------------------------------------------------------------------------
# Charts (matplotlib → inline SVG)
# --------------------------------------------------------------------------------------------


def _svg(fig: Figure, salt: str) -> str:
    """The figure as an SVG fragment for inline use in HTML: no XML prolog, DOCTYPE,
    metadata or namespace declarations (and so no address of any kind)."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    return svg.strip()


def _figure(height: float = 3.4) -> Figure:
    fig = Figure(figsize=(9.5, height), dpi=100)
    fig.set_layout_engine("constrained")
    return fig


_THOUSANDS = FuncFormatter(lambda value, _pos: f"{value:,.0f}")
"""Token axes: whole numbers with thousands separators (no ``1e7`` offset)."""


def _round_axis(ax: Any, series: Sequence[GoalReport]) -> None:
    """Whole rounds on the x axis, from the first round to the last of any series."""
    rounds = [r.n for s in series for r in s.rounds] or [1]
    ax.set_xlim(min(rounds) - 0.6, max(rounds) + 0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=20))
    ax.set_xlabel("round")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def chart_tokens_per_round(series: Sequence[GoalReport]) -> str:
    """Stacked bars of the tokens of each round (uncached input, cache writes, cache reads,
    output); several series side by side per round, told apart by hatching. SVG text."""
    kinds = [k for k in TOKEN_KINDS if any(getattr(r, k[0]) for s in series for r in s.rounds)] or [
        TOKEN_KINDS[0]
    ]
    fig = _figure()
    ax = fig.add_subplot()
    n = max(1, len(series))
    width = 0.8 / n
    for i, s in enumerate(series):
        xs = [r.n - 0.4 + width * (i + 0.5) for r in s.rounds]
        bottom = [0] * len(s.rounds)
        for key, _, colour in kinds:
            values = [getattr(r, key) for r in s.rounds]
            ax.bar(
                xs,
                values,
                width,
                bottom=bottom,
                color=colour,
                hatch=SERIES_HATCHES[i % len(SERIES_HATCHES)] if n > 1 else None,
                edgecolor="white" if n > 1 else colour,
                linewidth=0.4,
            )
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    handles = [Patch(facecolor=c, label=label) for _, label, c in kinds]
    if n > 1:
        handles += [
            Patch(
                facecolor="#d9d9d9",
                edgecolor="#333333",
                hatch=SERIES_HATCHES[i % len(SERIES_HATCHES)],
                label=s.label,
            )
            for i, s in enumerate(series)
        ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_ylabel("tokens")
    ax.yaxis.set_major_formatter(_THOUSANDS)
    _round_axis(ax, series)
    return _svg(fig, "tokens")


def chart_cumulative_cost(series: Sequence[GoalReport]) -> str:
    """Cumulative cost (USD) after each round, one line per series; when no series has a
    price, the cumulative budget tokens (uncached input + cache writes + output) instead."""
    priced = any(s.priced for s in series)
    fig = _figure(3.0)
    ax = fig.add_subplot()
    for i, s in enumerate(series):
        total = 0.0
        ys = []
        for r in s.rounds:
            total += r.cost_usd if priced else r.uncached_input + r.cache_write + r.output
            ys.append(total)
        ax.plot(
            [r.n for r in s.rounds],
            ys,
            marker=SERIES_MARKERS[i % len(SERIES_MARKERS)] if len(s.rounds) <= 30 else None,
            markersize=6 - 1.5 * (i % 2),
            linestyle=SERIES_LINES[i % len(SERIES_LINES)],
            linewidth=1.8 - 0.4 * (i % 2),
            color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
            label=s.label,
        )
    if priced:
        ax.set_ylabel("USD")
    else:
        ax.set_ylabel("budget tokens")
        ax.yaxis.set_major_formatter(_THOUSANDS)
        ax.set_title(
            "Cumulative budget tokens (no price known for the model, so no cost)",
            loc="left",
            fontsize=11,
        )
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    _round_axis(ax, series)
    return _svg(fig, "cost")


def _reason_colours(series: Sequence[GoalReport]) -> dict[str, str]:
    colours: dict[str, str] = {}
    extra = iter(_EXTRA_COLOURS * 10)
    for s in series:
        for r in s.rounds:
            reason = r.end_reason or "running"
            if reason not in colours:
                colours[reason] = REASON_COLOURS.get(reason) or next(extra)
    return colours


def chart_timeline(series: Sequence[GoalReport]) -> str:
    """One lane per series: each round a bar over its wall time (seconds since the series'
    first round started), coloured by how it ended and labelled with its number; the goal's
    final status at the end of the lane."""
    colours = _reason_colours(series)
    fig = _figure(1.3 + 0.65 * len(series))
    ax = fig.add_subplot()
    span = 0.0
    for s in series:
        if s.rounds:
            t0 = s.rounds[0].started_at
            span = max(span, max((r.ended_at or r.started_at) - t0 for r in s.rounds))
    span = span or 1.0
    for lane, s in enumerate(series):
        if not s.rounds:
            continue
        t0 = s.rounds[0].started_at
        end = 0.0
        for r in s.rounds:
            start = r.started_at - t0
            width = max((r.ended_at or r.started_at) - r.started_at, span * 0.004)
            ax.broken_barh(
                [(start, width)],
                (lane - 0.35, 0.7),
                facecolors=colours[r.end_reason or "running"],
                edgecolor="white",
                linewidth=0.6,
            )
            if width > span * 0.035:
                ax.text(
                    start + width / 2,
                    lane,
                    str(r.n),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
            end = max(end, start + width)
        ax.text(
            end + span * 0.01, lane, s.summary["status"], va="center", fontsize=8, color="#222222"
        )
    ax.set_yticks(range(len(series)), [s.label for s in series])
    ax.set_ylim(-0.6, len(series) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, span * 1.15)
    ax.set_xlabel("seconds since the first round started")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(
        handles=[Patch(facecolor=c, label=reason) for reason, c in colours.items()],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(series) < 3 else -0.2),
        ncols=min(6, len(colours)),
        fontsize=8,
        title="round ended by",
        title_fontsize=8,
    )
    return _svg(fig, "timeline")


def chart_guard_events(series: Sequence[GoalReport]) -> str | None:
    """Guard events by round and kind (marker size grows with the event's weight), one marker
    shape per series; None when no series has a guard event."""
    if not any(s.guard_events for s in series):
        return None
    kinds = sorted({e["kind"] for s in series for e in s.guard_events})
    fig = _figure(1.2 + 0.45 * len(kinds))
    ax = fig.add_subplot()
    markers = SERIES_MARKERS
    n = len(series)
    for i, s in enumerate(series):
        events = s.guard_events
        if not events:
            continue
        offset = (i - (n - 1) / 2) * 0.18
        ax.scatter(
            [(e["round"] or 0) + offset for e in events],
            [kinds.index(e["kind"]) for e in events],
            s=[30 + 4 * max(0, e.get("weight") or 0) for e in events],
            marker=markers[i % len(markers)],
            color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
            alpha=0.8,
            label=s.label,
        )
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_ylim(-0.6, len(kinds) - 0.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_title("marker size: the event's weight", loc="left", fontsize=9)
    _round_axis(ax, series)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig, "guard")


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _md(text: Any) -> str:
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def _first_line(text: str | None, limit: int = 120) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _stamp(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _summary_pairs(report: GoalReport) -> list[tuple[str, str]]:
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
        ("uncached input tokens", str(t["uncached_input"])),
        ("cache reads (tokens)", str(t["cached_input"])),
        ("cache writes (tokens)", str(t["cache_write"])),
        ("output tokens", str(t["output"])),
        ("cost (USD)", f"{t['cost_usd']:.4f}" + ("" if report.priced else " (no price known)")),
        ("active time (s)", f"{s['elapsed_s']:.1f}"),
        ("audit", audit_text),
    ]


def markdown_report(report: GoalReport) -> str:
    """A Markdown report of one goal or run: summary, final word, rounds with their tokens,
    the latest audit's checks, guard events and other events."""
    s = report.summary
    parts = [f"# relay report: goal {s['goal_id']}", "", f"> {_md(s['goal'])[:1000]}", ""]
    parts += ["| | |", "|---|---|"]
    parts += [f"| {k} | {_md(v)} |" for k, v in _summary_pairs(report)]
    parts.append("")
    parts += _md_final(report)
    parts += ["## Rounds", ""]
    if report.rounds:
        parts.append(
            "| round | ended by | steps | tool calls | uncached input | cache reads | "
            "cache writes | output | cost (USD) | commit | handoff |"
        )
        parts.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        for r in report.rounds:
            parts.append(
                f"| {r.n} | {r.end_reason or 'running'} | {r.steps} | {r.tool_calls} | "
                f"{r.uncached_input} | {r.cached_input} | {r.cache_write} | {r.output} | "
                f"{r.cost_usd:.4f} | {(r.commit or '')[:7]} | {_md(_first_line(r.handoff))} |"
            )
    else:
        parts.append("No round yet.")
    parts.append("")
    parts += _md_audit(report)
    parts += _md_events(report)
    return "\n".join(parts).rstrip() + "\n"


def _md_final(report: GoalReport) -> list[str]:
    out = ["## Final word", ""]
    message = report.summary.get("message")
    if message:
        out += [f"Stop message: {_md(message)[:1500]}", ""]
    if report.final_response:
        out += [f"Last response: {_md(report.final_response)[:1500]}", ""]
    if not message and not report.final_response:
        out += ["None.", ""]
    return out


def _md_audit(report: GoalReport) -> list[str]:
    out = ["## Audit", ""]
    if not report.audits:
        return [*out, "No audit ran.", ""]
    for a in report.audits[:-1]:
        failing = [f"{c['kind']} {c['target']}" for c in a["checks"] if not c["passed"]]
        out.append(
            f"- round {a['round']}: {'passed' if a['passed'] else 'failed'}"
            + (f" ({', '.join(failing)})" if failing else "")
        )
    latest = report.audits[-1]
    out += [
        "",
        f"Latest (round {latest['round']}): **{'passed' if latest['passed'] else 'failed'}**",
        "",
        "| | kind | target | evidence |",
        "|---|---|---|---|",
    ]
    for c in latest["checks"]:
        mark = "✓" if c["passed"] else "✗"
        out.append(
            f"| {mark} | {c['kind']} | {_md(c['target'])} | {_md(_first_line(c['evidence'], 160))} |"
        )
    return [*out, ""]


def _md_events(report: GoalReport) -> list[str]:
    out = ["## Guard events", ""]
    guard = report.guard_events
    if guard:
        out += ["| round | kind | weight | detail |", "|---:|---|---:|---|"]
        out += [
            f"| {e['round'] or '-'} | {e['kind']} | {e.get('weight') or 0} | {_md(e['detail'])[:300]} |"
            for e in guard
        ]
    else:
        out.append("None.")
    out += ["", "## Events", ""]
    other = [e for e in report.events if e["kind"] not in GUARD_KINDS | QUIET_KINDS]
    if other:
        out += ["| time | round | kind | detail |", "|---|---:|---|---|"]
        out += [
            f"| {_stamp(e['created_at'])} | {e['round'] or '-'} | {e['kind']} | {_md(e['detail'])[:300]} |"
            for e in other
        ]
    else:
        out.append("None.")
    return [*out, ""]


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 0; background: #f6f7f9; color: #1d2330; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 1.5rem; margin: 0 0 8px; }
h2 { font-size: 1.15rem; margin: 28px 0 10px; border-bottom: 1px solid #e3e6ea; padding-bottom: 4px; }
h3 { font-size: 1rem; margin: 18px 0 8px; }
blockquote { margin: 8px 0 16px; padding: 8px 14px; background: #f1f4f8;
             border-left: 4px solid #4C72B0; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: 0.88rem; margin: 6px 0 12px; }
th, td { border: 1px solid #dde1e6; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f1f3f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.kv td:first-child { color: #555; white-space: nowrap; }
.ok { color: #1e7b34; font-weight: 600; } .bad { color: #b3261e; font-weight: 600; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 0.85rem;
         background: #e8eaed; }
.badge.complete { background: #d4edda; color: #155724; }
.badge.fail { background: #f8d7da; color: #721c24; }
pre { background: #f6f8fa; padding: 8px 10px; overflow-x: auto; white-space: pre-wrap;
      font-size: 0.82rem; margin: 4px 0; }
.chart svg { width: 100%; height: auto; display: block; }
footer { margin-top: 32px; color: #777; font-size: 0.8rem; }
details summary { cursor: pointer; font-weight: 600; margin: 8px 0; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text if text is not None else ""))


def _page(title: str, body: list[str]) -> str:
    stamp = _stamp(time.time())
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + f"\n<footer>Generated by goal-relay on {_e(stamp)}. Charts drawn with matplotlib; "
        "this file needs nothing from the network.</footer>\n</main>\n</body>\n</html>\n"
    )


def _badge(status: str) -> str:
    kind = "complete" if status == "complete" else ("fail" if status != "active" else "")
    return f'<span class="badge {kind}">{_e(status)}</span>'


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> str:
    """An HTML table; ``rows`` cells are already-escaped HTML; ``numeric`` column indexes are
    right-aligned."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _chart(svg: str | None, empty: str) -> str:
    if svg is None:
        return f"<p>{_e(empty)}</p>"
    return f'<div class="chart">{svg}</div>'


def _html_final(report: GoalReport) -> str:
    parts = []
    message = report.summary.get("message")
    if message:
        parts.append(f"<p><strong>Stop message</strong></p><pre>{_e(message[:4000])}</pre>")
    if report.final_response:
        parts.append(
            f"<p><strong>Last response</strong></p><pre>{_e(report.final_response[:4000])}</pre>"
        )
    return "\n".join(parts) or "<p>None.</p>"


def _html_rounds(report: GoalReport) -> str:
    if not report.rounds:
        return "<p>No round yet.</p>"
    rows = [
        [
            str(r.n),
            _e(r.end_reason or "running"),
            str(r.steps),
            str(r.tool_calls),
            str(r.uncached_input),
            str(r.cached_input),
            str(r.cache_write),
            str(r.output),
            f"{r.cost_usd:.4f}",
            f"<code>{_e((r.commit or '')[:7])}</code>",
            _e(_first_line(r.handoff, 160)),
        ]
        for r in report.rounds
    ]
    header = [
        "round",
        "ended by",
        "steps",
        "tool calls",
        "uncached input",
        "cache reads",
        "cache writes",
        "output",
        "cost (USD)",
        "commit",
        "handoff",
    ]
    return _html_table(header, rows, {0, 2, 3, 4, 5, 6, 7, 8})


def _html_audit(report: GoalReport) -> str:
    if not report.audits:
        return "<p>No audit ran.</p>"
    parts = []
    if len(report.audits) > 1:
        items = []
        for a in report.audits[:-1]:
            failing = [f"{c['kind']} {c['target']}" for c in a["checks"] if not c["passed"]]
            verdict = (
                '<span class="ok">passed</span>'
                if a["passed"]
                else '<span class="bad">failed</span>'
            )
            items.append(
                f"<li>round {_e(a['round'])}: {verdict}"
                + (f" ({_e(', '.join(failing))})" if failing else "")
                + "</li>"
            )
        parts.append(f"<p>Earlier audits:</p><ul>{''.join(items)}</ul>")
    latest = report.audits[-1]
    verdict = (
        '<span class="ok">passed</span>' if latest["passed"] else '<span class="bad">failed</span>'
    )
    parts.append(f"<p>Latest audit (round {_e(latest['round'])}): {verdict}</p>")
    rows = [
        [
            '<span class="ok">✓</span>' if c["passed"] else '<span class="bad">✗</span>',
            _e(c["kind"]),
            f"<code>{_e(c['target'])}</code>",
            f"<pre>{_e(str(c['evidence'])[-1500:])}</pre>",
        ]
        for c in latest["checks"]
    ]
    parts.append(_html_table(["", "kind", "target", "evidence"], rows, set()))
    return "\n".join(parts)


def _html_events(events: list[dict[str, Any]], empty: str) -> str:
    if not events:
        return f"<p>{_e(empty)}</p>"
    rows = [
        [
            _e(_stamp(e["created_at"])),
            _e(e["round"] if e["round"] is not None else "-"),
            _e(e["kind"]),
            _e(e.get("weight") or 0),
            _e(e["detail"][:600]),
        ]
        for e in events
    ]
    return _html_table(["time", "round", "kind", "weight", "detail"], rows, {1, 3})


def html_report(report: GoalReport) -> str:
    """A self-contained HTML report of one goal or run, with inline SVG charts."""
    s = report.summary
    kv = "".join(
        f"<tr><td>{_e(k)}</td><td>{_badge(v) if k == 'status' else _e(v)}</td></tr>"
        for k, v in _summary_pairs(report)
    )
    other = [e for e in report.events if e["kind"] not in GUARD_KINDS | QUIET_KINDS]
    body = [
        f"<h1>relay report: goal <code>{_e(s['goal_id'])}</code> {_badge(s['status'])}</h1>",
        f"<blockquote>{_e(s['goal'].strip()[:3000])}</blockquote>",
        f'<table class="kv">{kv}</table>',
        "<h2>Final word</h2>",
        _html_final(report),
        "<h2>Tokens per round</h2>",
        _chart(chart_tokens_per_round([report]), ""),
        "<h2>Cumulative cost</h2>",
        _chart(chart_cumulative_cost([report]), ""),
        "<h2>Round timeline</h2>",
        _chart(chart_timeline([report]) if report.rounds else None, "No round yet."),
        _html_rounds(report),
        "<h2>Audit checks</h2>",
        _html_audit(report),
        "<h2>Guard events</h2>",
        _chart(chart_guard_events([report]), "No guard event: the guard saw nothing wrong."),
        _html_events(report.guard_events, "") if report.guard_events else "",
        "<h2>Events</h2>",
        _html_events(other, "None."),
    ]
    return _page(f"relay report {s['goal_id']}", body)


# --------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------


def compare_reports(
    result: CompareResult, prices: Mapping[str, Price] | None = None
) -> list[GoalReport]:
    """The :class:`GoalReport` of every run of a comparison that has a goal, labelled like the
    comparison's columns; ``prices`` as in :func:`load_goal_report`."""
    reports = []
    for row in result.runs:
        if not row.goal_id or not Path(row.store_path).exists():
            continue
        store = Store(Path(row.store_path))
        try:
            reports.append(load_goal_report(store, row.goal_id, prices=prices, label=row.label))
        finally:
            store.close()
    return reports


def compare_markdown_report(result: CompareResult, reports: Sequence[GoalReport]) -> str:
    """The comparison's Markdown (the table of ``compare.md``) followed by each run's rounds
    with their tokens."""
    parts = [compare_markdown(result).rstrip(), "", "## Tokens per round", ""]
    for rep in reports:
        parts += [f"### {rep.label}", ""]
        parts.append("| round | ended by | uncached input | cache reads | cache writes | output |")
        parts.append("|---:|---|---:|---:|---:|---:|")
        parts += [
            f"| {r.n} | {r.end_reason or 'running'} | {r.uncached_input} | {r.cached_input} | "
            f"{r.cache_write} | {r.output} |"
            for r in rep.rounds
        ]
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def compare_html(result: CompareResult, reports: Sequence[GoalReport]) -> str:
    """A self-contained HTML report of a comparison: the side-by-side table, then every chart
    with all runs on the same axes, then each run's rounds, audit and events."""
    header, rows = table(result)
    cells = [[_e(c) for c in row] for row in rows]
    numeric = set(range(1, len(header)))
    body = [
        f"<h1>relay compare <code>{_e(result.compare_id)}</code></h1>",
        f"<blockquote>{_e(result.goal[:3000])}</blockquote>",
        f"<p>Model <code>{_e(result.model)}</code>, base commit "
        f"<code>{_e(result.base_commit[:12])}</code>, {result.repeat} run(s) per mode, "
        f"{'in parallel' if result.parallel else 'one after another'}.</p>",
        _html_table(header, cells, numeric),
        "<p>Tokens as reported by the provider (or estimated at characters / 4); wall time is "
        "each goal's active time; lines changed leave out relay's own files.</p>",
        "<h2>Tokens per round</h2>",
        _chart(chart_tokens_per_round(reports), ""),
        "<h2>Cumulative cost</h2>",
        _chart(chart_cumulative_cost(reports), ""),
        "<h2>Round timeline</h2>",
        _chart(chart_timeline(reports) if any(r.rounds for r in reports) else None, "No round."),
        "<h2>Guard events</h2>",
        _chart(chart_guard_events(reports), "No guard event in any run."),
        "<h2>Runs</h2>",
    ]
    for row, rep in zip(
        [r for r in result.runs if r.goal_id and Path(r.store_path).exists()], reports, strict=True
    ):
        other = [e for e in rep.events if e["kind"] not in GUARD_KINDS | QUIET_KINDS]
        body += [
            f"<h3>{_e(rep.label)} {_badge(rep.summary['status'])}</h3>",
            f"<p>Branch <code>{_e(row.branch)}</code>, worktree <code>{_e(row.worktree)}</code>, "
            f"goal <code>{_e(row.goal_id)}</code>.</p>",
            _html_final(rep),
            "<details><summary>Rounds</summary>",
            _html_rounds(rep),
            "</details>",
            "<details><summary>Audit checks</summary>",
            _html_audit(rep),
            "</details>",
            "<details><summary>Events</summary>",
            _html_events(rep.guard_events + other, "None."),
            "</details>",
        ]
    for row in result.runs:
        if row.error:
            body.append(f"<p class='bad'>{_e(row.label)}: {_e(row.error)}</p>")
    return _page(f"relay compare {result.compare_id}", body)
