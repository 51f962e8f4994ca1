"""Pure tests of the guard's detectors and risk engine (SPEC §8), at and around each threshold.

No repository, no model: round records in, events and scores out. The end-to-end behaviour is
covered by ``tests/test_guard_suites.py``.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

import pytest

from relay import guard
from relay.guard import (
    DRIFT_MIN_WORDS,
    SUGGESTIONS,
    Action,
    DetectorInput,
    GuardEvent,
    GuardSettings,
    RepeatTracker,
    RoundRecord,
    call_text,
    detect_api_errors,
    detect_drift,
    detect_loop,
    detect_tamper,
    detect_tool_failures,
    diagnose,
    evaluate_round,
    failure_streak_after,
    goal_working_set,
    lexical_relevance,
    path_tokens,
    result_fingerprint,
    round_subjects,
    same_call,
    sequence_similarity,
    strip_shell_comments,
    words_match,
)

DEFAULT = GuardSettings()


def sh(command: str, result: str = "exit code: 0", *, failed: bool = False) -> Action:
    """A shell call with its result fingerprint."""
    return Action("shell", {"command": command}, result_fingerprint(result), failed)


def act(name: str, result: str = "ok", *, failed: bool = False, **arguments: Any) -> Action:
    return Action(name, arguments, result_fingerprint(result), failed)


def rnd(n: int, *actions: Action, **fields: Any) -> RoundRecord:
    return RoundRecord(n=n, actions=tuple(actions), **fields)


def inp(
    current: RoundRecord,
    previous: tuple[RoundRecord, ...] = (),
    *,
    goal: str = "Fix the division bug in calc.py",
    settings: GuardSettings = DEFAULT,
    streak: int = 0,
) -> DetectorInput:
    return DetectorInput(current, previous, goal, settings, streak)


def settings(**changes: Any) -> GuardSettings:
    values = {**DEFAULT.__dict__, **changes}
    return GuardSettings(**values)


# fingerprints -------------------------------------------------------------------------------


def test_fingerprint_ignores_durations_clock_times_addresses_and_temp_paths() -> None:
    a = "1 failed in 0.03s at 12:01:02 (obj 0x7f3a2b1c9d) /tmp/tmpab12/x.py\n"
    b = "1 failed in 1.27s at 23:59:59 (obj 0x7f00000001) /tmp/pytest-9/x.py\n"
    assert result_fingerprint(a) == result_fingerprint(b)


def test_fingerprint_changes_with_a_progress_counter_or_another_error() -> None:
    assert result_fingerprint("running: 3/14 batches") != result_fingerprint(
        "running: 4/14 batches"
    )
    assert result_fingerprint("NameError: x") != result_fingerprint("TypeError: x")


def test_fingerprint_ignores_the_cut_marker_and_the_partial_lines_around_it() -> None:
    a = "head\npart\n[... 525 bytes cut; full output in /run/1/out-1.txt ...]\nial\nFAILED a\n"
    b = "head\npar\n[... 527 bytes cut; full output in /run/1/out-7.txt ...]\ntial\nFAILED a\n"
    c = "head\npar\n[... 527 bytes cut; full output in /run/1/out-7.txt ...]\ntial\nFAILED b\n"
    assert result_fingerprint(a) == result_fingerprint(b)
    assert result_fingerprint(b) != result_fingerprint(c)


# near-identical calls -----------------------------------------------------------------------


def test_shell_comments_are_stripped_outside_quotes_only() -> None:
    assert strip_shell_comments("pytest -q  # attempt 3").strip() == "pytest -q"
    assert strip_shell_comments("# note\nls") == "\nls"
    assert strip_shell_comments("echo '#1' \"a # b\" x#y") == "echo '#1' \"a # b\" x#y"
    assert strip_shell_comments("echo $# ${#x} \\# z") == "echo $# ${#x} \\# z"


def test_path_tokens_are_the_words_that_name_files() -> None:
    assert path_tokens("sed -i 's/a/b/' src/mod1.py && cat calc.py -n 3 0.5") == (
        "s/a/b/",
        "src/mod1.py",
        "calc.py",
    )


def test_calls_differing_only_by_a_comment_label_are_the_same_call() -> None:
    a = sh("python -m pytest -q -k test_div  # attempt 3", "1 failed in 0.1s", failed=True)
    b = sh("python -m pytest -q -k test_div  # attempt 4", "1 failed in 0.2s", failed=True)
    assert same_call(a, b, 0.95)


def test_calls_on_different_files_or_with_different_results_are_not_the_same() -> None:
    a = sh("sed -i 's/get_conn/get_connection/' pkg/m01.py")
    b = sh("sed -i 's/get_conn/get_connection/' pkg/m02.py")
    assert not same_call(a, b, 0.95)  # one character apart, but another file
    assert not same_call(sh("ls", "a"), sh("ls", "b"), 0.95)
    assert not same_call(act("read_file", path="a"), act("read_file", path="b"), 0.5)
    assert not same_call(act("read_file", path="a"), act("write_file", path="a"), 0.5)


def test_near_identity_threshold_is_the_text_similarity() -> None:
    a = sh("python tools/report.py --since yesterday --format csv --limit 5000")
    b = sh("python tools/report.py --since yesterday --format csv --limit 6000")
    ratio = SequenceMatcher(None, a.text(), b.text(), autojunk=False).ratio()
    assert 0.9 < ratio < 1
    assert same_call(a, b, ratio)  # exactly at the threshold
    assert not same_call(a, b, ratio + 0.001)  # just below it


def test_long_texts_are_compared_line_by_line() -> None:
    lines = [f"line {i}: " + "x" * 40 for i in range(200)]

    def write(changed: int) -> Action:
        content = "\n".join([*lines[:100], *["changed"] * changed, *lines[100 + changed :]])
        return act("write_file", "wrote 9000 bytes to big.txt", path="big.txt", content=content)

    assert len(write(0).text()) > guard.CHAR_COMPARE_LIMIT
    assert same_call(write(0), write(1), 0.95)  # 201 of 202 lines equal
    assert not same_call(write(0), write(20), 0.95)  # 182 of 202


def test_call_text_is_canonical() -> None:
    assert call_text("shell", {"command": "ls   -la  # x"}) == "shell\ncommand=ls -la"
    assert call_text("write_file", {"path": "a", "content": "x  y\n\n  z\n"}) == (
        "write_file\ncontent=x y\nz\npath=a"
    )
    assert call_text("read_file", {"path": "a.py", "limit": 5}) == ("read_file\nlimit=5\npath=a.py")


def test_sequence_similarity_uses_near_identity() -> None:
    first = [sh("pytest -q  # 1", "F"), act("read_file", "x", path="a.py")]
    second = [sh("pytest -q  # 2", "F"), act("read_file", "x", path="a.py")]
    assert sequence_similarity(first, second, 0.95) == 1.0
    assert sequence_similarity(first, second[:1], 0.95) == pytest.approx(2 / 3)


# in-round repeats (RepeatTracker) -------------------------------------------------------------


def observe_all(tracker: RepeatTracker, actions: list[Action]) -> list[int]:
    """The 1-based positions at which the tracker nudged."""
    return [i for i, a in enumerate(actions, 1) if tracker.observe(a)]


def test_repeat_nudges_at_5_10_15_not_before() -> None:
    tracker = RepeatTracker(5, 0.95)
    call = sh("cat status.txt", "pending")
    nudged = []
    for i in range(1, 16):
        nudge = tracker.observe(call)
        if nudge:
            nudged.append(i)
            assert f"{i} times in a row" in nudge
        assert tracker.count == i
    assert nudged == [5, 10, 15]
    assert tracker.finding() == "shell called 15 times in a row with the same result"


def test_repeat_limit_is_configurable() -> None:
    assert observe_all(RepeatTracker(3, 0.95), [sh("x")] * 7) == [3, 6]


def test_a_poll_whose_result_changes_is_never_a_repeat() -> None:
    polls = [sh("python job.py status", f"running: {i}/40") for i in range(40)]
    tracker = RepeatTracker(5, 0.95)
    assert observe_all(tracker, polls) == []
    assert tracker.count == 1


def test_a_changed_result_restarts_the_count() -> None:
    calls = [sh("x", "a")] * 4 + [sh("x", "b")] * 4 + [sh("x", "a")] * 5
    assert observe_all(RepeatTracker(5, 0.95), calls) == [13]


def test_near_identical_labelled_calls_count_as_repeats() -> None:
    calls = [sh(f"pytest -q tests/test_tz.py  # try {i}", "F", failed=True) for i in range(10)]
    assert observe_all(RepeatTracker(5, 0.95), calls) == [5, 10]


def test_alternating_pair_counts_per_cycle() -> None:
    a, b = sh("python app.py", "error: no url", failed=True), sh("cat settings.ini", "[api]")
    tracker = RepeatTracker(5, 0.95)
    assert observe_all(tracker, [a, b] * 10) == [10, 20]
    assert tracker.period == 2 and tracker.count == 10
    assert tracker.finding().startswith("the same 2 calls (shell, shell) repeated 10 times")


def test_cycle_of_three_and_no_cycle_with_a_repeat_inside() -> None:
    a, b, c = sh("a"), sh("b"), act("read_file", path="c.py")
    assert observe_all(RepeatTracker(5, 0.95), [a, b, c] * 5) == [15]
    # "a a b" repeated is no cycle of 3 different calls, and a never repeats 5 times in a row
    assert observe_all(RepeatTracker(5, 0.95), [a, a, b] * 10) == []
    # cycles longer than MAX_CYCLE are left to the across-round detector
    d = sh("d")
    assert observe_all(RepeatTracker(5, 0.95), [a, b, c, d] * 5) == []


# detect_loop ---------------------------------------------------------------------------------


def test_loop_when_a_round_repeats_one_in_the_window() -> None:
    same = (sh("pytest -q", "1 failed", failed=True), act("read_file", "src", path="calc.py"))
    events = detect_loop(inp(rnd(5, *same), (rnd(1, *same), rnd(2), rnd(3), rnd(4))))
    assert [e.kind for e in events] == ["loop"]
    assert "round 5 repeated round 1" in events[0].detail


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


# detect_tool_failures ------------------------------------------------------------------------


def fails(k: int) -> list[Action]:
    return [sh(f"cmd{i}", "exit code: 127", failed=True) for i in range(k)]


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


# detect_drift --------------------------------------------------------------------------------

GOAL = "Fix the division bug in calc.py: divide(1, 0) must raise ZeroDivisionError."


def marketing_round(n: int = 1, tagline: str = "Ship faster with our product") -> RoundRecord:
    return rnd(
        n,
        act("write_file", "wrote 80 bytes", path="docs/marketing.html", content=tagline),
        handoff="Polished the landing page headline.",
        files_changed=("docs/marketing.html",),
    )


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
    def round_with(words: list[str]) -> RoundRecord:
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


def test_words_match() -> None:
    assert words_match("query", "queries")
    assert words_match("pool", "pooling")
    assert words_match("calc", "calculator")
    assert not words_match("divide", "division")
    assert not words_match("landing", "division")
    assert lexical_relevance("Use getConnection everywhere", "get_connection") == (1, 1)


# api_errors and tamper -----------------------------------------------------------------------


def test_api_errors_and_tamper_pass_through_one_event_each() -> None:
    r = rnd(3, api_errors=("overloaded: busy", "timeout: slow"), tamper=("progress file",))
    assert [e.detail for e in detect_api_errors(inp(r))] == ["overloaded: busy", "timeout: slow"]
    assert detect_tamper(inp(r)) == [GuardEvent("tamper", 3, "progress file")]


# the risk engine -----------------------------------------------------------------------------


def evaluate(
    current: RoundRecord,
    *,
    score: float = 0.0,
    streak: int = 0,
    previous: tuple[RoundRecord, ...] = (),
    history: tuple[GuardEvent, ...] = (),
    **changes: Any,
) -> guard.GuardDecision:
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
