"""The supervisor: pure policy between steps and rounds (SPEC §7.1–§7.4).

No I/O here. The loop hands in counters and facts; the functions return new counters and
decisions. That makes every rule testable at and around its boundary without a model, a
repository or a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from relay.goal import MODEL_STATUSES, GoalStatus
from relay.text import counted
from relay.text_call_texts import cause_sentence


@dataclass(frozen=True)
class Counters:
    """The supervisor's counters of one goal.

    ``rounds`` counts every round of the goal (for numbering and output); ``counted_rounds``
    counts rounds since the last restart (resume or supplement) for ``max_rounds_total``.
    """

    rounds: int = 0
    counted_rounds: int = 0
    no_progress_streak: int = 0
    blocked_reports: int = 0
    auto_replies: int = 0
    rejected_in_streak: int = 0
    """The rejected ``update_goal`` calls among the streak's steps (the rest are rounds without
    a step): what the no-progress notice says happened. Not stored: a restart resets it with
    the streak."""
    text_call_rounds: int = 0
    """The rounds without a step in the streak whose answers held tool calls written as text
    that were not run (issue 14): the notice names that cause. Not stored either."""

    def restarted(self) -> Counters:
        """The counts after a supplement or a resume: round limits and blocked count restart
        from zero (SPEC §7.2, §10); the goal's round numbering goes on."""
        return replace(
            self,
            counted_rounds=0,
            no_progress_streak=0,
            blocked_reports=0,
            rejected_in_streak=0,
            text_call_rounds=0,
        )


@dataclass(frozen=True)
class LimitPolicy:
    """The limits the supervisor applies (positive integers; SPEC §7.2)."""

    max_rounds_total: int = 50
    max_no_progress: int = 5
    blocked_accept_at: int = 3
    auto_replies: int = 2

    @classmethod
    def from_limits(cls, limits: Any) -> LimitPolicy:
        """Build from a :class:`relay.config.Limits` (or any object with the same attributes)."""
        return cls(
            limits.max_rounds_total,
            limits.max_no_progress,
            limits.blocked_accept_at,
            limits.auto_replies,
        )


@dataclass(frozen=True)
class Stop:
    """A decision to end the goal: the new status, the reason and the user-facing notice."""

    status: GoalStatus
    reason: str
    message: str


def no_progress_notice(n: int, rejected: int = 0) -> str:
    """The notice of the no-progress limit ``n`` (SPEC §7.2; "1 round" for one), saying what
    made no progress: rounds without a step (SPEC's exact words), ``rejected`` update_goal
    calls, or both."""
    if rejected <= 0:
        return (
            f"Goal stopped: no step was taken in {counted(n, 'round')} in a row. "
            "Say how to continue."
        )
    if rejected >= n:
        return (
            f"Goal stopped: {counted(n, 'update_goal call')} in a row were rejected, with no "
            "other tool call between them. Say how to continue."
        )
    calls = counted(rejected, "rejected update_goal call")
    return (
        f"Goal stopped: no progress {n} times in a row ({calls} and "
        f"{counted(n - rejected, 'round')} without a step). Say how to continue."
    )


def total_rounds_notice(n: int, goal_rounds: int | None = None) -> str:
    """The exact notice of the total-rounds limit (SPEC §7.2) after ``n`` counted rounds; when
    the count restarted (resume, supplement) and the goal has ``goal_rounds`` rounds in all,
    the notice names both figures."""
    if goal_rounds is None or goal_rounds <= n:
        return (
            f"Goal stopped after {counted(n, 'round')} in total without completion. "
            "Say how to continue."
        )
    return (
        f"Goal stopped after {counted(n, 'round')} since the round count restarted "
        f"({counted(goal_rounds, 'round')} of the goal in all) without completion. "
        "Say how to continue."
    )


# steps ----------------------------------------------------------------------------------------


def after_real_tool_call(counters: Counters) -> Counters:
    """An executed real tool call resets the no-progress streak (SPEC §7.2). The blocked count
    is not reset (SPEC §7.1)."""
    return replace(counters, no_progress_streak=0, rejected_in_streak=0, text_call_rounds=0)


def after_rejected_update(counters: Counters) -> Counters:
    """A rejected ``update_goal`` adds one to the no-progress streak (SPEC §7.2)."""
    return replace(
        counters,
        no_progress_streak=counters.no_progress_streak + 1,
        rejected_in_streak=counters.rejected_in_streak + 1,
    )


