"""Work handed from other threads to the loop's own thread (SPEC §15).

The gateway calls relay's hooks (``admit``, ``on_exchange``, ``goal_tools``) on its request
threads, and a reader thread gets the agent's events. Everything they do touches the running
goal: the store (one SQLite connection, usable from its own thread only), the round's state,
the audit's commands. :class:`Handover` makes all of it run on the loop's thread, one piece at
a time, while that thread waits for the agent: the other threads hand a function over and
(for the hooks) wait for its result. Nothing of the goal is ever touched from two threads.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Handover"]


@dataclass
class _Work:
    fn: Callable[[], Any]
    closed: Any
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None


class Handover:
    """Runs functions of other threads on the thread that created it.

    While it is closed (before :meth:`open`, after :meth:`close`) a hand-over is not run: the
    caller gets its ``closed`` value at once (a request after the round ended).
    """

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self._queue: queue.Queue[_Work] = queue.Queue()
        self._lock = threading.Lock()
        self._open = False

    def open(self) -> None:
        """Take hand-overs (a round's agent starts)."""
        with self._lock:
            self._open = True

    def close(self) -> None:
        """Take no more hand-overs; those not run yet get their ``closed`` value."""
        with self._lock:
            self._open = False
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                return
            work.value = work.closed
            work.done.set()

    def call(self, fn: Callable[[], Any], closed: Any) -> Any:
        """``fn()`` run on the owner's thread; blocks until it ran. ``closed`` when the
        hand-over is closed or ``fn`` raised (the owner's thread then raises it)."""
        if threading.get_ident() == self.owner:
            return fn()
        work = _Work(fn, closed)
        with self._lock:
            if not self._open:
                return closed
            self._queue.put(work)
        work.done.wait()
        return work.value

    def post(self, fn: Callable[[], Any]) -> None:
        """Hand ``fn`` over without waiting for it (dropped while closed)."""
        with self._lock:
            if self._open:
                self._queue.put(_Work(fn, None))

    def serve(self, timeout_s: float) -> bool:
        """On the owner's thread: run the hand-overs waiting now, or the first that comes
        within ``timeout_s`` seconds; returns whether any ran. An exception of a function is
        raised here, after its caller got its ``closed`` value."""
        try:
            work = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return False
        while True:
            try:
                work.value = work.fn()
            except BaseException:
                work.value = work.closed
                raise
            finally:
                work.done.set()
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                return True
