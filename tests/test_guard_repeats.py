"""In-round repeats (:class:`relay.guard.RepeatTracker`, SPEC §8), at and around the limit."""

from __future__ import annotations

from guard_support import (
    act,
    sh,
)

from relay.guard import (
    Action,
    RepeatTracker,
)

# RepeatTracker --------------------------------------------------------------------------------


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
