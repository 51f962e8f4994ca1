"""The guard's risk engine (:mod:`relay.guard.risk`, SPEC §8): scores, thresholds, decay and the
diagnosis of a finished round (:func:`relay.guard.evaluate_round`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from guard_support import (
    DEFAULT,
    GOAL,
    act,
    fails,
    marketing_round,
    rnd,
    settings,
    sh,
)
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from relay.guard import (
    EVENT_KINDS,
    SUGGESTIONS,
    Action,
    GuardDecision,
    GuardEvent,
    GuardRound,
    GuardSettings,
    RepeatTracker,
    diagnose,
    evaluate_round,
    evaluate_step,
)

# evaluate_round -------------------------------------------------------------------------------


def evaluate(
    current: GuardRound,
    *,
    score: float = 0.0,
    streak: int = 0,
    previous: tuple[GuardRound, ...] = (),
    history: tuple[GuardEvent, ...] = (),
    **changes: Any,
) -> GuardDecision:
    return evaluate_round(
        current,
        previous,
        goal_text=GOAL,
        settings=settings(**changes),
        score=score,
        failure_streak=streak,
        history=lambda: history,
    )


def test_weights_add_up() -> None:
    d = evaluate(rnd(2, *fails(3)), score=10)
    assert [e.kind for e in d.events] == ["tool_failures"]
    assert d.score == 25 and d.failure_streak == 3 and d.diagnosis is None
    d = evaluate(rnd(2, api_errors=("a", "b")), score=0, weights={**DEFAULT.weights})
    assert d.score == 20


def test_score_is_capped_at_100() -> None:
    d = evaluate(rnd(2, tamper=("a", "b", "c", "d")), score=90)
    assert d.score == 100


def test_threshold_one_below_and_exactly_at() -> None:
    r = rnd(2, tamper=("progress file changed",))
    assert evaluate(r, score=39).diagnosis is None  # 69
    d = evaluate(r, score=40)  # 70
    assert d.score == 70 and d.diagnosis is not None
    assert evaluate(r, score=40, threshold=71).diagnosis is None


def test_decay_only_after_a_round_with_changes_and_no_event() -> None:
    productive = rnd(2, act("edit_file", "replaced", path="calc.py"), files_changed=("calc.py",))
    assert evaluate(productive, score=60).score == 30
    assert evaluate(productive, score=60, decay=0.25).score == 15
    no_change = rnd(2, act("read_file", "x", path="calc.py"))
    assert evaluate(no_change, score=60).score == 60
    with_event = rnd(2, *fails(3), files_changed=("calc.py",))
    assert evaluate(with_event, score=40).score == 55
    assert evaluate(rnd(2, files_changed=("calc.py",)), score=60).score == 60  # no tool call


def test_diagnosis_lists_earlier_events_from_the_history() -> None:
    same = (sh("pytest -q", "F", failed=True),)
    d = evaluate(
        rnd(3, *same),
        score=45,
        streak=2,
        previous=(rnd(1, *same), rnd(2, *same)),
        history=(GuardEvent("loop", 2, "round 2 repeated round 1"),),
    )
    assert [e.kind for e in d.events] == ["loop", "tool_failures"]
    assert d.score == 90
    assert d.diagnosis is not None
    assert d.diagnosis.startswith(
        "Terminated: loop (rounds 2, 3), tool_failures (round 3). Check: "
    )


def test_disabled_detectors_emit_nothing() -> None:
    r = rnd(2, *fails(3), api_errors=("a",), tamper=("t",), repeat_events=("r",))
    all_on = evaluate(r)
    assert {e.kind for e in all_on.events} == {"tool_failures", "api_errors", "tamper", "loop"}
    only_loop = evaluate(r, detectors=("loop",))
    assert [e.kind for e in only_loop.events] == ["loop"]
    assert only_loop.score == 30
    assert evaluate(marketing_round(), detectors=("loop", "tool_failures")).events == ()


def test_guard_disabled_raises_nothing_but_keeps_the_streak() -> None:
    r = rnd(2, *fails(3), tamper=("t",), repeat_events=("r",))
    d = evaluate(r, score=50, streak=1, enabled=False)
    assert d.events == () and d.score == 50 and d.diagnosis is None
    assert d.failure_streak == 4


def test_unknown_weight_counts_zero() -> None:
    r = rnd(2, *fails(3))
    assert evaluate(r, weights={"loop": 30}).score == 0


# diagnose -------------------------------------------------------------------------------------


def test_diagnosis_format() -> None:
    events = [
        GuardEvent("loop", 2, "x"),
        GuardEvent("loop", 3, "y"),
        GuardEvent("tool_failures", 3, "z"),
        GuardEvent("loop", 3, "again"),
    ]
    assert diagnose(events) == (
        "Terminated: loop (rounds 2, 3), tool_failures (round 3). Check: "
        f"{SUGGESTIONS['loop']}; {SUGGESTIONS['tool_failures']}."
    )


# evaluate_step: a round in progress -----------------------------------------------------------


def play(
    calls: list[Action],
    *,
    guard: GuardSettings = DEFAULT,
    score: float = 0.0,
    streak: int = 0,
    history: Callable[[], Sequence[GuardEvent]] = tuple,
    **fields: Any,
) -> tuple[int | None, list[GuardDecision], GuardRound]:
    """Feed ``calls`` to one round as the loop does (a :class:`RepeatTracker` per round, a
    partial record after each call) and score the round after each call with
    :func:`evaluate_step`. Returns the 1-based call at which the goal ends (None: it does
    not), the decisions so far and the last partial record."""
    tracker = RepeatTracker(guard.repeat_limit, guard.loop_similarity)
    actions: list[Action] = []
    findings: list[str] = []
    decisions = []
    record = rnd(1)
    for i, call in enumerate(calls, 1):
        actions.append(call)
        if tracker.observe(call) and "loop" in guard.detectors:
            findings.append(tracker.finding())
        record = rnd(1, *actions, repeat_events=tuple(findings), **fields)
        decision = evaluate_step(
            record, settings=guard, score=score, failure_streak=streak, history=history
        )
        decisions.append(decision)
        if decision.diagnosis:
            return i, decisions, record
    return None, decisions, record


def test_the_same_call_with_the_same_result_ends_the_goal_at_the_15th_call() -> None:
    g = DEFAULT
    assert math.ceil(g.threshold / g.weights["loop"]) * g.repeat_limit == 15
    stopped_at, decisions, _ = play([sh("cat status.txt", "pending")] * 40)
    assert stopped_at == 15
    assert [d.score for d in decisions[3:15:5]] == [0, 30, 60]  # calls 4, 9, 14
    assert decisions[-1].score == 90
    assert decisions[-1].diagnosis == diagnose(decisions[-1].events)
    assert decisions[-1].diagnosis.startswith(
        f"Terminated: loop (round 1). Check: {SUGGESTIONS['loop']}"
    )


def test_a_repeated_failing_call_ends_the_goal_sooner_by_its_failure_streak() -> None:
    # loop at 5 (30), tool_failures at 3, 6, 9 (15 each): 75 at the 9th call
    stopped_at, decisions, _ = play([sh("pytest -q", "1 failed", failed=True)] * 40)
    assert stopped_at == 9
    assert decisions[-1].score == 75 and decisions[-1].failure_streak == 9
    assert decisions[-2].score == 60


def test_repeat_limit_and_weights_set_the_call_that_ends_the_goal() -> None:
    calls = [sh("cat status.txt", "pending")] * 40
    assert play(calls, guard=settings(repeat_limit=3))[0] == 9
    assert play(calls, guard=settings(weights={**DEFAULT.weights, "loop": 35}))[0] == 10
    assert play(calls, guard=settings(threshold=91))[0] == 20
    assert play(calls, guard=settings(detectors=("drift", "tool_failures")))[0] is None
    assert play(calls, guard=settings(enabled=False))[0] is None


def test_the_score_and_streak_before_the_round_count() -> None:
    calls = [sh("cat status.txt", "pending")] * 40
    assert play(calls, score=40)[0] == 5  # 40 + 30
    assert play(calls, score=39)[0] == 10  # 69, then 99
    failing = [sh(f"cmd{i}", "exit code: 127", failed=True) for i in range(3)]
    assert play(failing, score=60, streak=2)[0] == 1  # the streak reaches 3 at the first call


def test_findings_recorded_during_the_round_end_it_when_the_score_reaches_the_threshold() -> None:
    one = [sh("ls", "a")]
    assert play(one, score=40, tamper=("progress file changed",))[0] == 1
    assert play(one, score=39, tamper=("progress file changed",))[0] is None
    assert play(one, score=50, api_errors=("overloaded", "timeout"))[0] == 1
    assert play(one, score=49, api_errors=("overloaded", "timeout"))[0] is None


def test_a_productive_round_in_progress_keeps_the_score_and_raises_nothing() -> None:
    calls = [sh("python job.py status", f"running: {i}/40") for i in range(40)]
    stopped_at, decisions, _ = play(calls, score=60)
    assert stopped_at is None
    assert {d.score for d in decisions} == {60} and all(d.events == () for d in decisions)


def test_a_round_in_progress_is_not_judged_by_drift_or_by_earlier_rounds() -> None:
    # the first call of this round is the whole of round 1: the finished round may not be
    # a repeat of it, so only evaluate_round judges that
    earlier = rnd(1, sh("pytest -q", "1 failed", failed=True))
    partial = rnd(2, sh("pytest -q", "1 failed", failed=True))
    kwargs: dict[str, Any] = {"settings": DEFAULT, "score": 50, "failure_streak": 0}
    assert evaluate_round(partial, [earlier], goal_text=GOAL, **kwargs).diagnosis
    assert evaluate_step(partial, **kwargs).events == ()
    assert evaluate_round(marketing_round(), [], goal_text=GOAL, **kwargs).diagnosis
    assert evaluate_step(marketing_round(), **kwargs).events == ()


def test_the_history_is_read_only_for_the_diagnosis() -> None:
    reads: list[int] = []

    def history() -> list[GuardEvent]:
        reads.append(1)
        return [GuardEvent("drift", 3, "landing page")]

    stopped_at, decisions, _ = play([sh("cat status.txt", "pending")] * 15, history=history)
    assert stopped_at == 15 and reads == [1]
    assert decisions[-1].diagnosis is not None
    assert decisions[-1].diagnosis.startswith("Terminated: drift (round 3), loop (round 1).")


calls_of_a_round = st.lists(
    st.builds(
        lambda command, result, failed: sh(command, result, failed=failed),
        st.sampled_from(["pytest -q", "cat a.py", "ls"]),
        st.sampled_from(["ok", "1 failed"]),
        st.booleans(),
    ),
    max_size=30,
)


@given(
    calls=calls_of_a_round,
    score=st.sampled_from([0.0, 20.0, 45.0, 69.0]),
    streak=st.integers(0, 4),
    detectors=st.sets(st.sampled_from(EVENT_KINDS)),
)
@hypothesis_settings(max_examples=80, deadline=None, database=None)
def test_a_stop_inside_a_round_is_a_stop_the_finished_round_would_make(
    calls: list[Action], score: float, streak: int, detectors: set[str]
) -> None:
    """Every step's events are among the finished round's, so a step never stops a goal
    that the round's end would not stop, and the last step scores like the finished round
    without its across-rounds and drift detectors."""
    guard = settings(detectors=tuple(sorted(detectors)))
    stopped_at, decisions, record = play(calls, guard=guard, score=score, streak=streak)
    full = evaluate_round(
        record, [], goal_text=GOAL, settings=guard, score=score, failure_streak=streak
    )
    for d in decisions:
        assert set(d.events) <= set(full.events)
        assert d.score <= full.score or not d.events
    if stopped_at is not None:
        assert full.diagnosis is not None
    elif decisions and len(decisions) == len(calls):
        assert decisions[-1].events == full.events
        assert decisions[-1].failure_streak == full.failure_streak
