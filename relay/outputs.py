"""The published shapes of relay's machine-readable outputs (SPEC §12): one pydantic model per
output, which the code builds its output through, ``relay schema NAME`` prints as JSON Schema
and docs/outputs.md is generated from (:mod:`relay.outputs_docs`).

=============  ==========================================================================
name           output
=============  ==========================================================================
``result``     the object of ``relay run --json`` and ``relay resume --json``
``status``     the object of ``relay status --json`` (a goal, or none yet)
``transcript`` one line of a run's ``transcript.jsonl`` (one model call)
``batch``      the object of ``relay batch --json``
``events``     one line of ``relay log --json`` (an event or a step of a run)
=============  ==========================================================================

The models are strict: every field is declared with its type (a key that is not declared is
an error, so output and documentation cannot drift apart), and a field that may be absent or
null says so. Adding a field is adding it here, with its docstring: the schema, the docs and
the tests follow.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, RootModel

from relay.output_lines import (
    LogEvent,
    LogLine,
    LogStep,
    LogToolCall,
    Output,
    TranscriptError,
    TranscriptLine,
    TranscriptResponse,
)

__all__ = [
    "SCHEMAS",
    "Audit",
    "AuditCheck",
    "BatchGoal",
    "BatchOutput",
    "Commit",
    "GoalEvent",
    "GoalResult",
    "GoalStatusOutput",
    "LogEvent",
    "LogLine",
    "LogStep",
    "LogToolCall",
    "NoGoalStatus",
    "Output",
    "RunResult",
    "StatusOutput",
    "Supplement",
    "TextToolCalls",
    "Tokens",
    "TranscriptError",
    "TranscriptLine",
    "TranscriptResponse",
]

Status = Literal[
    "active",
    "complete",
    "needs_user_input",
    "blocked",
    "limit_reached",
    "budget_limited",
    "terminated",
    "failed",
    "paused",
    "cleared",
]


class Tokens(Output):
    """Token usage of the goal (README, "Statuses and limits": budgets)."""

    counted: int
    """What ``limits.token_budget`` counts: uncached input + cache writes + output."""
    uncached_input: int
    """Input tokens neither read from nor written to the prompt cache."""
    cache_write: int
    """Input tokens written to the prompt cache."""
    cached_input: int
    """Input tokens read from the prompt cache (reported, not counted in the token budget)."""
    output: int
    """Output tokens."""


class AuditCheck(Output):
    """One check of the completion audit (docs/audit.md)."""

    kind: str
    """``file``, ``command``, ``changed``, ``tests`` (the discovered test command), ``tamper``,
    ``suspicious`` (code that ends, traces or detects the test run) or ``evidence``."""
    target: str
    """What was checked: a path, a command or a glob."""
    passed: bool
    """Whether the check passed."""
    evidence: str
    """Exit code and output tail, path, or file and line."""


class Audit(Output):
    """The goal's latest completion audit (docs/audit.md)."""

    passed: bool
    """Whether every check passed."""
    round: int | None
    """The round it ran after (null for an imported audit)."""
    checks: list[AuditCheck]
    """Its checks."""
    deliverables_checked: bool
    """Whether the goal had deliverables for the audit to check (false: only the fallback
    checks of docs/audit.md §3 ran, a change since the goal started and the detected tests)."""
    note: str | None
    """Said when no deliverables were checked: what the audit checked instead, and how to add
    deliverables (null when deliverables were checked)."""


class GoalEvent(Output):
    """One event of the goal: a guard event, a warning, an API error, a status change
    (docs/guard.md)."""

    kind: str
    """``loop``, ``drift``, ``tool_failures``, ``api_errors``, ``tamper``, ``warning``,
    ``status``, … (docs/guard.md lists them)."""
    round: int | None
    """The round it happened in (null: between rounds)."""
    detail: str
    """What happened, in words."""


class Commit(Output):
    """A round commit on the goal's branch."""

    round: int
    """The round."""
    sha: str
    """The commit id."""


class Supplement(Output):
    """Text added to the goal while it ran (inbox file, goal-file edit, ``relay add``)."""

    text: str
    """The text."""
    source: str
    """Where it came from."""
    created_at: float
    """When it was added (UNIX seconds)."""


class TextToolCalls(Output):
    """Answers that held tool calls written as text instead of real tool calls."""

    rounds: list[int]
    """The rounds with such answers, in order."""
    warning: str | None
    """The warning the user got (once per goal, from the second such round); null before."""


