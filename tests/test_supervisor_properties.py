"""Property tests of the supervisor (SPEC §7.1, §7.2).

A goal is simulated as a sequence of rounds; each round is a random list of events (a real
tool call, a rejected ``update_goal``, a failed audit, a ``blocked`` report, a deferred
``update_goal``); an empty round is a round without any tool call. The simulation drives only
the public functions of :mod:`relay.supervisor`, in the order the loop applies them: the step's
decision and :func:`step_stop` after it, then :func:`end_of_round` and :func:`round_end_stop`
(the order of the stops at a round's end). The checks compare the outcome against an
independent model of the rules written here from the SPEC.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from relay.goal import MODEL_STATUSES, GoalStatus
from relay.supervisor import (
    Counters,
    LimitPolicy,
    Stop,
    Verdict,
    after_real_tool_call,
    end_of_round,
    no_progress_notice,
    review_audit,
    review_update_goal,
    round_end_stop,
    step_stop,
    total_rounds_notice,
)

SETTINGS = settings(max_examples=60, deadline=None, database=None)

DISALLOWED: list[Any] = [
    *(s.value for s in GoalStatus if s not in MODEL_STATUSES),
    "",
    None,
    "COMPLETE",
    "Blocked",
    "done",
]
ANY_STATUS: list[Any] = [*DISALLOWED, "complete", "needs_user_input", "blocked"]
REJECTING = ("reject", "audit_fail", "blocked")


@dataclass(frozen=True)
class Event:
    kind: str
    """``tool``, ``reject``, ``audit_fail``, ``blocked`` or ``deferred``."""
    status: Any = None


@dataclass(frozen=True)
class Entry:
    """One thing that happened: a step (event kind) or the end of a round (``round``)."""

    kind: str
    before: Counters
    after: Counters
    stop: Stop | None
    verdict: Verdict | None = None


@dataclass
class Run:
    trace: list[Entry] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)
    stop: Stop | None = None
    rounds_run: int = 0

    @property
    def first_stop(self) -> Entry:
        return next(e for e in self.trace if e.stop is not None)

    def before_first_stop(self) -> list[Entry]:
        i = next(i for i, e in enumerate(self.trace) if e.stop is not None)
        return self.trace[:i]


def apply(event: Event, counters: Counters, limits: LimitPolicy) -> Entry:
    """One step holding ``event``, through the public supervisor functions only."""
    if event.kind == "tool":
        return Entry("tool", counters, after_real_tool_call(counters), None)
    if event.kind == "deferred":
        arguments = {"status": event.status, "summary": "s", "question": "q?", "reason": "r"}
        d = review_update_goal(arguments, alone=False, counters=counters, limits=limits)
    elif event.kind == "reject":
        arguments = {"status": event.status, "summary": "s", "question": "q?"}
        d = review_update_goal(arguments, alone=True, counters=counters, limits=limits)
    elif event.kind == "audit_fail":
        d = review_update_goal(
            {"status": "complete", "summary": "s"}, alone=True, counters=counters, limits=limits
        )
        assert d.verdict is Verdict.AUDIT
        d = review_audit(False, "- tests: exit 1", "s", d.counters)
    elif event.kind == "blocked":
        d = review_update_goal(
            {"status": "blocked", "reason": "r"}, alone=True, counters=counters, limits=limits
        )
    else:  # pragma: no cover - strategy bug
        raise AssertionError(event)
    return Entry(event.kind, counters, d.counters, d.stop, d.verdict)


def run_goal(
    limits: LimitPolicy,
    rounds: list[list[Event]],
    counters: Counters | None = None,
    *,
    bound: int | None = None,
) -> Run:
    """Run rounds (cycling through ``rounds``) until the goal stops, as the loop does.

    Fails when the goal has not stopped after ``bound`` rounds (default: a few more than
    ``max_rounds_total``).
    """
    run = Run(counters=counters or Counters())
    bound = limits.max_rounds_total + 3 if bound is None else bound
    i = 0
    while run.stop is None:
        assert run.rounds_run < bound, "the goal did not stop"
        events = rounds[i % len(rounds)]
        i += 1
        decided: Stop | None = None
        for event in events:
            entry = apply(event, run.counters, limits)
            entry = replace(entry, stop=step_stop(entry.stop, entry.after, limits))
            run.trace.append(entry)
            run.counters = entry.after
            decided = entry.stop
            if decided is not None:
                break
        after, limit_stop = end_of_round(run.counters, called_tools=bool(events), limits=limits)
        run.trace.append(Entry("round", run.counters, after, limit_stop))
        run.counters = after
        run.rounds_run += 1
        run.stop = round_end_stop(steps=decided, limits=limit_stop)
    return run


# strategies ----------------------------------------------------------------------------------

limit_policies = st.builds(
    LimitPolicy,
    max_rounds_total=st.integers(1, 12),
    max_no_progress=st.integers(1, 8),
    blocked_accept_at=st.integers(1, 6),
    auto_replies=st.integers(1, 3),
)
non_rejecting = st.one_of(
    st.just(Event("tool")),
    st.builds(Event, st.just("deferred"), st.sampled_from(ANY_STATUS)),
)
rejecting = st.one_of(
    st.builds(Event, st.just("reject"), st.sampled_from(DISALLOWED)),
    st.just(Event("audit_fail")),
    st.just(Event("blocked")),
)
events = st.one_of(non_rejecting, rejecting)
any_rounds = st.lists(st.lists(events, max_size=4), min_size=1, max_size=10)


@st.composite
def gentle_round(draw: st.DrawFn) -> list[Event]:
    """A round with at most one rejecting event (so at most +1 streak per round)."""
    calls = draw(st.lists(non_rejecting, max_size=3))
    extra = draw(st.one_of(st.none(), rejecting))
    if extra is not None:
        calls.insert(draw(st.integers(0, len(calls))), extra)
    return calls


gentle_rounds = st.lists(gentle_round(), min_size=1, max_size=10)


# properties ----------------------------------------------------------------------------------


@SETTINGS
@given(limits=limit_policies, rounds=any_rounds)
def test_never_more_than_max_rounds_total_rounds_before_a_stop(
    limits: LimitPolicy, rounds: list[list[Event]]
) -> None:
    run = run_goal(limits, rounds)
    assert run.stop is not None
    assert run.rounds_run <= limits.max_rounds_total
    assert run.counters.counted_rounds == run.rounds_run
    assert run.counters.rounds == run.rounds_run
    if run.stop.reason == "total_rounds":
        assert run.rounds_run == limits.max_rounds_total
        assert run.stop == Stop(
            GoalStatus.LIMIT_REACHED, "total_rounds", total_rounds_notice(limits.max_rounds_total)
        )


@SETTINGS
@given(limits=limit_policies, rounds=st.lists(st.lists(non_rejecting, max_size=3), min_size=1))
def test_a_goal_that_keeps_working_stops_exactly_at_the_total(
    limits: LimitPolicy, rounds: list[list[Event]]
) -> None:
    # every round has a real tool call: only the total limit can stop the goal
    rounds = [[Event("tool"), *r] for r in rounds]
    run = run_goal(limits, rounds)
    assert run.stop == Stop(
        GoalStatus.LIMIT_REACHED, "total_rounds", total_rounds_notice(limits.max_rounds_total)
    )
    assert run.rounds_run == limits.max_rounds_total


@SETTINGS
@given(limits=limit_policies, rounds=any_rounds)
def test_a_rejected_update_goal_adds_exactly_one_to_the_streak(
    limits: LimitPolicy, rounds: list[list[Event]]
) -> None:
    run = run_goal(limits, rounds)
    rejected = [e for e in run.trace if e.verdict is Verdict.REJECTED]
    for entry in rejected:
        assert entry.kind in REJECTING
        assert entry.after.no_progress_streak == entry.before.no_progress_streak + 1
        assert entry.after.counted_rounds == entry.before.counted_rounds
        assert entry.after.rounds == entry.before.rounds
    for entry in run.trace:
        if entry.kind in ("reject", "audit_fail"):
            assert entry.verdict is Verdict.REJECTED


@SETTINGS
@given(
    counters=st.builds(
        Counters,
        rounds=st.integers(0, 100),
        counted_rounds=st.integers(0, 100),
        no_progress_streak=st.integers(0, 100),
        blocked_reports=st.integers(0, 100),
        auto_replies=st.integers(0, 5),
    ),
    status=st.sampled_from(DISALLOWED),
    limits=limit_policies,
)
def test_any_disallowed_status_is_rejected_with_one_more_streak_and_nothing_else(
    counters: Counters, status: Any, limits: LimitPolicy
) -> None:
    decision = review_update_goal(
        {"status": status, "summary": "s", "question": "q?", "reason": "r"},
        alone=True,
        counters=counters,
        limits=limits,
        auto_reply="go on",
    )
    assert decision.verdict is Verdict.REJECTED
    assert decision.stop is None
    assert decision.counters == replace(
        counters,
        no_progress_streak=counters.no_progress_streak + 1,
        rejected_in_streak=counters.rejected_in_streak + 1,
    )


@SETTINGS
@given(limits=limit_policies, rounds=any_rounds)
def test_a_real_tool_call_resets_the_streak_to_zero(
    limits: LimitPolicy, rounds: list[list[Event]]
) -> None:
    run = run_goal(limits, rounds)
    for entry in run.trace:
        if entry.kind == "tool":
            assert entry.after == replace(entry.before, no_progress_streak=0, rejected_in_streak=0)


@SETTINGS
@given(limits=limit_policies, rounds=any_rounds)
def test_a_deferred_call_never_changes_counters(
    limits: LimitPolicy, rounds: list[list[Event]]
) -> None:
    run = run_goal(limits, rounds)
    for entry in run.trace:
        if entry.kind == "deferred":
            assert entry.verdict is Verdict.DEFERRED
            assert entry.after == entry.before
            assert entry.stop is None


@SETTINGS
@given(limits=limit_policies, rounds=any_rounds)
def test_streak_follows_the_rules_and_stops_exactly_at_the_limit(
    limits: LimitPolicy, rounds: list[list[Event]]
) -> None:
    run = run_goal(limits, rounds)
    limit = limits.max_no_progress
    # an independent model of the streak (SPEC §7.2)
    streak = 0
    round_called_tools = False
    for entry in run.trace:
        if entry.kind == "tool":
            streak = 0
        elif entry.verdict is Verdict.REJECTED:
            streak += 1
        if entry.kind == "round":
            if not round_called_tools:
                streak += 1
            round_called_tools = False
        else:
            round_called_tools = True
        assert entry.after.no_progress_streak == streak
    # never before the limit, always exactly at it
    for entry in run.before_first_stop():
        assert entry.after.no_progress_streak < limit
    first = run.first_stop
    assert first.stop is not None
    if first.after.no_progress_streak >= limit:
        assert first.after.no_progress_streak == limit
        assert first.stop == Stop(
            GoalStatus.LIMIT_REACHED,
            "no_progress",
            no_progress_notice(limit, first.after.rejected_in_streak),
        )
    else:
        assert first.stop.reason != "no_progress"
    assert run.stop == first.stop


@SETTINGS
@given(limits=limit_policies, rounds=any_rounds)
def test_blocked_is_accepted_only_at_the_blocked_accept_at_th_report(
    limits: LimitPolicy, rounds: list[list[Event]]
) -> None:
    run = run_goal(limits, rounds)
    reports = [e for e in run.trace if e.kind == "blocked"]
    for n, entry in enumerate(reports, start=1):
        assert entry.after.blocked_reports == n
        if n == limits.blocked_accept_at:
            assert entry.verdict is Verdict.ACCEPTED
            assert entry.stop == Stop(GoalStatus.BLOCKED, "blocked", "Blocked: r")
        else:
            assert n < limits.blocked_accept_at
            assert entry.verdict is Verdict.REJECTED
    if run.stop is not None and run.stop.reason == "blocked":
        assert len(reports) == limits.blocked_accept_at


@SETTINGS
@given(
    accept_at=st.integers(1, 6),
    rounds=st.lists(st.lists(events, max_size=5), max_size=12),
)
def test_blocked_is_accepted_exactly_at_the_nth_report_whatever_happens_between(
    accept_at: int, rounds: list[list[Event]]
) -> None:
    # round limits far away, so that only the blocked rule can end the goal
    limits = LimitPolicy(max_rounds_total=10**6, max_no_progress=10**6, blocked_accept_at=accept_at)
    final = [Event("blocked")] * accept_at
    run = run_goal(limits, [*rounds, final], bound=len(rounds) + 1)
    verdicts = [e.verdict for e in run.trace if e.kind == "blocked"]
    assert verdicts == [Verdict.REJECTED] * (accept_at - 1) + [Verdict.ACCEPTED]
    assert run.stop == Stop(GoalStatus.BLOCKED, "blocked", "Blocked: r")
    assert run.counters.blocked_reports == accept_at


@SETTINGS
@given(limits=limit_policies, first=any_rounds, then=gentle_rounds)
def test_after_restart_a_goal_runs_at_least_min_limits_more_rounds(
    limits: LimitPolicy, first: list[list[Event]], then: list[list[Event]]
) -> None:
    stopped = run_goal(limits, first)
    assert stopped.stop is not None
    restarted = stopped.counters.restarted()
    assert restarted.rounds == stopped.counters.rounds
    again = run_goal(limits, then, restarted)
    least = min(limits.max_rounds_total, limits.max_no_progress, limits.blocked_accept_at)
    assert again.rounds_run >= least
    assert again.counters.rounds == stopped.counters.rounds + again.rounds_run
    assert again.counters.counted_rounds == again.rounds_run


@SETTINGS
@given(limits=limit_policies, first=any_rounds)
def test_after_restart_idle_rounds_stop_at_the_smaller_round_limit(
    limits: LimitPolicy, first: list[list[Event]]
) -> None:
    stopped = run_goal(limits, first)
    again = run_goal(limits, [[]], stopped.counters.restarted())
    no_progress = limits.max_no_progress
    total = limits.max_rounds_total
    assert again.rounds_run == min(no_progress, total)
    assert again.stop is not None
    assert again.stop.status is GoalStatus.LIMIT_REACHED
    assert again.stop.reason == ("no_progress" if no_progress <= total else "total_rounds")


stops = st.one_of(
    st.none(),
    st.builds(
        Stop,
        st.sampled_from(list(GoalStatus)),
        st.sampled_from(["complete", "no_progress", "tamper", "guard", "user"]),
        st.text(max_size=5),
    ),
)


@SETTINGS
@given(steps=stops, limits=stops, repository=stops, guard=stops, user=stops)
def test_a_rounds_end_applies_the_supervisor_then_repository_guard_and_user(
    steps: Stop | None,
    limits: Stop | None,
    repository: Stop | None,
    guard: Stop | None,
    user: Stop | None,
) -> None:
    chosen = round_end_stop(
        steps=steps, limits=limits, repository=repository, guard=guard, user=user
    )
    order = [steps, limits, repository, guard, user]  # SPEC §4
    assert chosen is next((s for s in order if s is not None), None)