class Verdict(StrEnum):
    """What the supervisor answers to an ``update_goal`` call."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DEFERRED = "deferred"
    AUDIT = "audit"
    """``complete`` asked: the audit decides (:func:`review_audit`)."""
    AUTO_REPLY = "auto_reply"
    """``needs_user_input`` answered automatically (unattended); the model goes on."""


@dataclass(frozen=True)
class UpdateDecision:
    """The supervisor's answer to one ``update_goal`` call.

    ``message`` is the tool result the model sees; ``stop`` is set when the goal ends.
    """

    verdict: Verdict
    counters: Counters
    message: str
    stop: Stop | None = None


DEFERRED_MESSAGE = (
    "deferred: update_goal was sent together with other tool calls. Those calls have run; "
    "review their results, then call update_goal again alone."
)


def review_update_goal(
    arguments: dict[str, Any],
    *,
    alone: bool,
    counters: Counters,
    limits: LimitPolicy,
    auto_reply: str | None = None,
) -> UpdateDecision:
    """Decide on one ``update_goal`` call (SPEC §7.1).

    Args:
        arguments: the call's arguments (``status``, ``summary``, ``question``, ``reason``,
            ``checklist``), already schema-checked for types.
        alone: False when the response held other tool calls too (the call is deferred).
        counters: the goal's counters before the call.
        limits: the limit policy.
        auto_reply: the unattended answer to ``needs_user_input`` (None: stop and ask).

    Returns:
        The decision. A rejection adds one to the no-progress streak; a ``blocked`` report adds
        one to the blocked count (accepted at ``limits.blocked_accept_at``); ``complete``
        returns ``Verdict.AUDIT`` and the loop then calls :func:`review_audit`.
    """
    if not alone:
        return UpdateDecision(Verdict.DEFERRED, counters, DEFERRED_MESSAGE)
    status = arguments.get("status")
    summary = str(arguments.get("summary") or "").strip()
    if status not in {s.value for s in MODEL_STATUSES}:
        return _reject(
            counters,
            f"rejected: status {status!r} is not allowed. update_goal accepts only complete, "
            "needs_user_input or blocked; pausing, resuming and clearing belong to the user.",
        )
    if status == GoalStatus.COMPLETE:
        return UpdateDecision(Verdict.AUDIT, counters, "the completion audit runs")
    if status == GoalStatus.NEEDS_USER_INPUT:
        question = str(arguments.get("question") or "").strip() or summary
        if not question:
            return _reject(counters, "rejected: needs_user_input requires a question for the user.")
        if auto_reply is not None and counters.auto_replies < limits.auto_replies:
            counters = replace(counters, auto_replies=counters.auto_replies + 1)
            return UpdateDecision(
                Verdict.AUTO_REPLY,
                counters,
                f"The user is not available; automatic reply: {auto_reply}",
            )
        return UpdateDecision(
            Verdict.ACCEPTED,
            counters,
            "accepted: the question goes to the user; the goal waits for the answer.",
            Stop(GoalStatus.NEEDS_USER_INPUT, "needs_user_input", question),
        )
    # blocked
    reports = counters.blocked_reports + 1
    counters = replace(counters, blocked_reports=reports)
    reason = str(arguments.get("reason") or "").strip() or summary or "no reason given"
    if reports >= limits.blocked_accept_at:
        return UpdateDecision(
            Verdict.ACCEPTED,
            counters,
            f"accepted: the goal is blocked ({reason}).",
            Stop(GoalStatus.BLOCKED, "blocked", f"Blocked: {reason}"),
        )
    return _reject(
        counters,
        f"rejected: blocked report {reports} of {limits.blocked_accept_at} is not accepted yet. "
        "Try another way to reach the goal; if it really cannot be done, say so again with "
        "what you tried.",
    )


def _reject(counters: Counters, message: str) -> UpdateDecision:
    return UpdateDecision(Verdict.REJECTED, after_rejected_update(counters), message)


def review_audit(passed: bool, failures: str, summary: str, counters: Counters) -> UpdateDecision:
    """Turn an audit result into the decision on ``complete`` (SPEC §7.1, §9).

    Args:
        passed: whether every check passed.
        failures: the failing checks with their evidence, as text for the model.
        summary: the model's summary (the message of a completed goal).
        counters: counters before the call.
    """
    if passed:
        return UpdateDecision(
            Verdict.ACCEPTED,
            counters,
            "accepted: the audit passed; the goal is complete.",
            Stop(GoalStatus.COMPLETE, "complete", summary or "Goal complete."),
        )
    return _reject(
        counters,
        "rejected: the completion audit failed. Fix these and call update_goal again "
        f"when they pass:\n{failures}",
    )


# rounds ---------------------------------------------------------------------------------------


def check_streak(counters: Counters, limits: LimitPolicy) -> Stop | None:
    """The no-progress stop, when the streak has reached its limit (SPEC §7.2)."""
    if counters.no_progress_streak >= limits.max_no_progress:
        notice = no_progress_notice(limits.max_no_progress, counters.rejected_in_streak)
        return Stop(
            GoalStatus.LIMIT_REACHED, "no_progress", _with_cause(notice, counters.text_call_rounds)
        )
    return None


def _with_cause(notice: str, text_call_rounds: int) -> str:
    """``notice`` naming tool calls written as text as the cause when ``text_call_rounds`` of
    the rounds it counts had them (issue 14)."""
    if text_call_rounds <= 0:
        return notice
    head, said, tail = notice.rpartition(" Say how to continue.")
    if not said:
        return f"{notice} {cause_sentence(text_call_rounds)}"
    return f"{head} {cause_sentence(text_call_rounds)}{said}{tail}"


def step_stop(decided: Stop | None, counters: Counters, limits: LimitPolicy) -> Stop | None:
    """The stop after one step (SPEC §7.1, §7.2): the one its ``update_goal`` decided
    (``decided``), else the no-progress stop when the step's rejections (``counters`` after the
    step) reached the limit."""
    return decided or check_streak(counters, limits)


def round_end_stop(
    *,
    steps: Stop | None,
    limits: Stop | None,
    repository: Stop | None = None,
    guard: Stop | None = None,
    user: Stop | None = None,
) -> Stop | None:
    """The stop that ends the goal at a round's end, by the order of SPEC §4: the supervisor's
    first (a stop decided during the round's ``steps``, then the round ``limits`` of
    :func:`end_of_round`), then a ``repository`` relay could not put back, then the
    ``guard``'s, then the ``user``'s (a pause or clear that came during the round's
    bookkeeping). None: the goal goes on."""
    for stop in (steps, limits, repository, guard, user):
        if stop is not None:
            return stop
    return None


def end_of_round(
    counters: Counters, *, called_tools: bool, limits: LimitPolicy, text_calls: bool = False
) -> tuple[Counters, Stop | None]:
    """Apply the round limits after a round (SPEC §7.2).

    Args:
        counters: counters after the round's steps (step-level changes already applied).
        called_tools: True when the model called any tool other than ``get_goal``/``handoff``
            in the round (real tools or ``update_goal``); a round without is +1 no progress.
        limits: the limit policy.
        text_calls: True when the round's answers held tool calls as text that were not run
            (issue 14): a round without a step then counts in ``text_call_rounds``, and a
            limit's notice names that cause.

    Returns:
        The new counters (``rounds`` and ``counted_rounds`` + 1) and a stop, if a limit is
        reached: no progress is checked first, then the total.
    """
    counters = replace(
        counters, rounds=counters.rounds + 1, counted_rounds=counters.counted_rounds + 1
    )
    if not called_tools:
        counters = replace(
            counters,
            no_progress_streak=counters.no_progress_streak + 1,
            text_call_rounds=counters.text_call_rounds + int(text_calls),
        )
    stop = check_streak(counters, limits)
    if stop is None and counters.counted_rounds >= limits.max_rounds_total:
        notice = total_rounds_notice(limits.max_rounds_total, counters.rounds)
        notice = _with_cause(notice, counters.text_call_rounds)
        stop = Stop(GoalStatus.LIMIT_REACHED, "total_rounds", notice)
    return counters, stop


def rounds_remaining_warning(counted_round: int, limits: LimitPolicy) -> str | None:
    """The warning of the last five rounds before the total limit (SPEC §7.3), for the round
    numbered ``counted_round`` (1-based, since the last restart); None before them."""
    remaining = limits.max_rounds_total - counted_round
    if remaining >= 5:
        return None
    if remaining == 0:
        after = "This is the last round before the round limit stops the goal."
    else:
        after = f"{remaining} round{'s remain' if remaining != 1 else ' remains'} after this one."
    return (
        f"{after} Finish the goal and call update_goal with complete, or report the state "
        "through update_goal with needs_user_input."
    )
