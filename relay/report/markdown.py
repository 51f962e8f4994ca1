"""The report as Markdown: of one goal or run, and of a comparison."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relay.compare import CompareResult, compare_markdown
from relay.report.data import GoalReport, stamp, summary_pairs
from relay.text import first_line


def _md(text: Any) -> str:
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def markdown_report(report: GoalReport) -> str:
    """A Markdown report of one goal or run: summary, final word, rounds with their tokens,
    the latest audit's checks, guard events and other events."""
    s = report.summary
    parts = [f"# relay report: goal {s['goal_id']}", "", f"> {_md(s['goal'])[:1000]}", ""]
    parts += ["| | |", "|---|---|"]
    parts += [f"| {k} | {_md(v)} |" for k, v in summary_pairs(report)]
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
                f"{r.usage.uncached_input} | {r.usage.cached_input} | {r.usage.cache_write} | "
                f"{r.usage.output} | {report.round_cost(r):.4f} | {(r.commit_sha or '')[:7]} | "
                f"{_md(first_line(r.handoff, 120))} |"
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
            f"| {mark} | {c['kind']} | {_md(c['target'])} | {_md(first_line(c['evidence'], 160))} |"
        )
    return [*out, ""]


def _md_events(report: GoalReport) -> list[str]:
    guard = [
        [str(e["round"] or "-"), e["kind"], str(e.get("weight") or 0), _md(e["detail"])[:300]]
        for e in report.guard_events
    ]
    other = [
        [stamp(e["created_at"]), str(e["round"] or "-"), e["kind"], _md(e["detail"])[:300]]
        for e in report.other_events
    ]
    return [
        *_md_section("Guard events", ["round", "kind", "weight", "detail"], ":-:-", guard),
        *_md_section("Events", ["time", "round", "kind", "detail"], "-:--", other),
    ]


def _md_section(title: str, header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """A ``## title`` section with a table of ``rows`` (``align``: one character per column,
    ``:`` right-aligned, ``-`` left), or ``None.`` when there is no row."""
    out = [f"## {title}", ""]
    if not rows:
        return [*out, "None.", ""]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join("---:" if a == ":" else "---" for a in align) + "|")
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return [*out, ""]


def compare_markdown_report(result: CompareResult, reports: Sequence[GoalReport]) -> str:
    """The comparison's Markdown (the table of ``compare.md``) followed by each run's rounds
    with their tokens."""
    parts = [compare_markdown(result).rstrip(), "", "## Tokens per round", ""]
    for rep in reports:
        parts += [f"### {rep.label}", ""]
        parts.append("| round | ended by | uncached input | cache reads | cache writes | output |")
        parts.append("|---:|---|---:|---:|---:|---:|")
        parts += [
            f"| {r.n} | {r.end_reason or 'running'} | {r.usage.uncached_input} | "
            f"{r.usage.cached_input} | {r.usage.cache_write} | {r.usage.output} |"
            for r in rep.rounds
        ]
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"
