"""Ctrl+C, SIGTERM and ``relay pause`` while a run works (SPEC §10).

The first signal stops the running tool's process group at once and asks the loop to pause at
the next step boundary (exit 130 for Ctrl+C and ``relay pause``, 143 for SIGTERM). A second
Ctrl+C or SIGTERM exits at once: SQLite transactions roll back, and the goal stays resumable.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from relay import tools

PAUSE_SIGNAL = signal.SIGUSR1
"""The signal ``relay pause`` sends to the process that runs the goal."""

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, PAUSE_SIGNAL: 130}


class Interrupts:
    """The pause request of the running process.

    ``requested`` is the signal number of the first request, or None; ``exit_code`` the exit
    code it maps to (130 or 143).
    """

    def __init__(self) -> None:
        self.requested: int | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.requested, 130) if self.requested else 130

    def describe(self) -> str:
        """How the pause was asked for, in words."""
        return {
            signal.SIGINT: "Ctrl+C",
            signal.SIGTERM: "SIGTERM",
            PAUSE_SIGNAL: "relay pause",
        }.get(self.requested or 0, "a signal")

    def request(self, signum: int) -> None:
        """Ask for a pause (also usable from tests and other threads); stops the running tool."""
        if self.requested is None:
            self.requested = signum
        tools.kill_running()

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is not None and signum != PAUSE_SIGNAL:
            tools.kill_running()
            raise KeyboardInterrupt  # the second Ctrl+C/SIGTERM: exit at once
        self.request(signum)

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        """Install the handlers for the duration of a run (main thread only; elsewhere a
        no-op, so that runs in worker threads keep the process's handlers)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.getsignal(s) for s in EXIT_CODES}
        for s in EXIT_CODES:
            signal.signal(s, self._handler)
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