class GoalResult(Output):
    """A goal as relay reports it (SPEC §12); :func:`relay.json_output.goal_result`."""

    goal_id: str
    """The goal's id."""
    goal: str
    """The goal's text."""
    status: Status
    """The goal's status (README, "Statuses and limits")."""
    reason: str | None
    """Why it has that status (e.g. ``total_rounds``, ``cost_budget``, ``audit_passed``)."""
    message: str | None
    """The message for a person (what stopped the goal, how to continue)."""
    question: str | None
    """With ``needs_user_input``: the model's question."""
    rounds: int
    """Rounds run."""
    no_progress_streak: int
    """Rounds in a row without progress."""
    blocked_reports: int
    """``blocked`` reports of the model so far."""
    model: str
    """``PROVIDER:MODEL``."""
    mode: Literal["relay", "session"]
    """The context mode."""
    worker: Literal["builtin", "claude-code", "codex"]
    """Who did the rounds' work: relay's own tools or an agent CLI (docs/workers.md)."""
    limits: dict[str, int | float | str | None]
    """The effective limits stored with the goal (keys of ``limits`` in relay.yaml)."""
    tokens: Tokens
    """Token usage."""
    cache_note: str | None
    """Set when the provider reported no cache use at all over the goal (every prompt token
    was counted); null otherwise."""
    cost_usd: float
    """Cost in USD (0 when the model has no known price)."""
    elapsed_s: float
    """Seconds the goal was active."""
    audit: Audit | None
    """The latest completion audit, or null."""
    diagnosis: str | None
    """The guard's diagnosis when it terminated the goal."""
    final_response: str
    """The text of the model's last answer that said something."""
    events: list[GoalEvent]
    """The goal's events, oldest first."""
    text_tool_calls: TextToolCalls | None
    """Null, or the rounds whose answers held tool calls written as text and the warning the
    user got (issue 14; README, "Local models")."""
    branch: str | None
    """The goal's branch."""
    sandbox: str | None
    """The sandbox of the latest run: ``bwrap`` or ``off``."""
    base_commit: str | None
    """The commit the goal started from."""
    commits: list[Commit]
    """Round commits that are on the goal's branch, oldest first."""
    supplements: list[Supplement]
    """Text added to the goal while it ran, oldest first."""
    updated_at: str
    """Last change of the goal (ISO 8601, UTC)."""


class RunResult(GoalResult):
    """``relay run --json`` and ``relay resume --json``: the goal after the run."""

    run_dir: str
    """The run folder (transcript.jsonl, summary.md)."""


class GoalStatusOutput(GoalResult):
    """``relay status --json`` when there is a goal: the open one, else the latest."""

    running: bool
    """Whether a run of the goal is live."""
    inbox: str
    """The inbox folder: a text file dropped there is added to the goal."""


class NoGoalStatus(Output):
    """``relay status --json`` before any goal."""

    goal_id: None
    """Always null."""
    status: None
    """Always null."""
    inbox: str
    """The inbox folder."""


class StatusOutput(RootModel[GoalStatusOutput | NoGoalStatus]):
    """``relay status --json``: the goal, or ``{goal_id: null, status: null, inbox}``."""


class BatchGoal(Output):
    """How one goal of a batch ended."""

    name: str
    """The goal's name in the batch file."""
    branch: str
    """Its branch (on the batch's git remote)."""
    exit_code: int
    """Its exit code (README, "Exit codes"); 1 for ``error`` and ``lost`` (130 when cancelled
    before it ran)."""
    status: str
    """Its status; ``error`` when relay refused to run it; ``lost`` when its attempt never came
    back or its last commits are not on the remote (docs/batch.md)."""
    reason: str | None
    """Why it has that status (for ``lost``: ``killed_worker``, ``broken_pool``,
    ``cancelled``, ``timeout``, ``engine_error`` or ``not_pushed``)."""
    rounds: int
    """Rounds run."""
    tokens: int
    """Tokens counted by the token budget."""
    cost_usd: float
    """Cost in USD."""
    message: str
    """The first line of the goal's message, or the error."""
    pushed: bool
    """Whether the remote's branch is the head the goal's run left."""
    head: str | None
    """The branch's head commit the run left (full sha), if any."""
    host: str | None
    """The host name of the worker that ran it."""
    attempt: int
    """The attempt that answered (1 for the first; the engine's retries count on)."""
    summary: str | None
    """The run's morning summary (Markdown), as ``summary.md`` of its run folder."""
    result: RunResult | None
    """The run's ``relay run --json`` object, or null when relay never answered."""


class BatchOutput(Output):
    """The last line of ``relay batch --json`` (each line before it is one goal's row, as it
    ended)."""

    exit_code: int
    """The worst exit code of the goals (relay batch's own)."""
    goals: list[BatchGoal]
    """One entry per goal, in the order of the batch file."""


SCHEMAS: dict[str, type[BaseModel]] = {
    "result": RunResult,
    "status": StatusOutput,
    "transcript": TranscriptLine,
    "batch": BatchOutput,
    "events": LogLine,
}
"""``relay schema NAME`` → the model of that output."""
