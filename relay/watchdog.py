"""relay's side of the run's watchdog (SPEC §7.4, §14; docs/sandbox.md).

:func:`watched_run` starts the watchdog process (:mod:`relay.watchdog_process`) for the
duration of a run: it knows relay's PID and the run's deadline (the time budget left), hears of
every command relay starts (:func:`relay.tools.running.observe`), continues relay when a
command stops it, and at the deadline stops the running command and tells relay, which ends the
run as its own time budget check would (:class:`relay.interrupts.Interrupts`, ``time_up``).

relay watches the watchdog in turn, from a thread of its own: a watchdog that was stopped is
continued, one that is gone (killed by a command) is started again, and either is noted. Where
the model's commands run in a PID namespace (bubblewrap, or :mod:`relay.sandbox.pidns`) they
see neither; elsewhere they see both, and one that stops both at once is the residual
docs/sandbox.md names.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay.tools import running
from relay.watchdog_process import TICK_S, process_state

if TYPE_CHECKING:
    from relay.loop import LoopSetup

__all__ = ["PROGRAM", "Watchdog", "record_killed", "watched_run"]

PROGRAM = Path(__file__).with_name("watchdog_process.py")
STOP_WAIT_S = 2.0
"""Seconds relay waits for the watchdog to leave after the run's end before killing it."""


class Watchdog:
    """The watchdog process of one run, and the thread that watches it.

    Args:
        spec: what the process is told (:mod:`relay.watchdog_process`): ``relay_pid``,
            ``relay_start``, ``deadline`` (``time.monotonic()`` seconds, or None without a
            time budget), ``signal`` (relay handles the time-up signal), ``store``,
            ``goal_id``, ``run_id``, ``package_parent``.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.proc: subprocess.Popen[bytes] | None = None
        self._notes: list[str] = []
        """What relay and the watchdog did, in words; taken by the loop (:meth:`take_notes`)."""
        self._lock = threading.Lock()
        self._notes_lock = threading.Lock()
        self._commands: dict[int, int] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.restarts = 0

    def start(self) -> bool:
        """Start the process and the thread that watches it; False (noted) when it cannot."""
        if not self._spawn():
            return False
        running.observe(self._observe)
        self._thread = threading.Thread(target=self._guard, name="relay-watchdog", daemon=True)
        self._thread.start()
        return True

    def _spawn(self) -> bool:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(PROGRAM), json.dumps(self.spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # no signal to a command's group or relay's reaches it
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
                close_fds=True,
            )
        except OSError as exc:
            self.note(f"the watchdog could not start: {exc}")
            return False
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdin.fileno(), False)  # relay never waits for it
        with self._lock:
            self.proc = proc
            for pid, start in self._commands.items():
                self._send(f"+{pid} {start}")
        return True

    def _send(self, line: str) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            os.write(proc.stdin.fileno(), f"{line}\n".encode())

    def _observe(self, pid: int, started: bool) -> None:
        """A command's first process started or ended (:func:`relay.tools.running.register`)."""
        with self._lock:
            if started:
                state = process_state(pid)
                if state is None:
                    return
                self._commands[pid] = state[1]
                self._send(f"+{pid} {state[1]}")
            elif self._commands.pop(pid, None) is not None:
                self._send(f"-{pid}")

    def _guard(self) -> None:
        """The thread: the watchdog's notes, and the watchdog continued or started again."""
        while not self._stopping.is_set():
            proc = self.proc
            if proc is None or proc.stdout is None:
                return
            with contextlib.suppress(OSError, ValueError):
                if select.select([proc.stdout], [], [], TICK_S)[0]:
                    data = os.read(proc.stdout.fileno(), 65536)
                    self._heard(data)
            if self._stopping.is_set():
                return
            self._look_after(proc)

    def _look_after(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is not None:
            self.restarts += 1
            self.note(
                f"the watchdog (pid {proc.pid}) ended while the run went on (exit "
                f"{proc.returncode}; a command killed it?): relay started a new one"
            )
            self._close(proc)
            self._spawn()
            return
        state = process_state(proc.pid)
        if state is not None and state[0] == "T":
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGCONT)
            self.note(f"the watchdog (pid {proc.pid}) was stopped: relay continued it")

    def note(self, text: str) -> None:
        """Keep ``text`` for the run's events (any thread)."""
        with self._notes_lock:
            self._notes.append(text)

    def _heard(self, data: bytes) -> None:
        for line in data.decode(errors="replace").splitlines():
            self.note(line)

    def take_notes(self) -> list[str]:
        """The notes since the last call (for the run's events; any thread)."""
        with self._notes_lock:
            taken, self._notes = self._notes, []
        return taken

    def stop(self) -> None:
        """The run ended: the watchdog is told and leaves (killed after :data:`STOP_WAIT_S`),
        before relay's signal handlers are put back. Never raises."""
        self._stopping.set()
        running.observe(self._observe, on=False)
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signal.SIGCONT)
        self._send("end")
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._close(proc)
        with contextlib.suppress(OSError, ValueError):
            self._heard(proc.stdout.read() or b"" if proc.stdout is not None else b"")

    @staticmethod
    def _close(proc: subprocess.Popen[bytes]) -> None:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()


