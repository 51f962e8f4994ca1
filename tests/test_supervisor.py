"""The supervisor's rules at and around their boundaries (SPEC §7.1–§7.4).

Every rule is checked one step below its threshold and exactly at it, through what a user
notices: the status a goal ends with, the reason, the exact notice, the counts.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from relay.budgets import BudgetPolicy, budget_reached
from relay.config import Limits
from relay.goal import MODEL_STATUSES, GoalStatus
from relay.supervisor import (
    DEFERRED_MESSAGE,
    Counters,
    LimitPolicy,
    Stop,
    UpdateDecision,
    Verdict,
    after_real_tool_call,
    after_rejected_update,
    check_streak,
    end_of_round,
    no_progress_notice,
    review_audit,
    review_update_goal,
    rounds_remaining_warning,
    total_rounds_notice,
)

LIMITS = LimitPolicy()
"""Defaults of SPEC §7: 50 rounds, 5 without progress, blocked at the 3rd, 2 auto-replies."""

SOME = Counters(rounds=7, counted_rounds=4, no_progress_streak=2, blocked_reports=1, auto_replies=1)
"""Non-zero counters, so that an unwanted reset or change is visible."""


def one_more_rejected(counters: Counters) -> Counters:
    """``counters`` after one rejected update_goal: one more in the streak, and it says so."""
    return replace(
        counters,
        no_progress_streak=counters.no_progress_streak + 1,
        rejected_in_streak=counters.rejected_in_streak + 1,
    )


AUTO = "No one is available. Choose the most reasonable option and continue."


def update(
    arguments: dict[str, Any],
    counters: Counters = SOME,
    *,
    alone: bool = True,
    limits: LimitPolicy = LIMITS,
    auto_reply: str | None = None,
) -> UpdateDecision:
    return review_update_goal(
        arguments, alone=alone, counters=counters, limits=limits, auto_reply=auto_reply
    )


def blocked(counters: Counters, limits: LimitPolicy, reason: str = "no network") -> UpdateDecision:
    return update({"status": "blocked", "reason": reason}, counters, limits=limits)


# defaults and construction --------------------------------------------------------------------


def test_default_limits_are_those_of_the_spec() -> None:
    assert LIMITS.max_rounds_total == 50
    assert LIMITS.max_no_progress == 5
    assert LIMITS.blocked_accept_at == 3
    assert LIMITS.auto_replies == 2
    assert Counters() == Counters(0, 0, 0, 0, 0)


def test_limit_policy_from_config_limits_keeps_every_limit_in_its_place() -> None:
    limits = Limits(max_rounds_total=11, max_no_progress=7, blocked_accept_at=4, auto_replies=9)
    assert LimitPolicy.from_limits(limits) == LimitPolicy(11, 7, 4, 9)
    other = SimpleNamespace(
        max_rounds_total=3, max_no_progress=2, blocked_accept_at=1, auto_replies=5
    )
    assert LimitPolicy.from_limits(other) == LimitPolicy(3, 2, 1, 5)


# update_goal: deferral -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"status": "complete", "summary": "done"},
        {"status": "needs_user_input", "question": "which db?"},
        {"status": "blocked", "reason": "no network"},
        {"status": "paused"},
        {"status": ""},
        {},
    ],
)
def test_update_goal_with_other_calls_is_deferred_and_changes_no_count(
    arguments: dict[str, Any],
) -> None:
    counters = replace(SOME, blocked_reports=LIMITS.blocked_accept_at - 1)
    decision = update(arguments, counters, alone=False, auto_reply=AUTO)
    assert decision.verdict is Verdict.DEFERRED
    assert decision.counters == counters
    assert decision.stop is None
    assert decision.message == DEFERRED_MESSAGE
    assert decision.message.startswith("deferred:")
    assert "alone" in decision.message


def test_deferred_blocked_report_does_not_count_towards_acceptance() -> None:
    limits = LimitPolicy(blocked_accept_at=2)
    counters = Counters(blocked_reports=1)
    for _ in range(3):
        decision = update({"status": "blocked"}, counters, alone=False, limits=limits)
        assert decision.verdict is Verdict.DEFERRED
        counters = decision.counters
    assert counters.blocked_reports == 1
    assert counters.no_progress_streak == 0
    # the next report sent alone is the 2nd and is accepted
    decision = blocked(counters, limits)
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.stop is not None


def test_deferral_does_not_use_an_auto_reply() -> None:
    counters = Counters(auto_replies=0)
    decision = update(
        {"status": "needs_user_input", "question": "q?"}, counters, alone=False, auto_reply=AUTO
    )
    assert decision.verdict is Verdict.DEFERRED
    assert decision.counters.auto_replies == 0


# update_goal: disallowed statuses ------------------------------------------------------------

DISALLOWED_ENUM = sorted(s.value for s in GoalStatus if s not in MODEL_STATUSES)


def test_model_statuses_are_exactly_complete_needs_user_input_blocked() -> None:
    assert {s.value for s in MODEL_STATUSES} == {"complete", "needs_user_input", "blocked"}
    assert set(DISALLOWED_ENUM) == {
        "active",
        "paused",
        "cleared",
        "limit_reached",
        "budget_limited",
        "terminated",
        "failed",
    }


@pytest.mark.parametrize(
    "status",
    [
        *DISALLOWED_ENUM,
        GoalStatus.PAUSED,
        GoalStatus.ACTIVE,
        "",
        None,
        "COMPLETE",
        "Complete",
        "BLOCKED",
        "Needs_User_Input",
        "needs-user-input",
        "done",
        "resume",
        "clear",
    ],
)
def test_disallowed_status_is_rejected_with_one_more_streak(status: Any) -> None:
    decision = update({"status": status, "summary": "all done", "question": "q?"}, SOME)
    assert decision.verdict is Verdict.REJECTED
    assert decision.stop is None
    assert decision.counters == one_more_rejected(SOME)
    assert decision.message.startswith("rejected:")
    assert repr(status) in decision.message
    assert "complete, needs_user_input or blocked" in decision.message


def test_missing_status_is_rejected() -> None:
    decision = update({"summary": "done"}, SOME)
    assert decision.verdict is Verdict.REJECTED
    assert decision.counters.no_progress_streak == SOME.no_progress_streak + 1
    assert "None" in decision.message


def test_rejections_add_up_one_by_one() -> None:
    counters = Counters()
    for expected in range(1, 6):
        counters = update({"status": "paused"}, counters).counters
        assert counters.no_progress_streak == expected
    assert counters.blocked_reports == 0
    assert counters.rounds == 0


# update_goal: complete -----------------------------------------------------------------------


@pytest.mark.parametrize("status", ["complete", GoalStatus.COMPLETE])
def test_complete_goes_to_the_audit_without_changing_counts(status: Any) -> None:
    decision = update({"status": status, "summary": "done"}, SOME)
    assert decision.verdict is Verdict.AUDIT
    assert decision.counters == SOME
    assert decision.stop is None


def test_complete_goes_to_the_audit_even_without_summary() -> None:
    decision = update({"status": "complete"}, SOME)
    assert decision.verdict is Verdict.AUDIT
    assert decision.counters == SOME


# update_goal: needs_user_input ---------------------------------------------------------------


def test_needs_user_input_is_accepted_with_the_question() -> None:
    decision = update(
        {"status": "needs_user_input", "question": "  Which database?  ", "summary": "half done"},
        SOME,
    )
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.counters == SOME
    assert decision.stop == Stop(GoalStatus.NEEDS_USER_INPUT, "needs_user_input", "Which database?")
    assert decision.message.startswith("accepted:")


@pytest.mark.parametrize("question", [None, "", "   \n"])
def test_needs_user_input_falls_back_to_the_summary(question: str | None) -> None:
    arguments: dict[str, Any] = {"status": "needs_user_input", "summary": " Pick a db. "}
    if question is not None:
        arguments["question"] = question
    decision = update(arguments, SOME)
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.stop == Stop(GoalStatus.NEEDS_USER_INPUT, "needs_user_input", "Pick a db.")


@pytest.mark.parametrize(
    "arguments",
    [
        {"status": "needs_user_input"},
        {"status": "needs_user_input", "question": "", "summary": ""},
        {"status": "needs_user_input", "question": "  ", "summary": "\t\n"},
        {"status": "needs_user_input", "question": None, "summary": None},
    ],
)
def test_needs_user_input_without_question_or_summary_is_rejected(
    arguments: dict[str, Any],
) -> None:
    decision = update(arguments, SOME, auto_reply=AUTO)
    assert decision.verdict is Verdict.REJECTED
    assert decision.stop is None
    assert decision.counters == one_more_rejected(SOME)
    assert "question" in decision.message
    # a rejected question does not use up an auto-reply
    assert decision.counters.auto_replies == SOME.auto_replies


@pytest.mark.parametrize("allowed", [1, 2, 3, 5])
def test_auto_reply_is_given_allowed_times_then_the_goal_stops(allowed: int) -> None:
    limits = LimitPolicy(auto_replies=allowed)
    counters = Counters(no_progress_streak=1)
    arguments = {"status": "needs_user_input", "question": "Which db?"}
    for n in range(1, allowed + 1):
        decision = update(arguments, counters, limits=limits, auto_reply=AUTO)
        assert decision.verdict is Verdict.AUTO_REPLY, n
        assert decision.stop is None
        assert AUTO in decision.message
        assert decision.counters == replace(counters, auto_replies=n)
        counters = decision.counters
    assert counters.auto_replies == allowed
    decision = update(arguments, counters, limits=limits, auto_reply=AUTO)
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.stop == Stop(GoalStatus.NEEDS_USER_INPUT, "needs_user_input", "Which db?")
    assert decision.counters == counters


def test_without_auto_reply_the_first_question_stops_the_goal() -> None:
    decision = update(
        {"status": "needs_user_input", "question": "q?"}, Counters(), limits=LimitPolicy()
    )
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.stop is not None
    assert decision.stop.status is GoalStatus.NEEDS_USER_INPUT
    assert decision.counters.auto_replies == 0


def test_auto_reply_one_below_the_limit_still_replies() -> None:
    limits = LimitPolicy(auto_replies=2)
    below = update(
        {"status": "needs_user_input", "question": "q?"},
        Counters(auto_replies=1),
        limits=limits,
        auto_reply=AUTO,
    )
    assert below.verdict is Verdict.AUTO_REPLY
    at = update(
        {"status": "needs_user_input", "question": "q?"},
        Counters(auto_replies=2),
        limits=limits,
        auto_reply=AUTO,
    )
    assert at.verdict is Verdict.ACCEPTED
    assert at.stop is not None


# update_goal: blocked ------------------------------------------------------------------------


@pytest.mark.parametrize("accept_at", [1, 2, 3, 5])
def test_blocked_is_rejected_below_the_limit_and_accepted_exactly_at_it(accept_at: int) -> None:
    limits = LimitPolicy(blocked_accept_at=accept_at, max_no_progress=50)
    counters = Counters()
    for n in range(1, accept_at):
        decision = blocked(counters, limits)
        assert decision.verdict is Verdict.REJECTED, n
        assert decision.stop is None
        assert decision.counters.blocked_reports == n
        assert decision.counters.no_progress_streak == counters.no_progress_streak + 1
        assert f"blocked report {n} of {accept_at}" in decision.message
        assert "another way" in decision.message
        counters = decision.counters
    decision = blocked(counters, limits, reason="  the API key is revoked ")
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.counters.blocked_reports == accept_at
    assert decision.counters.no_progress_streak == counters.no_progress_streak
    assert decision.stop == Stop(GoalStatus.BLOCKED, "blocked", "Blocked: the API key is revoked")
    assert decision.message == "accepted: the goal is blocked (the API key is revoked)."


@pytest.mark.parametrize("accept_at", [1, 2, 3, 5])
def test_blocked_one_below_and_at_the_limit_from_stored_counts(accept_at: int) -> None:
    limits = LimitPolicy(blocked_accept_at=accept_at)
    if accept_at > 1:
        below = blocked(Counters(blocked_reports=accept_at - 2), limits)
        assert below.verdict is Verdict.REJECTED
        assert below.counters.blocked_reports == accept_at - 1
    at = blocked(Counters(blocked_reports=accept_at - 1), limits)
    assert at.verdict is Verdict.ACCEPTED
    assert at.stop is not None
    assert at.stop.status is GoalStatus.BLOCKED


@pytest.mark.parametrize("accept_at", [2, 3, 5])
def test_real_tool_calls_do_not_reset_the_blocked_count(accept_at: int) -> None:
    limits = LimitPolicy(blocked_accept_at=accept_at, max_no_progress=50)
    counters = Counters()
    for n in range(1, accept_at):
        decision = blocked(counters, limits)
        assert decision.verdict is Verdict.REJECTED
        counters = after_real_tool_call(decision.counters)
        counters, stop = end_of_round(counters, called_tools=True, limits=limits)
        assert stop is None
        assert counters.no_progress_streak == 0
        assert counters.blocked_reports == n
    decision = blocked(counters, limits)
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.stop is not None
    assert decision.stop.reason == "blocked"


def test_after_real_tool_call_resets_only_the_streak() -> None:
    counters = Counters(
        rounds=9, counted_rounds=8, no_progress_streak=4, blocked_reports=2, auto_replies=1
    )
    assert after_real_tool_call(counters) == replace(counters, no_progress_streak=0)
    assert after_rejected_update(counters) == replace(
        counters, no_progress_streak=5, rejected_in_streak=1
    )


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"status": "blocked", "reason": "r1", "summary": "s1"}, "r1"),
        ({"status": "blocked", "reason": "  ", "summary": " s1 "}, "s1"),
        ({"status": "blocked", "summary": "s1"}, "s1"),
        ({"status": "blocked"}, "no reason given"),
        ({"status": "blocked", "reason": None, "summary": None}, "no reason given"),
    ],
)
def test_accepted_blocked_stop_carries_the_reason(arguments: dict[str, Any], reason: str) -> None:
    decision = update(arguments, Counters(), limits=LimitPolicy(blocked_accept_at=1))
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.stop == Stop(GoalStatus.BLOCKED, "blocked", f"Blocked: {reason}")
    assert decision.message == f"accepted: the goal is blocked ({reason})."


def test_other_rejections_do_not_count_as_blocked_reports() -> None:
    limits = LimitPolicy(blocked_accept_at=2, max_no_progress=50)
    counters = blocked(Counters(), limits).counters
    for status in ("paused", "active", "", None):
        counters = update({"status": status}, counters, limits=limits).counters
    counters = update({"status": "needs_user_input"}, counters, limits=limits).counters
    assert counters.blocked_reports == 1
    assert blocked(counters, limits).verdict is Verdict.ACCEPTED


# the audit -----------------------------------------------------------------------------------


def test_passed_audit_completes_the_goal_with_the_summary() -> None:
    decision = review_audit(True, "", "FizzBuzz written and tested.", SOME)
    assert decision.verdict is Verdict.ACCEPTED
    assert decision.counters == SOME
    assert decision.stop == Stop(GoalStatus.COMPLETE, "complete", "FizzBuzz written and tested.")


def test_passed_audit_without_summary_still_completes() -> None:
    decision = review_audit(True, "", "", SOME)
    assert decision.stop == Stop(GoalStatus.COMPLETE, "complete", "Goal complete.")


def test_failed_audit_is_rejected_with_the_failures_and_one_more_streak() -> None:
    failures = "- tests: `pytest` exit 1 (2 failed)\n- deliverable fizzbuzz.py: missing"
    decision = review_audit(False, failures, "done", SOME)
    assert decision.verdict is Verdict.REJECTED
    assert decision.stop is None
    assert decision.counters == one_more_rejected(SOME)
    assert decision.message.startswith("rejected:")
    assert "audit failed" in decision.message
    assert decision.message.endswith(failures)
    assert "- tests: `pytest` exit 1 (2 failed)" in decision.message
    assert "- deliverable fizzbuzz.py: missing" in decision.message


def test_failed_audits_one_below_the_streak_limit_and_at_it() -> None:
    limits = LimitPolicy(max_no_progress=3)
    counters = Counters(no_progress_streak=1)
    counters = review_audit(False, "x", "", counters).counters
    assert check_streak(counters, limits) is None
    counters = review_audit(False, "x", "", counters).counters
    assert check_streak(counters, limits) == Stop(
        GoalStatus.LIMIT_REACHED, "no_progress", no_progress_notice(3, rejected=2)
    )
    assert check_streak(counters, limits).message == (  # type: ignore[union-attr]
        "Goal stopped: no progress 3 times in a row (2 rejected update_goal calls and 1 round "
        "without a step). Say how to continue."
    )


# end of round --------------------------------------------------------------------------------


@pytest.mark.parametrize("called_tools", [True, False])
def test_every_round_counts_once(called_tools: bool) -> None:
    counters, stop = end_of_round(SOME, called_tools=called_tools, limits=LIMITS)
    assert stop is None
    assert counters.rounds == SOME.rounds + 1
    assert counters.counted_rounds == SOME.counted_rounds + 1
    assert counters.blocked_reports == SOME.blocked_reports
    assert counters.auto_replies == SOME.auto_replies


def test_round_without_tools_adds_one_to_the_streak() -> None:
    counters, _ = end_of_round(SOME, called_tools=False, limits=LIMITS)
    assert counters.no_progress_streak == SOME.no_progress_streak + 1


def test_round_with_tools_neither_adds_to_nor_resets_the_streak() -> None:
    # a round whose only calls were rejected update_goal calls must not wipe the streak
    counters, _ = end_of_round(SOME, called_tools=True, limits=LIMITS)
    assert counters.no_progress_streak == SOME.no_progress_streak


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8])
def test_no_progress_stop_one_round_below_the_limit_and_at_it(limit: int) -> None:
    limits = LimitPolicy(max_rounds_total=100, max_no_progress=limit)
    counters = Counters()
    for n in range(1, limit):
        counters, stop = end_of_round(counters, called_tools=False, limits=limits)
        assert stop is None, n
        assert counters.no_progress_streak == n
    counters, stop = end_of_round(counters, called_tools=False, limits=limits)
    assert counters.no_progress_streak == limit
    assert stop == Stop(
        GoalStatus.LIMIT_REACHED,
        "no_progress",
        f"Goal stopped: no step was taken in {limit} round{'s' * (limit != 1)} in a row. "
        "Say how to continue.",
    )


def test_no_progress_notice_is_exact() -> None:
    assert (
        no_progress_notice(5)
        == "Goal stopped: no step was taken in 5 rounds in a row. Say how to continue."
    )
    _, stop = end_of_round(Counters(no_progress_streak=4), called_tools=False, limits=LIMITS)
    assert stop is not None
    assert stop.status is GoalStatus.LIMIT_REACHED
    assert stop.reason == "no_progress"
    assert stop.message == (
        "Goal stopped: no step was taken in 5 rounds in a row. Say how to continue."
    )


def test_streak_reached_by_rejections_stops_at_the_end_of_a_round_with_tools() -> None:
    counters = Counters(no_progress_streak=LIMITS.max_no_progress)
    counters, stop = end_of_round(counters, called_tools=True, limits=LIMITS)
    assert stop is not None
    assert stop.reason == "no_progress"


def test_real_tool_call_one_round_before_the_limit_averts_the_stop() -> None:
    limits = LimitPolicy(max_rounds_total=100, max_no_progress=3)
    counters = Counters(no_progress_streak=2)
    counters = after_real_tool_call(counters)
    counters, stop = end_of_round(counters, called_tools=True, limits=limits)
    assert stop is None
    assert counters.no_progress_streak == 0


def test_check_streak_one_below_and_at_the_limit() -> None:
    limits = LimitPolicy(max_no_progress=4)
    assert check_streak(Counters(no_progress_streak=3), limits) is None
    assert check_streak(Counters(no_progress_streak=4), limits) == Stop(
        GoalStatus.LIMIT_REACHED,
        "no_progress",
        "Goal stopped: no step was taken in 4 rounds in a row. Say how to continue.",
    )


@pytest.mark.parametrize("total", [1, 2, 3, 50])
def test_total_rounds_stop_one_round_below_the_limit_and_at_it(total: int) -> None:
    limits = LimitPolicy(max_rounds_total=total, max_no_progress=100)
    counters = Counters()
    for n in range(1, total):
        counters = after_real_tool_call(counters)
        counters, stop = end_of_round(counters, called_tools=True, limits=limits)
        assert stop is None, n
        assert counters.counted_rounds == n
    counters = after_real_tool_call(counters)
    counters, stop = end_of_round(counters, called_tools=True, limits=limits)
    assert counters.counted_rounds == total
    assert stop == Stop(
        GoalStatus.LIMIT_REACHED,
        "total_rounds",
        f"Goal stopped after {total} round{'s' * (total != 1)} in total without completion. "
        "Say how to continue.",
    )


def test_total_rounds_notice_is_exact() -> None:
    assert total_rounds_notice(50) == (
        "Goal stopped after 50 rounds in total without completion. Say how to continue."
    )
    _, stop = end_of_round(Counters(counted_rounds=49), called_tools=True, limits=LIMITS)
    assert stop is not None
    assert stop.status is GoalStatus.LIMIT_REACHED
    assert stop.reason == "total_rounds"
    assert stop.message == (
        "Goal stopped after 50 rounds in total without completion. Say how to continue."
    )


def test_total_limit_counts_rounds_since_restart_not_goal_rounds() -> None:
    limits = LimitPolicy(max_rounds_total=3)
    counters = Counters(rounds=40, counted_rounds=1)
    counters, stop = end_of_round(counters, called_tools=True, limits=limits)
    assert stop is None
    assert (counters.rounds, counters.counted_rounds) == (41, 2)
    counters, stop = end_of_round(counters, called_tools=True, limits=limits)
    assert stop is not None
    assert stop.reason == "total_rounds"
    assert (counters.rounds, counters.counted_rounds) == (42, 3)


def test_no_progress_wins_when_both_limits_are_reached_in_the_same_round() -> None:
    limits = LimitPolicy(max_rounds_total=4, max_no_progress=2)
    counters = Counters(rounds=3, counted_rounds=3, no_progress_streak=1)
    counters, stop = end_of_round(counters, called_tools=False, limits=limits)
    assert counters.counted_rounds == 4
    assert counters.no_progress_streak == 2
    assert stop == Stop(GoalStatus.LIMIT_REACHED, "no_progress", no_progress_notice(2))


def test_both_limits_of_one_reach_in_the_first_round_as_no_progress() -> None:
    limits = LimitPolicy(max_rounds_total=1, max_no_progress=1)
    _, stop = end_of_round(Counters(), called_tools=False, limits=limits)
    assert stop is not None
    assert stop.reason == "no_progress"
    _, stop = end_of_round(Counters(), called_tools=True, limits=limits)
    assert stop is not None
    assert stop.reason == "total_rounds"


def test_restarted_resets_limits_and_blocked_count_but_not_the_round_number() -> None:
    counters = Counters(
        rounds=12, counted_rounds=10, no_progress_streak=4, blocked_reports=2, auto_replies=1
    )
    again = counters.restarted()
    assert again.rounds == 12
    assert again.counted_rounds == 0
    assert again.no_progress_streak == 0
    assert again.blocked_reports == 0
    assert again.auto_replies == 1


def test_after_a_total_rounds_stop_a_restart_gives_the_full_allowance_again() -> None:
    limits = LimitPolicy(max_rounds_total=3, max_no_progress=10)
    counters = Counters(rounds=2, counted_rounds=2)
    counters, stop = end_of_round(counters, called_tools=True, limits=limits)
    assert stop is not None
    assert stop.reason == "total_rounds"
    counters = counters.restarted()
    for n in range(1, 3):
        counters, stop = end_of_round(counters, called_tools=True, limits=limits)
        assert stop is None
        assert counters.rounds == 3 + n
    counters, stop = end_of_round(counters, called_tools=True, limits=limits)
    assert stop is not None
    assert stop.reason == "total_rounds"
    assert counters.rounds == 6


def test_after_restart_blocked_needs_the_full_number_of_reports_again() -> None:
    limits = LimitPolicy(blocked_accept_at=3)
    counters = Counters(blocked_reports=2).restarted()
    first = blocked(counters, limits)
    assert first.verdict is Verdict.REJECTED
    assert "blocked report 1 of 3" in first.message


# the rounds-remaining warning ----------------------------------------------------------------


def test_no_warning_before_the_last_five_rounds() -> None:
    for counted in range(1, 46):
        assert rounds_remaining_warning(counted, LIMITS) is None, counted


@pytest.mark.parametrize(("counted", "remaining"), [(46, 4), (47, 3), (48, 2)])
def test_warning_in_the_last_five_rounds_names_the_rounds_left(
    counted: int, remaining: int
) -> None:
    text = rounds_remaining_warning(counted, LIMITS)
    assert text is not None
    assert text.startswith(f"{remaining} rounds remain after this one.")
    assert "complete" in text
    assert "needs_user_input" in text


def test_warning_one_round_before_the_last_uses_the_singular() -> None:
    text = rounds_remaining_warning(49, LIMITS)
    assert text is not None
    assert text.startswith("1 round ")
    assert "1 rounds" not in text


def test_warning_one_round_before_the_last_is_grammatical() -> None:
    # a user-facing text: "1 round remains", not "1 round remain"
    text = rounds_remaining_warning(49, LIMITS)
    assert text is not None
    assert text.startswith("1 round remains after this one.")


def test_warning_in_the_last_round() -> None:
    text = rounds_remaining_warning(50, LIMITS)
    assert text is not None
    assert text.startswith("This is the last round before the round limit stops the goal.")
    assert "update_goal with complete" in text
    assert "needs_user_input" in text


def test_warning_is_given_in_exactly_five_rounds() -> None:
    warned = [n for n in range(1, 51) if rounds_remaining_warning(n, LIMITS) is not None]
    assert warned == [46, 47, 48, 49, 50]


@pytest.mark.parametrize("total", [1, 2, 3, 4, 5, 6])
def test_warning_with_limits_of_five_or_fewer_rounds(total: int) -> None:
    limits = LimitPolicy(max_rounds_total=total)
    for counted in range(1, total + 1):
        text = rounds_remaining_warning(counted, limits)
        remaining = total - counted
        if remaining >= 5:
            assert text is None
            continue
        assert text is not None, (total, counted)
        if remaining == 0:
            assert text.startswith("This is the last round")
        else:
            assert text.startswith(f"{remaining} round")
            assert "last round" not in text


def test_warning_of_the_last_round_matches_the_total_stop() -> None:
    # the round that is warned as the last one is the round the total limit stops after
    limits = LimitPolicy(max_rounds_total=7, max_no_progress=100)
    counters = Counters()
    while True:
        text = rounds_remaining_warning(counters.counted_rounds + 1, limits)
        counters, stop = end_of_round(counters, called_tools=True, limits=limits)
        if stop is not None:
            assert text is not None
            assert text.startswith("This is the last round")
            assert counters.counted_rounds == 7
            break
        assert text is None or not text.startswith("This is the last round")


# budgets -------------------------------------------------------------------------------------

NONE_USED = {"tokens": 0, "elapsed_s": 0.0, "cost_usd": 0.0}


def test_token_budget_one_below_and_at_it() -> None:
    policy = BudgetPolicy(token_budget=1000)
    assert budget_reached(policy, tokens=999, elapsed_s=1e9, cost_usd=1e9) is None
    stop = budget_reached(policy, tokens=1000, elapsed_s=0.0, cost_usd=0.0)
    assert stop is not None
    assert stop.status is GoalStatus.BUDGET_LIMITED
    assert stop.reason == "token_budget"
    assert "1,000 of 1,000 tokens" in stop.message
    over = budget_reached(policy, tokens=1001, elapsed_s=0.0, cost_usd=0.0)
    assert over is not None
    assert over.reason == "token_budget"


def test_time_budget_one_below_and_at_it() -> None:
    policy = BudgetPolicy(time_budget_s=5400.0)
    assert budget_reached(policy, tokens=10**9, elapsed_s=5399.0, cost_usd=1e9) is None
    assert budget_reached(policy, tokens=0, elapsed_s=5399.999, cost_usd=0.0) is None
    stop = budget_reached(policy, tokens=0, elapsed_s=5400.0, cost_usd=0.0)
    assert stop is not None
    assert stop.status is GoalStatus.BUDGET_LIMITED
    assert stop.reason == "time_budget"
    assert "5400" in stop.message


def test_cost_budget_one_below_and_at_it() -> None:
    policy = BudgetPolicy(cost_budget_usd=5.0)
    assert budget_reached(policy, tokens=10**9, elapsed_s=1e9, cost_usd=4.0) is None
    assert budget_reached(policy, tokens=0, elapsed_s=0.0, cost_usd=4.9999) is None
    stop = budget_reached(policy, tokens=0, elapsed_s=0.0, cost_usd=5.0)
    assert stop is not None
    assert stop.status is GoalStatus.BUDGET_LIMITED
    assert stop.reason == "cost_budget"
    assert "5.00" in stop.message


def test_no_budgets_never_stop() -> None:
    policy = BudgetPolicy()
    assert budget_reached(policy, **NONE_USED) is None
    assert budget_reached(policy, tokens=10**12, elapsed_s=1e12, cost_usd=1e12) is None


def test_each_budget_stops_on_its_own_the_others_being_unset() -> None:
    cases = [
        (BudgetPolicy(token_budget=10), {"tokens": 10}, "token_budget"),
        (BudgetPolicy(time_budget_s=10.0), {"elapsed_s": 10.0}, "time_budget"),
        (BudgetPolicy(cost_budget_usd=10.0), {"cost_usd": 10.0}, "cost_budget"),
    ]
    for policy, used, reason in cases:
        stop = budget_reached(policy, **{**NONE_USED, **used})
        assert stop is not None
        assert (stop.status, stop.reason) == (GoalStatus.BUDGET_LIMITED, reason)


def test_every_budget_one_below_does_not_stop_when_all_are_set() -> None:
    policy = BudgetPolicy(token_budget=100, time_budget_s=60.0, cost_budget_usd=2.0)
    assert budget_reached(policy, tokens=99, elapsed_s=59.0, cost_usd=1.0) is None


def test_when_several_budgets_are_reached_the_token_budget_is_named_first() -> None:
    policy = BudgetPolicy(token_budget=100, time_budget_s=60.0, cost_budget_usd=2.0)
    stop = budget_reached(policy, tokens=100, elapsed_s=60.0, cost_usd=2.0)
    assert stop is not None
    assert stop.reason == "token_budget"
    stop = budget_reached(policy, tokens=99, elapsed_s=60.0, cost_usd=2.0)
    assert stop is not None
    assert stop.reason == "time_budget"
    stop = budget_reached(policy, tokens=99, elapsed_s=59.0, cost_usd=2.0)
    assert stop is not None
    assert stop.reason == "cost_budget"


def test_the_notices_say_one_round_and_name_both_counts_after_a_restart() -> None:
    assert no_progress_notice(1) == (
        "Goal stopped: no step was taken in 1 round in a row. Say how to continue."
    )
    assert total_rounds_notice(1) == (
        "Goal stopped after 1 round in total without completion. Say how to continue."
    )
    limits = LimitPolicy(max_rounds_total=2)
    _, stop = end_of_round(Counters(rounds=5, counted_rounds=1), called_tools=True, limits=limits)
    assert stop is not None and stop.message == (
        "Goal stopped after 2 rounds since the round count restarted (6 rounds of the goal in "
        "all) without completion. Say how to continue."
    )
