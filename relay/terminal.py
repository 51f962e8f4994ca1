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

Output that cannot be written any more (issue 28, item 6) - a closed pipe (``relay run … 2>&1
| head -1``: ``EPIPE``), a terminal that hung up (``EIO``), a full disk - is no crash: a
:class:`SafeConsole` then falls silent, its file descriptor goes to ``/dev/null`` (nothing
later fails on it, the interpreter's last flush neither), and the callbacks of
:func:`on_output_lost` are told (a run pauses as for a signal, :mod:`relay.interrupts`).
rich's own answer to ``EPIPE`` would be ``SystemExit(1)``: the run gone with no pause, commit
or message. :func:`write_stdout` writes the ``--json`` object and raises a clear error when
stdout cannot take it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from rich.console import Console

from relay.errors import RelayError

__all__ = [
    "OutputLostError",
    "SafeConsole",
    "colour_off",
    "on_output_lost",
    "printable",
    "reset_output_lost",
    "set_no_color",
    "write_stdout",
]

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
        try:
            super().print(*(printable(o) if isinstance(o, str) else o for o in objects), **kwargs)
        except OSError:  # a terminal that hung up (EIO), a full disk: lost as a closed pipe
            self.on_broken_pipe()

    def on_broken_pipe(self) -> None:
        """The console's file cannot be written any more (rich calls this on ``EPIPE``): from
        now on nothing is printed, and the :func:`on_output_lost` callbacks are told."""
        self.quiet = True
        del self._buffer[:]
        _to_devnull(self.file)
        _LOST_STATE["lost"] = True
        for callback in list(_LOST):
            callback()


_LOST: list[Callable[[], None]] = []
"""The callbacks of :func:`on_output_lost` now registered."""

_LOST_STATE = {"lost": False}
"""Whether a console's output was lost in this invocation (:func:`reset_output_lost`)."""


def reset_output_lost() -> None:
    """A new invocation of relay in this process: no output of it has been lost yet."""
    _LOST_STATE["lost"] = False


@contextlib.contextmanager
def on_output_lost(callback: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``callback()`` is called when a :class:`SafeConsole`'s output
    cannot be written any more (a closed pipe, a hung-up terminal; see the module's
    docstring), and at once when that happened earlier in this invocation. It must return
    at once and raise nothing (it may run in any thread)."""
    _LOST.append(callback)
    if _LOST_STATE["lost"]:
        callback()
    try:
        yield
    finally:
        _LOST.remove(callback)


def _to_devnull(stream: IO[str]) -> None:
    """Point the file descriptor of ``stream`` at ``/dev/null``, so that nothing written
    later (by relay, by the interpreter's final flush) fails on it; a stream without a
    descriptor of its own (a test's capture) is left alone."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)


class OutputLostError(RelayError):
    """stdout could not take a command's output (``--json`` to a full disk, a closed pipe)."""


def write_stdout(text: str, what: str) -> None:
    """Write ``text`` and a newline to stdout and flush it.

    Args:
        text: the output, e.g. a JSON object.
        what: what it is, for the message (``--json``).

    Raises:
        OutputLostError: stdout could not be written, naming ``what`` and why (stdout then
            goes to ``/dev/null``: the interpreter's last flush does not fail again).
    """
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except OSError as exc:
        _to_devnull(sys.stdout)
        raise OutputLostError(
            f"cannot write the {what} output to stdout ({exc.strerror or exc})"
        ) from None
