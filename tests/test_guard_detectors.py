"""The guard's detectors (:mod:`relay.guard.detectors`, SPEC §8), at and around each threshold:
round records in, events out."""

from __future__ import annotations

from guard_support import (
    GOAL,
    act,
    fails,
    inp,
    marketing_round,
    rnd,
    settings,
    sh,
)

from relay.guard import (
    DRIFT_MIN_WORDS,
    GuardEvent,
    GuardRound,
    detect_api_errors,
    detect_drift,
    detect_loop,
    detect_tamper,
    detect_tool_failures,
    failure_streak_after,
    goal_working_set,
    lexical_relevance,
    round_subjects,
)

# detect_loop ----------------------------------------------------------------------------------


def test_loop_when_a_round_repeats_one_in_the_window() -> None:
    same = (sh("pytest -q", "1 failed", failed=True), act("read_file", "src", path="calc.py"))
    events = detect_loop(inp(rnd(5, *same), (rnd(1, *same), rnd(2), rnd(3), rnd(4))))
    assert [e.kind for e in events] == ["loop"]
    assert "round 5 repeated round 1" in events[0].detail
    assert "the same 2 tool calls with the same results" in events[0].detail


def test_a_repeated_round_of_one_call_says_one_tool_call() -> None:
    """Issue 13, item 9 ("1 rounds", "1 paths"): not "the same 1 tool call(s)"."""
    same = (sh("pytest -q", "1 failed", failed=True),)
    events = detect_loop(inp(rnd(2, *same), (rnd(1, *same),)))
    assert "round 2 repeated round 1: the same 1 tool call with the same results" in (
        events[0].detail
    )


def test_no_loop_when_the_repeated_round_left_the_window() -> None:
    same = (sh("pytest -q", "1 failed", failed=True),)
    previous = (rnd(1, *same), rnd(2, sh("a")), rnd(3, sh("b")), rnd(4, sh("c")), rnd(5, sh("d")))
    assert detect_loop(inp(rnd(6, *same), previous)) == []
    assert detect_loop(inp(rnd(6, *same), previous, settings=settings(loop_window=5)))


def test_loop_similarity_threshold_at_and_one_below() -> None:
    base = [sh(f"step {i}", f"out {i}") for i in range(20)]
    one_off = [*base[:19], sh("other", "x")]  # 19 of 20 equal: ratio 0.95
    two_off = [*base[:18], sh("other", "x"), sh("more", "y")]  # ratio 0.90
    previous = (rnd(1, *base),)
    assert detect_loop(inp(rnd(2, *one_off), previous))  # exactly at 0.95
    assert not detect_loop(inp(rnd(2, *one_off), previous, settings=settings(loop_similarity=0.96)))
    assert not detect_loop(inp(rnd(2, *two_off), previous))


def test_changing_results_are_not_a_loop() -> None:
    previous = (rnd(1, sh("python job.py status", "running: 3/10")),)
    current = rnd(2, sh("python job.py status", "running: 7/10"))
    assert detect_loop(inp(current, previous)) == []


def test_an_empty_round_is_never_a_loop() -> None:
    assert detect_loop(inp(rnd(2), (rnd(1),))) == []


def test_in_round_findings_become_loop_events() -> None:
    current = rnd(1, sh("x"), repeat_events=("shell called 5 times in a row with the same result",))
    events = detect_loop(inp(current))
    assert events == [GuardEvent("loop", 1, "shell called 5 times in a row with the same result")]


# detect_tool_failures -------------------------------------------------------------------------


def test_failure_streak_event_at_3_not_at_2() -> None:
    assert detect_tool_failures(inp(rnd(1, *fails(2)))) == []
    events = detect_tool_failures(inp(rnd(1, *fails(3))))
    assert [e.kind for e in events] == ["tool_failures"]
    assert events[0].detail.startswith("3 failed tool calls in a row")


def test_failure_streak_events_at_every_multiple_and_across_rounds() -> None:
    assert len(detect_tool_failures(inp(rnd(1, *fails(5))))) == 1
    assert len(detect_tool_failures(inp(rnd(1, *fails(6))))) == 2
    # two failures in the previous round, one now: the streak reaches 3
    assert len(detect_tool_failures(inp(rnd(2, *fails(1)), streak=2))) == 1
    assert detect_tool_failures(inp(rnd(2, *fails(1)), streak=1)) == []


