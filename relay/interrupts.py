"""Ctrl+C, SIGTERM, SIGHUP and ``relay pause`` while a run works (SPEC §10; issues 14, 28).

The first signal stops the running tool's process group at once, abandons a model call in
flight or a retry's wait (:meth:`Interrupts.abandonable`), and asks the loop to pause at once
(exit 130 for Ctrl+C and ``relay pause``, 143 for SIGTERM, 129 for SIGHUP: the terminal
closed). A second Ctrl+C, SIGTERM or SIGHUP exits at once: SQLite transactions roll back, and
the goal stays resumable. Output that cannot be written any more (a closed pipe, a hung-up
terminal: :func:`relay.terminal.on_output_lost`) is a pause request too,
:data:`OUTPUT_LOST` (exit 141, as a process killed by ``SIGPIPE``).

A model call runs in the main thread, inside the SDK's blocking HTTP read. The handler abandons
it the way a ``KeyboardInterrupt`` would: it raises :class:`Interrupted` there, the read returns
at once, and httpx and the SDK close the response and its connection on the way out (the server
sees the client go; a local server stops generating). The handler raises only inside
:meth:`Interrupts.abandonable`, which spans the provider call alone, and never takes a lock.
No worker thread is involved: nothing of the abandoned call outlives it or holds up the exit.
The SDK clients are built with ``max_retries=0`` (relay owns the retries), so no SDK retry
loop runs either; relay's own backoff wait is abandonable too.

:data:`TIME_UP_SIGNAL` comes from the run's watchdog (:mod:`relay.watchdog`) when the time
budget is used up: the running tool's process group is stopped as for a pause, but the run goes
on to its budget's wrap-up step and ends ``budget_limited`` (SPEC §7.4), as when relay's own
check between steps finds the budget used up.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from relay import tools
from relay.terminal import on_output_lost
from relay.watchdog_process import TIME_UP_SIGNAL

if TYPE_CHECKING:
    from relay.watchdog import Watchdog

PAUSE_SIGNAL = signal.SIGUSR1
"""The signal ``relay pause`` sends to the process that runs the goal."""

OUTPUT_LOST = signal.SIGPIPE
"""The pause request of a run whose progress output cannot be written any more. No handler:
Python ignores ``SIGPIPE`` (a write fails with ``EPIPE``), and :mod:`relay.terminal` reports
the failed write (:meth:`Interrupts.output_lost`)."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that ask a run to stop; a second one exits at once."""

HANDLED = (*STOP_SIGNALS, PAUSE_SIGNAL)
"""The signals a run's handler takes."""

EXIT_CODES = {
    signal.SIGINT: 130,
    signal.SIGTERM: 143,
    signal.SIGHUP: 129,
    PAUSE_SIGNAL: 130,
    OUTPUT_LOST: 141,
}

INTERRUPTED_EXIT_CODES = frozenset(EXIT_CODES.values())
"""Exit codes of a run paused by Ctrl+C, ``relay pause``, SIGTERM, SIGHUP or a closed output:
a resumable pause, not a failure (``relay compare`` starts no further run; a batch counts
them below every other outcome)."""


class Interrupted(BaseException):
    """A pause request came while a model call was in flight, during a retry's wait, or
    before the call was sent. A ``BaseException`` like ``KeyboardInterrupt``, so that no
    ``except Exception`` of an SDK or of relay takes it for an API error.

    ``in_flight_s``: seconds the abandoned call had been running; None when no call was in
    flight.
    """

    def __init__(self, in_flight_s: float | None) -> None:
        super().__init__("a pause was requested")
        self.in_flight_s = in_flight_s


