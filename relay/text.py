"""Small text helpers shared by relay's reports, messages and findings."""

from __future__ import annotations

__all__ = ["counted", "first_line", "shorten"]


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``counted(1, "round")`` is ``"1 round"``,
    ``counted(3, "tool call")`` is ``"3 tool calls"`` (relay's nouns all take an ``s``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def shorten(line: str, limit: int) -> str:
    """``line`` cut to at most ``limit`` characters (at least 1), a final ``…`` marking a cut.

    Example: ``shorten("abcdef", 4) == "abc…"``; a line that fits is returned unchanged.
    """
    limit = max(1, limit)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def first_line(text: str | None, limit: int | None = None, *, default: str = "") -> str:
    """The first line of ``text`` that is not blank, stripped, and :func:`shorten`-ed to
    ``limit`` characters when a limit is given; ``default`` when there is none (``None``
    counts as empty)."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), None)
    if line is None:
        return default
    return line if limit is None else shorten(line, limit)
