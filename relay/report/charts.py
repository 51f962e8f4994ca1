"""The report's charts: matplotlib (Agg) rendered to SVG fragments for inline HTML, so a
report needs nothing from the network. One or several series (a comparison) share the axes."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from relay.report.data import TOKEN_KINDS, GoalReport

SERIES_HATCHES = ("", "///", "...", "xxx", "\\\\\\", "++")
SERIES_COLOURS = ("#1f4e9c", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#7f8c8d")
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P")
SERIES_LINES = ("-", "--", ":", "-.", "-", "--")
REASON_COLOURS = {
    "handoff": "#4C9F70",
    "no_tool_call": "#A0A0A0",
    "text_tool_call": "#C8A2C8",
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
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=20, min_n_ticks=1))
    ax.set_xlabel("round")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def chart_tokens_per_round(series: Sequence[GoalReport]) -> str:
    """Stacked bars of the tokens of each round (uncached input, cache writes, cache reads,
    output); several series side by side per round, told apart by hatching. SVG text."""
    kinds = [
        k for k in TOKEN_KINDS if any(getattr(r.usage, k[0]) for s in series for r in s.rounds)
    ] or [TOKEN_KINDS[0]]
    fig = _figure()
    ax = fig.add_subplot()
    n = max(1, len(series))
    width = 0.8 / n
    for i, s in enumerate(series):
        xs = [r.n - 0.4 + width * (i + 0.5) for r in s.rounds]
        bottom = [0] * len(s.rounds)
        for key, _, colour in kinds:
            values = [getattr(r.usage, key) for r in s.rounds]
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
            total += s.round_cost(r) if priced else r.usage.budget_tokens
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
