"""The plain run of a pytest deliverable must agree with relay's report (issue 27)."""

from __future__ import annotations

from collections import Counter

import pytest

from relay.pytest_plain import plain_problems, summary_counts


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        ("..\n2 passed in 0.01s\n", {"passed": 2}),
        ("== 1 failed, 2 passed, 1 skipped in 0.12s ==", {"failed": 1, "passed": 2, "skipped": 1}),
        ("E\n1 error in 0.3s", {"error": 1}),
        ("\x1b[32m3 passed\x1b[0m in 1.00s (0:00:01)", {"passed": 3}),
        ("no tests ran in 0.01s", {}),
        ("2 passed, 1 warning in 0.01s", {"passed": 2, "warnings": 1}),
    ],
)
def test_pytests_summary_line_is_read(output: str, counts: dict[str, int]) -> None:
    assert summary_counts(output) == Counter(counts)


@pytest.mark.parametrize("output", ["", "..  [100%]\n", "2 passed\n", "print('2 passed in')"])
def test_no_summary_line_is_none(output: str) -> None:
    assert summary_counts(output) is None


def test_the_last_summary_line_counts() -> None:
    assert summary_counts("1 failed in 0.1s\n...\n3 passed in 0.2s") == Counter(passed=3)


def test_an_agreeing_plain_run_has_no_problem() -> None:
    assert plain_problems(0, False, "2 passed in 0.1s", {"passed": 2}, "2 passed in 0.2s") == []


def test_a_failing_plain_run_is_a_problem() -> None:
    (problem, disagree) = plain_problems(1, False, "1 failed in 0.1s", {"passed": 1})
    assert "the command failed: exit code 1" in problem
    assert "'1 failed'" in disagree and "'1 passed'" in disagree


def test_a_timed_out_plain_run_is_a_problem() -> None:
    assert "timed out" in plain_problems(None, True, "", {"passed": 1})[0]


def test_a_forged_summary_disagrees_with_relays_report() -> None:
    (problem,) = plain_problems(0, False, "5 passed in 0.1s", {"passed": 3, "failed": 2})
    assert "behaves differently when it is audited" in problem


def test_a_plain_run_that_prints_no_summary_where_the_audited_one_did() -> None:
    (problem,) = plain_problems(0, False, "", {"passed": 1}, ".\n1 passed in 0.1s")
    assert "printed no pytest summary line" in problem


def test_no_summary_in_either_run_is_the_commands_own_choice() -> None:
    assert plain_problems(0, False, ".", {"passed": 1}, ".  [100%]") == []
