"""The side-by-side table of a comparison, and ``compare.md`` (SPEC §3)."""

from __future__ import annotations

import time

from relay.compare_result import CompareResult, RunRow, mode_means

__all__ = ["TABLE_ROWS", "compare_markdown", "format_cell", "markdown_table", "table"]


TABLE_ROWS: tuple[tuple[str, str], ...] = (
    ("status", "status"),
    ("rounds", "rounds"),
    ("model calls", "model_calls"),
    ("tool calls", "tool_calls"),
    ("uncached input tokens", "uncached_input"),
    ("cache reads (tokens)", "cached_input"),
    ("cache writes (tokens)", "cache_write"),
    ("output tokens", "output"),
    ("cost (USD)", "cost_usd"),
    ("wall time (s)", "elapsed_s"),
    ("audit", "audit"),
    ("lines changed (+/-)", "lines"),
)
"""``(label, field)`` of each table row, in order."""


def format_cell(row: RunRow, key: str) -> str:
    """One table cell of ``row``: integers plain, cost with 4 decimals, seconds with 1."""
    if key == "status":
        return row.status + (f" ({row.reason})" if row.reason and row.reason != row.status else "")
    if key == "lines":
        return f"+{row.lines_added} -{row.lines_removed}"
    if key == "cost_usd":
        return f"{row.cost_usd:.4f}"
    if key == "elapsed_s":
        return f"{row.elapsed_s:.1f}"
    if key == "audit":
        return row.audit
    return str(getattr(row, key))


def _format_mean(means: dict[str, float], key: str) -> str:
    if not means:
        return "-"
    if key == "status":
        return f"{int(means['complete'])} of {int(means['runs'])} complete"
    if key == "lines":
        return f"+{means['lines_added']:.1f} -{means['lines_removed']:.1f}"
    if key == "cost_usd":
        return f"{means['cost_usd']:.4f}"
    if key == "audit":
        return "-"
    return f"{means[key]:.1f}"


def table(result: CompareResult) -> tuple[list[str], list[list[str]]]:
    """The side-by-side table: ``(header, rows)``. One column per run (``relay``/``session``,
    or ``relay #k`` with repetitions; a worker's name when workers are compared), then with
    repetitions a mean column per mode or worker."""
    header = ["", *(r.label for r in result.runs)]
    means = {m: mode_means(result.runs, m) for m in result.arms}
    if result.repeat > 1:
        header += [f"{m} (mean)" for m in result.arms]
    rows = []
    for label, key in TABLE_ROWS:
        cells = [label, *(format_cell(r, key) for r in result.runs)]
        if result.repeat > 1:
            cells += [_format_mean(means[m], key) for m in result.arms]
        rows.append(cells)
    return header, rows


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""
    lines = [
        "| " + " | ".join(_md_cell(h) or " " for h in header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def compare_markdown(result: CompareResult) -> str:
    """``compare.md``: what was compared, the table, and each run's branch, worktree and final
    word (its stop message and last response)."""
    header, rows = table(result)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(result.created_at))
    limits = ", ".join(f"{k} {v}" for k, v in result.limits.items() if v is not None)
    parts = [
        f"# relay compare {result.compare_id}",
        "",
        f"- goal: {_md_cell(result.goal)[:500]}",
        f"- model: `{result.model}`",
        f"- base commit: `{result.base_commit[:12]}` in `{result.repo}`",
        f"- limits: {limits}",
        f"- runs: {result.repeat} per {result.compared}, {'in parallel' if result.parallel else 'one after another'}; {stamp}",
        "",
        markdown_table(header, rows),
        "",
        "Tokens as reported by the provider (or estimated at characters / 4 where it reports "
        "none); wall time is the goal's active time; lines changed exclude relay's own files.",
        "",
        "## Runs",
        "",
    ]
    for r in result.runs:
        parts.append(f"### {r.label}")
        parts.append("")
        parts.append(f"- branch `{r.branch}`, worktree `{r.worktree}`")
        parts.append(f"- goal `{r.goal_id}`, run `{r.run_id}`, exit code {r.exit_code}")
        if r.error:
            parts.append(f"- error: {_md_cell(r.error)}")
        if r.message:
            parts.append(f"- stop message: {_md_cell(r.message)[:600]}")
        if r.final_response:
            parts.append(f"- final response: {_md_cell(r.final_response)[:600]}")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"
