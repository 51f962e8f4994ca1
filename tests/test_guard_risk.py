"""The guard's risk engine (:mod:`relay.guard.risk`, SPEC §8): scores, thresholds, decay and the
diagnosis of a finished round (:func:`relay.guard.evaluate_round`)."""

from __future__ import annotations

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

from relay.guard import (
    SUGGESTIONS,
    GuardDecision,
    GuardEvent,
    RoundRecord,
    diagnose,
    evaluate_round,
)

# evaluate_round -------------------------------------------------------------------------------


def evaluate(
    current: RoundRecord,
    *,
    score: float = 0.0,
    streak: int = 0,
    previous: tuple[RoundRecord, ...] = (),
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
