"""relay's consoles (relay.terminal): model text shown as text, and piped output that a
person or a CI log reads whole — no line wrapped at 80 columns (issue 13, item 9)."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from relay.terminal import SafeConsole


def test_piped_output_is_not_wrapped_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = SafeConsole(file=out, highlight=False)
    long_line = "round 3 · round_ended: " + "x" * 150
    console.print(long_line)
    table = Table("name", "message")
    table.add_row("alpha", "y" * 120)
    console.print(table)
    lines = out.getvalue().splitlines()
    assert long_line in lines
    assert any("y" * 120 in line for line in lines)


def test_columns_and_an_explicit_width_still_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    out = io.StringIO()
    SafeConsole(file=out).print("z" * 100)
    assert max(len(line) for line in out.getvalue().splitlines()) == 40
    monkeypatch.delenv("COLUMNS")
    out = io.StringIO()
    SafeConsole(file=out, width=50).print("z" * 100)
    assert max(len(line) for line in out.getvalue().splitlines()) == 50


def test_control_characters_are_shown_as_text() -> None:
    out = io.StringIO()
    SafeConsole(file=out).print("a\x1b[2Jb")
    assert out.getvalue().strip() == "a\\x1b[2Jb"
