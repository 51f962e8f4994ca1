"""bench/overhead.py keeps working while relay is restructured (issue 12): a tiny run prints the
ratios the targets name, and a loop helper that no longer exists is listed, not a crash."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture()
def overhead(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import overhead

    return overhead


def test_a_tiny_run_prints_every_ratio_and_lists_names_it_could_not_wrap(
    overhead, monkeypatch, capsys
) -> None:
    import overhead_profile

    lost = ("other", "relay.loop:GoalLoop._a_helper_the_loop_lost")  # a restructured loop
    monkeypatch.setattr(overhead_profile, "DETAILS", (*overhead_profile.DETAILS, lost))
    argv = ["--rounds", "4", "--tracked-files", "20", "--commits", "3", "--shell-calls", "2"]
    assert overhead.main(argv) == 0
    out = capsys.readouterr().out
    assert "WARNING" not in out, out
    assert "not wrapped (no such name any more): GoalLoop._a_helper_the_loop_lost" in out
    for needle in (
        "overhead / floor at round 10",
        "round 4 / round 10 (overhead)",
        "git objects per round (10 → last)",
        "relay --version (s)",
        "physical floor at round 10 (ms, median): git add+commit",
        "growth from rounds",
    ):
        assert needle in out, out
    assert sys.modules["relay.loop"].GoalLoop.run.__name__ == "run"  # wrappers removed again