def test_a_success_resets_the_failure_streak() -> None:
    actions = [*fails(2), sh("ok"), *fails(2)]
    assert detect_tool_failures(inp(rnd(1, *actions))) == []
    assert failure_streak_after(0, actions) == 2
    assert failure_streak_after(7, [sh("ok")]) == 0
    assert failure_streak_after(1, fails(2)) == 3


def test_failure_streak_is_configurable() -> None:
    s4 = settings(failure_streak=4)
    assert detect_tool_failures(inp(rnd(1, *fails(3)), settings=s4)) == []
    assert len(detect_tool_failures(inp(rnd(1, *fails(4)), settings=s4))) == 1


# detect_drift ---------------------------------------------------------------------------------


def test_drift_when_no_word_of_the_goal_appears() -> None:
    events = detect_drift(inp(marketing_round(), goal=GOAL))
    assert [e.kind for e in events] == ["drift"]
    assert "none from the goal" in events[0].detail


def test_no_drift_with_a_goal_word() -> None:
    r = marketing_round(tagline="Ship faster; the calculator never divides by zero")
    assert detect_drift(inp(r, goal=GOAL)) == []
    # a supplement is part of the goal text
    goal = GOAL + "\nAlso update the landing page."
    assert detect_drift(inp(marketing_round(), goal=goal)) == []


def test_drift_needs_five_meaningful_words() -> None:
    def round_with(words: list[str]) -> GuardRound:
        return rnd(1, act("read_file", path="docs/" + "_".join(words) + ".html"))

    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    assert DRIFT_MIN_WORDS == 5
    # "docs" and "html" are generic: "html" counts, "docs" does not
    assert lexical_relevance(GOAL, "docs/alpha_bravo_charlie.html") == (0, 4)
    assert detect_drift(inp(round_with(words[:3]), goal=GOAL)) == []  # 4 words: one below
    assert detect_drift(inp(round_with(words[:4]), goal=GOAL))  # 5 words: exactly at


def test_no_drift_for_a_round_that_worked_on_no_file() -> None:
    r = rnd(
        1,
        sh("python -m pytest -q -p no:cacheprovider", "1 failed", failed=True),
        handoff="The suite still fails; I will retry with more verbose options tomorrow.",
    )
    assert round_subjects(r) == []
    assert detect_drift(inp(r, goal=GOAL)) == []


def test_no_drift_on_files_of_the_goals_working_set() -> None:
    located = rnd(
        1,
        act("read_file", "src", path="shop/queries.py"),
        handoff="The nightly report calls order_totals in shop/queries.py.",
    )
    terse = rnd(
        2,
        act("write_file", "wrote", path="shop/queries.py", content="SELECT order_id, SUM(amount)"),
        sh("python -m unittest -q test_queries", "OK"),
        files_changed=("shop/queries.py",),
    )
    goal = "Speed up the nightly sales report"
    assert goal_working_set(goal, [located]) == {"shop/queries.py"}
    assert detect_drift(inp(terse, (located,), goal=goal)) == []
    assert detect_drift(inp(terse, goal=goal))  # without the earlier round: drift
    # the working set is that of the previous loop_window rounds
    far = (located, rnd(2, sh("a")), rnd(3, sh("b")), rnd(4, sh("c")), rnd(5, sh("d")))
    assert detect_drift(inp(terse, far, goal=goal))


def test_drift_off_and_empty_rounds() -> None:
    assert detect_drift(inp(marketing_round(), goal=GOAL, settings=settings(drift="off"))) == []
    assert detect_drift(inp(rnd(1, handoff="marketing landing page tagline copy"), goal=GOAL)) == []


# api_errors and tamper ------------------------------------------------------------------------


def test_api_errors_and_tamper_pass_through_one_event_each() -> None:
    r = rnd(3, api_errors=("overloaded: busy", "timeout: slow"), tamper=("progress file",))
    assert [e.detail for e in detect_api_errors(inp(r))] == ["overloaded: busy", "timeout: slow"]
    assert detect_tamper(inp(r)) == [GuardEvent("tamper", 3, "progress file")]
