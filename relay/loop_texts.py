"""Texts the loop writes from facts (SPEC §4, §5, §11): the ``get_goal`` answer, a round's
commit subject, the automatic handoff and its error line. Pure functions, no I/O."""

from __future__ import annotations

from typing import Any

from relay.budgets import BudgetPolicy
from relay.context import Prompts
from relay.loop_state import RoundState
from relay.models.base import ToolCall
from relay.store import GoalRecord
from relay.supervisor import Counters, LimitPolicy, Stop
from relay.text import first_line
from relay.tools import ToolResult

NOTABLE_STOPS = {
    "max_tokens": "the answer hit the output token limit and was cut off",
    "refusal": "the model refused to answer",
    "context_window": "the request exceeded the model's context window",
}
"""Provider stop reasons worth an event: the run goes on, and the user can see why a step
looks odd."""

SUBJECT_CHARS = 72
"""The longest commit subject; a longer one is cut with an ellipsis."""


def shown_paths(paths: list[str], limit: int = 5) -> str:
    """``a, b, c and 4 more``: the first ``limit`` paths, then how many more."""
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(paths[:limit]) + more


def commit_message(round_n: int, note: str, stop: Stop | None) -> tuple[str, str]:
    """The subject and body of round ``round_n``'s commit. The subject names the goal's new
    status when it ends, else the first line of the handoff ``note`` (at most
    :data:`SUBJECT_CHARS` characters); the body is the note, unless the subject says all."""
    headline = first_line(note, default="no note")
    if stop is not None:
        headline = f"{stop.status}: " + first_line(stop.message, default=stop.reason)
    subject = f"relay: round {round_n}: {headline}"
    if len(subject) > SUBJECT_CHARS:
        subject = subject[: SUBJECT_CHARS - 1] + "…"
    return subject, note if note.strip() != headline else ""


def auto_handoff(prompts: Prompts, rnd: RoundState, files: list[str]) -> str:
    """The handoff written from facts when the model wrote none (SPEC §4): the round's tool
    calls, its last ten commands with their exit codes, the changed ``files``, the last
    error."""
    calls = f"{rnd.tool_calls} tool call{'s' if rnd.tool_calls != 1 else ''}"
    summary = f"{calls}, " + (f"changed {shown_paths(files)}" if files else "no file changed")
    lines = []
    if rnd.commands:
        lines.append("Commands run:")
        for command, code in rnd.commands[-10:]:
            shown = command if len(command) <= 120 else command[:119] + "…"
            lines.append(f"- `{shown}` → exit {code if code is not None else 'none'}")
    else:
        lines.append("No commands run.")
    lines.append("Files changed: " + (", ".join(files[:20]) if files else "none"))
    if rnd.last_error:
        lines.append(f"Last error: {rnd.last_error}")
    return prompts.render("auto_handoff", summary=summary, facts="\n".join(lines)).strip()


def error_line(call: ToolCall, result: ToolResult) -> str:
    """One line naming a failed tool call and its outcome, for the automatic handoff."""
    lines = [
        ln.strip() for ln in result.content.splitlines() if ln.strip() and not ln.startswith("---")
    ]
    if call.name == "shell":
        command = " ".join(str(call.arguments.get("command", "")).split())[:100]
        last = lines[-1][:200] if len(lines) > 1 else ""
        return f"`{command}` → {lines[0] if lines else 'failed'}" + (f": {last}" if last else "")
    return f"{call.name}: {lines[0][:250] if lines else 'failed'}"


def goal_summary(
    goal: GoalRecord,
    counters: Counters,
    limits: LimitPolicy,
    budgets: BudgetPolicy,
    *,
    tokens_used: int,
    elapsed_s: float,
    audit: str,
) -> str:
    """The ``get_goal`` answer (SPEC §5): the goal, its supplements, status, counters against
    their limits, tokens and time used against their budgets, the latest audit (``audit``,
    as :func:`relay.context.format_audit` writes it)."""
    lines = ["Goal (the user's words):", goal.text.strip()]
    supplements: list[dict[str, Any]] = goal.supplements
    for i, s in enumerate(supplements, 1):
        lines.append(f"Supplement {i} ({s['source']}): {s['text'].strip()}")
    budget = budgets.token_budget
    time_budget = budgets.time_budget_s
    lines += [
        f"Status: {goal.status}",
        f"Round {counters.counted_rounds + 1} of {limits.max_rounds_total}",
        f"No-progress streak: {counters.no_progress_streak} of {limits.max_no_progress}",
        f"Blocked reports: {counters.blocked_reports} (accepted at {limits.blocked_accept_at})",
        f"Tokens used: {tokens_used}" + (f" of {budget}" if budget else " (no token budget)"),
        f"Time used: {elapsed_s:.0f} s" + (f" of {time_budget:.0f} s" if time_budget else ""),
        "Latest audit: " + audit,
    ]
    return "\n".join(lines)
