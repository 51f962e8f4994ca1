"""Text from the model reaches the user's terminal as text, never as control sequences (SPEC §14).

Command output, file names, handoff notes and questions come from the model. Printed as they
are, an escape sequence in them could clear the screen and print a fake result, move the
cursor over relay's own lines, set the window title, or put a command into the clipboard
(OSC 52). Every console relay prints to is a :class:`SafeConsole`, and plain ``print`` calls
of such text go through :func:`printable`: control characters (C0 but tab and newline, DEL,
C1) are shown as ``\\xNN``. relay's own colours come from rich markup, which stays.

Colours and styles are off — no escape sequence at all, not even bold — when the ``NO_COLOR``
variable is set to anything but empty text (https://no-color.org) or ``--no-color`` is given
(:func:`set_no_color`); rich alone would still write bold and dim with ``NO_COLOR``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from rich.console import Console

__all__ = ["SafeConsole", "colour_off", "printable", "set_no_color"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


PIPED_WIDTH = 1000
"""Columns of a console whose output is no terminal (a pipe, a file, a CI log): wide enough
that no table row or log line is wrapped (rich would assume 80), unless ``COLUMNS`` says
otherwise."""


_NO_COLOR_FLAG = {"given": False}
"""Whether ``--no-color`` was given in this invocation (:func:`set_no_color`)."""


def set_no_color(given: bool) -> None:
    """Record whether ``--no-color`` was given: consoles made from now on, and those that
    :meth:`SafeConsole.follow_colour_setting` updates, write no escape sequences."""
    _NO_COLOR_FLAG["given"] = given


def colour_off() -> bool:
    """Whether output carries no colour or style: ``--no-color`` or a non-empty ``NO_COLOR``."""
    return _NO_COLOR_FLAG["given"] or bool(os.environ.get("NO_COLOR"))


class SafeConsole(Console):
    """A rich console whose ``print`` shows control characters in string arguments as text.
    Piped, it does not wrap lines at 80 columns (:data:`PIPED_WIDTH`). With :func:`colour_off`
    it writes no escape sequence."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if colour_off():
            kwargs["color_system"] = None
        super().__init__(*args, **kwargs)
        if "width" not in kwargs and not self.is_terminal and not os.environ.get("COLUMNS"):
            self.width = PIPED_WIDTH

    def follow_colour_setting(self) -> None:
        """Apply :func:`colour_off` now (for a console made before the command line was read,
        such as relay's stderr console)."""
        self._color_system = None if colour_off() else self._detect_color_system()

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        super().print(*(printable(o) if isinstance(o, str) else o for o in objects), **kwargs)