def _spec(setup: LoopSetup, signals: bool) -> dict[str, Any]:
    """What the watchdog of ``setup``'s run is told (see :class:`Watchdog`)."""
    budget = setup.config.limits.time_budget
    deadline = None
    if budget is not None:
        deadline = time.monotonic() + max(0.0, budget - setup.base_elapsed_s)
    me = process_state(os.getpid())
    return {
        "relay_pid": os.getpid(),
        "relay_start": me[1] if me is not None else 0,
        "deadline": deadline,
        "signal": signals,
        "store": str(setup.store.path),
        "goal_id": setup.goal_id,
        "run_id": setup.run_id,
        "package_parent": str(Path(__file__).resolve().parents[1]),
    }


@contextlib.contextmanager
def watched_run(setup: LoopSetup) -> Iterator[Watchdog | None]:
    """The run's watchdog for the duration of the block (Linux; None elsewhere). Start it
    inside :meth:`relay.interrupts.Interrupts.installed`: it signals relay only while relay's
    handlers are in place (main thread), and it has left before they are put back. Its notes
    are recorded as ``watchdog`` events of the run."""
    if not sys.platform.startswith("linux"):
        yield None
        return
    main = threading.current_thread() is threading.main_thread()
    dog = Watchdog(_spec(setup, signals=main))
    setup.interrupts.watchdog = dog
    if dog.start():
        deadline = dog.spec["deadline"]
        when = "" if deadline is None else " and ends the run at its time budget's end"
        setup.store.add_event(
            setup.goal_id,
            "watchdog",
            f"watchdog started (pid {dog.proc.pid if dog.proc else '?'}): it continues relay "
            f"when a command stops it{when}; {protection(setup)}",
            run_id=setup.run_id,
        )
    try:
        yield dog
    finally:
        dog.stop()
        setup.interrupts.watchdog = None
        for note in dog.take_notes():
            setup.store.add_event(setup.goal_id, "watchdog", note, run_id=setup.run_id)


def protection(setup: LoopSetup) -> str:
    """Whether the model's commands can see relay and the watchdog, in words."""
    from relay.sandbox.pidns import pid_namespace

    if setup.sandbox.active:
        return "the model's commands run in bubblewrap's PID namespace: they see neither"
    if setup.sandbox.pid_namespace:
        return "the model's commands run in PID namespaces of their own: they see neither"
    found = pid_namespace()
    why = found.reason or "turned off (sandbox.pid_namespace: off)"
    return (
        f"the model's commands run without a PID namespace ({why}): they can see and stop "
        "relay and the watchdog, which continue each other (not when both are stopped at once)"
    )


def record_killed(spec: dict[str, Any]) -> None:
    """Record that relay (``spec["relay_pid"]``) died without ending its run: an event of the
    goal and the run's end (status ``killed``), so that ``relay status`` says so; the goal
    stays ``active``, and ``relay resume`` continues it as after any crash (SPEC §10). Called
    in the watchdog process."""
    from relay.store import Store

    store = Store(Path(spec["store"]))
    try:
        record = store.run_record(spec["run_id"])
        if record is not None and record.get("ended_at"):
            return  # relay ended the run after all
        store.add_event(
            spec["goal_id"],
            "run_killed",
            f"relay (pid {spec['relay_pid']}) was killed before it ended run {spec['run_id']}; "
            "the watchdog stopped its commands. `relay resume` continues the goal",
            run_id=spec["run_id"],
        )
        store.end_run(spec["run_id"], "killed", 137)
    finally:
        store.close()
