"""Text from the model reaches the user's terminal as text, never as control sequences (SPEC §14).

Command output, file names, handoff notes and questions come from the model. Printed as they
are, an escape sequence in them could clear the screen and print a fake result, move the
cursor over relay's own lines, set the window title, or put a command into the clipboard
(OSC 52). Every console relay prints to is a :class:`SafeConsole`, and plain ``print`` calls
of such text go through :func:`printable`: control characters (C0 but tab and newline, DEL,
C1) are shown as ``\\xNN``. relay's own colours come from rich markup, which stays.
"""

from __future__ import annotations

import os
import re
from typing import Any

from rich.console import Console

__all__ = ["SafeConsole", "printable"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


PIPED_WIDTH = 1000
"""Columns of a console whose output is no terminal (a pipe, a file, a CI log): wide enough
that no table row or log line is wrapped (rich would assume 80), unless ``COLUMNS`` says
otherwise."""


class SafeConsole(Console):
    """A rich console whose ``print`` shows control characters in string arguments as text.
    Piped, it does not wrap lines at 80 columns (:data:`PIPED_WIDTH`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "width" not in kwargs and not self.is_terminal and not os.environ.get("COLUMNS"):
            self.width = PIPED_WIDTH

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        super().print(*(printable(o) if isinstance(o, str) else o for o in objects), **kwargs)
