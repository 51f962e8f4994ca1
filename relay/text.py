"""Small text helpers shared by the files relay writes for people (progress file, reports,
summaries)."""

from __future__ import annotations


def first_line(text: str | None, limit: int = 120) -> str:
    """The first non-blank line of ``text`` (stripped; ``""`` for None), cut to ``limit``
    characters with a trailing ``…`` when longer."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"
