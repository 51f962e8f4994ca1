"""Reports of a goal, a run or a comparison: Markdown, and self-contained HTML with charts.

The charts are drawn by matplotlib (Agg, rendered to SVG) and embedded inline, so the HTML file
needs nothing from the network: tokens per round (stacked uncached input / cache writes /
cache reads / output), cumulative cost, a round timeline coloured by how each round ended,
and guard events. A comparison draws every run on the same axes. Everything is read from the
store (goals, rounds, per-round sums of the steps, events, audits); nothing is taken from the
model's words.

Modules: :mod:`relay.report.data` (what a report shows, read from the store),
:mod:`relay.report.charts`, :mod:`relay.report.markdown`, :mod:`relay.report.page` (HTML).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from relay.report.charts import (
    chart_cumulative_cost,
    chart_guard_events,
    chart_timeline,
    chart_tokens_per_round,
)
from relay.report.data import (
    GUARD_KINDS,
    QUIET_KINDS,
    TOKEN_KINDS,
    GoalReport,
    load_goal_report,
    resolve_target,
)
from relay.report.markdown import compare_markdown_report, markdown_report
from relay.report.page import compare_html, html_report
from relay.store import Store

if TYPE_CHECKING:
    from relay.compare import CompareResult
    from relay.config import Price


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


__all__ = [
    "GUARD_KINDS",
    "QUIET_KINDS",
    "TOKEN_KINDS",
    "GoalReport",
    "chart_cumulative_cost",
    "chart_guard_events",
    "chart_timeline",
    "chart_tokens_per_round",
    "compare_html",
    "compare_markdown_report",
    "compare_reports",
    "html_report",
    "load_goal_report",
    "markdown_report",
    "resolve_target",
]
