"""relay.text: the shared first-line and shortening helpers."""

from __future__ import annotations

from relay.text import first_line, shorten


def test_shorten_keeps_a_line_that_fits_and_marks_a_cut() -> None:
    assert shorten("abcdef", 6) == "abcdef"
    assert shorten("abcdef", 4) == "abc…"
    assert len(shorten("x" * 500, 100)) == 100
    assert shorten("abc", 0) == "…"


def test_first_line_skips_blank_lines_and_strips() -> None:
    assert first_line("\n  \n  first  \nsecond") == "first"
    assert first_line(None) == ""
    assert first_line("   \n\t", default="no note") == "no note"
    assert first_line("y" * 200) == "y" * 200
    assert first_line("y" * 200, 10) == "y" * 9 + "…"


def test_counted_says_one_round_and_two_rounds() -> None:
    from relay.text import counted

    assert [counted(n, "round") for n in (0, 1, 2)] == ["0 rounds", "1 round", "2 rounds"]
    assert counted(1, "tool call") == "1 tool call"