class Interrupts:
    """The pause request of the running process.

    ``requested`` is the signal number of the first request, or None; ``exit_code`` the exit
    code it maps to (130 or 143). ``time_up``: the watchdog said the time budget is used up
    (:data:`TIME_UP_SIGNAL`); ``watchdog``: the run's watchdog while it runs.
    """

    def __init__(self) -> None:
        self.requested: int | None = None
        self.time_up = False
        self.watchdog: Watchdog | None = None
        self._ended = False
        """The loop has returned its stop (:meth:`loop_ended`): what follows writes outputs."""
        self._let_go = 0
        self._window: tuple[bool, float] | None = None
        """While a wait the pause request ends is under way (:meth:`abandonable`): whether a
        model call is in flight, and since when (monotonic seconds)."""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.requested, 130) if self.requested else 130

    def describe(self) -> str:
        """How the pause was asked for, in words."""
        return {
            signal.SIGINT: "Ctrl+C",
            signal.SIGTERM: "SIGTERM",
            signal.SIGHUP: "SIGHUP (the terminal closed)",
            PAUSE_SIGNAL: "relay pause",
            OUTPUT_LOST: "a closed output: relay's progress on stderr could not be written "
            "(a closed pipe or terminal)",
        }.get(self.requested or 0, "a signal")

    def request(self, signum: int) -> None:
        """Ask for a pause (also usable from tests and other threads); stops the running tool."""
        if self.requested is None:
            self.requested = signum
        tools.kill_running()

    @contextmanager
    def abandonable(self, in_flight: bool = True) -> Iterator[None]:
        """A wait the first pause request ends at once: a model call in flight
        (``in_flight``) or a retry's backoff.

        Raises:
            Interrupted: a pause was requested before the wait (nothing is started) or
                during it (raised by the signal handler where the wait is: a blocking socket
                read returns at once, and the SDK and httpx close the connection as for a
                ``KeyboardInterrupt``); ``in_flight_s`` says how long a call had run.
        """
        if self.requested is not None:
            raise Interrupted(None)
        self._window = (in_flight, time.monotonic())
        if self.requested is not None:  # came in between: the handler saw no wait
            self._window = None
            raise Interrupted(None)
        try:
            yield
        finally:
            self._window = None

    def output_lost(self) -> None:
        """The run's progress output cannot be written any more: a pause request
        (:data:`OUTPUT_LOST`) unless one came before; safe in a signal handler or thread."""
        self.request(OUTPUT_LOST)

    def loop_ended(self) -> None:
        """The loop has returned its stop: from now on a second Ctrl+C or SIGTERM is let go
        (the outputs are still written, as after the run), and a third one exits at once."""
        self._ended = True

    def _time_up(self, signum: int, frame: FrameType | None) -> None:
        """The watchdog's :data:`TIME_UP_SIGNAL`: the time budget is used up. The running tool
        is stopped; the loop ends the goal at its next check of the budgets."""
        self.time_up = True
        tools.kill_running()

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is not None and signum != PAUSE_SIGNAL:
            tools.kill_running()
            self._let_go += 1
            if self._ended and self._let_go == 1:
                return  # the user pressing twice after the loop ended: the run still reports
            raise KeyboardInterrupt  # the second Ctrl+C/SIGTERM: exit at once
        self.request(signum)
        window, self._window = self._window, None
        if window is not None:  # a model call or a retry's wait: given up at once
            in_flight, since = window
            raise Interrupted(time.monotonic() - since if in_flight else None)

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        """Install the handlers for the duration of a run (main thread only; elsewhere a
        no-op, so that runs in worker threads keep the process's handlers)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.getsignal(s) for s in (*HANDLED, TIME_UP_SIGNAL)}
        for s in HANDLED:
            signal.signal(s, self._handler)
        signal.signal(TIME_UP_SIGNAL, self._time_up)
        try:
            with on_output_lost(self.output_lost):
                yield self
        finally:
            for s, handler in previous.items():
                if self.requested is not None and s != TIME_UP_SIGNAL:
                    handler = _one_more_let_go()
                signal.signal(s, handler)


def _one_more_let_go() -> Callable[[int, FrameType | None], None]:
    """The handler after a run that a signal paused, until its outputs are written: the user's
    next Ctrl+C or SIGTERM (pressing twice) is let go, so that the run still reports; one more
    exits at once (``KeyboardInterrupt``). :func:`handlers_kept` puts the earlier ones back."""
    seen: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)
        if len(seen) > 1:
            raise KeyboardInterrupt

    return handler


@contextmanager
def handlers_kept() -> Iterator[None]:
    """The SIGINT and SIGTERM handlers of before, put back at the end (a run's own handlers
    outlive it until its outputs are written; main thread only, elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


@contextmanager
def outputs_first() -> Iterator[None]:
    """While a run that has ended writes its outputs (summary, ``--json``): one Ctrl+C or
    SIGTERM more (the user pressing twice) is let go, so that the outputs are still written
    and the run's exit code kept; a further one exits at once (``KeyboardInterrupt``). Main
    thread only; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = _one_more_let_go()
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in previous:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
