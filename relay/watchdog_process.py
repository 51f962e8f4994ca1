"""The run's watchdog process (SPEC §7.4, §14; docs/sandbox.md): the time budget enforced by a
process the model's commands cannot stop.

relay starts it at the start of a run (:mod:`relay.watchdog`) in a session of its own, so that
no signal to a command's process group reaches it, and where the kernel allows it the model's
commands run in PID namespaces that do not show it (:mod:`relay.sandbox.pidns`). Every
:data:`TICK_S` it looks at relay's ``/proc/<pid>/stat``:

* relay stopped (state ``T``, a ``kill -STOP`` from a model's command): SIGCONT;
* the run's deadline passed (its time budget) and relay has not ended the run: the commands
  running now are killed with every process below them, relay is continued and sent
  :data:`TIME_UP_SIGNAL`, which it takes for "time budget used up" (the goal ends
  ``budget_limited``, ``time_budget``, as when relay sees it itself);
* relay gone (``kill -9``): its commands are killed, and the run is recorded as killed in the
  store (an event and the run's end), so that ``relay status`` says so and ``relay resume``
  continues the goal as after any crash.

relay tells it on its standard input of each command's first process (``+PID STARTTIME``,
``-PID``) and of the run's end (``end``: it exits). It tells relay what it did on its standard
output, one note a line. It starts with ``python -I -S`` and uses only the standard library until
relay is found dead, so that it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time

TICK_S = 0.1
"""Seconds between two looks at relay."""
TIME_UP_SIGNAL = signal.SIGUSR2
"""The signal that tells relay its time budget is used up (:mod:`relay.interrupts`)."""
NOTE_EVERY_S = 1.0
"""At most one note a second about continuing relay (a command may stop it in a loop)."""


def process_state(pid: int) -> tuple[str, int] | None:
    """``(state, start time)`` of process ``pid`` from ``/proc/<pid>/stat`` (the state letter,
    e.g. ``R``, ``S``, ``T``; the start time in clock ticks after boot), or None when it is
    gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        state, start = fields[0].decode(), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None
    return None if state in ("Z", "X") else (state, start)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first looked up through
    ``/proc/<pid>/task/<tid>/children``), deepest last; bounded."""
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < 100_000:
        current = todo.pop()
        try:
            tids = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{current}/task/{tid}/children", "rb") as fh:
                    kids = [int(word) for word in fh.read().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


def kill_tree(pid: int, start: int) -> None:
    """SIGKILL the command whose first process is ``pid`` (started at ``start``, so that a
    reused PID is left alone): its process group, and every process below it (a sandbox's or
    a PID namespace's init among them: its namespace ends with it)."""
    current = process_state(pid)
    if current is None or current[1] != start:
        return
    below = descendants(pid)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for each in (pid, *below):
        with contextlib.suppress(OSError):
            os.kill(each, signal.SIGKILL)


class Watch:
    """The watchdog's state: relay, its deadline and the commands it runs now."""

    def __init__(self, spec: dict[str, object]) -> None:
        self.relay = int(spec["relay_pid"])  # type: ignore[call-overload]
        self.relay_start = int(spec["relay_start"])  # type: ignore[call-overload]
        deadline = spec.get("deadline")
        self.deadline = float(deadline) if deadline is not None else None  # type: ignore[arg-type]
        self.signal_relay = bool(spec.get("signal"))
        self.spec = spec
        self.commands: dict[int, int] = {}
        self.fired = False
        self.continued = 0
        self.noted_at = 0.0

    def note(self, text: str) -> None:
        """Tell relay (a line on the standard output; dropped when the pipe is full)."""
        with contextlib.suppress(OSError):
            os.write(1, (text.replace("\n", " ") + "\n").encode())

    def take(self, line: str) -> bool:
        """Apply one line from relay; False for ``end`` (the run ended)."""
        word = line.strip()
        if word == "end":
            return False
        with contextlib.suppress(ValueError, IndexError):
            if word.startswith("+"):
                pid, start = word[1:].split()
                self.commands[int(pid)] = int(start)
            elif word.startswith("-"):
                self.commands.pop(int(word[1:]), None)
        return True

    def look(self, now: float) -> bool:
        """One look at relay: continue it, enforce the deadline. False when relay is gone."""
        state = process_state(self.relay)
        if state is None or state[1] != self.relay_start:
            return False
        if state[0] == "T":
            with contextlib.suppress(OSError):
                os.kill(self.relay, signal.SIGCONT)
            self.continued += 1
            if now - self.noted_at >= NOTE_EVERY_S:
                self.noted_at = now
                self.note(
                    f"relay (pid {self.relay}) was stopped (SIGSTOP) and the watchdog continued "
                    f"it (SIGCONT; {self.continued} time{'s' if self.continued > 1 else ''} so far)"
                )
        if self.deadline is not None and now >= self.deadline:
            self.time_up()
        return True

    def time_up(self) -> None:
        """At and after the deadline: kill the running commands; once, tell relay."""
        for pid, start in list(self.commands.items()):
            kill_tree(pid, start)
        if self.fired:
            return
        self.fired = True
        with contextlib.suppress(OSError):
            os.kill(self.relay, signal.SIGCONT)
            if self.signal_relay:
                os.kill(self.relay, TIME_UP_SIGNAL)
        self.note(
            f"time budget used up: the watchdog stopped {len(self.commands)} running "
            f"command{'s' if len(self.commands) != 1 else ''} and told relay to end the run"
        )


def watch(spec: dict[str, object]) -> int:
    """Watch relay until the run ends (``end`` on the standard input: 0) or relay is gone
    (the run is recorded as killed: 3)."""
    state = Watch(spec)
    open_pipe = True
    while True:
        if open_pipe:
            ready = select.select([0], [], [], TICK_S)[0]
            if ready:
                data = os.read(0, 65536)
                if not data:
                    open_pipe = False  # relay closed it without "end": it died, or is dying
                for line in data.decode(errors="replace").splitlines():
                    if not state.take(line):
                        return 0
        else:
            time.sleep(TICK_S)
        if not state.look(time.monotonic()):
            break
    for pid, start in state.commands.items():
        kill_tree(pid, start)
    _record_killed(spec)
    return 3


def _record_killed(spec: dict[str, object]) -> None:
    """Record in the run's store that relay died without ending the run (relay's own code,
    imported only now)."""
    with contextlib.suppress(Exception):
        import site

        site.main()  # started with -S: the site packages relay needs, now
        sys.path.insert(0, str(spec["package_parent"]))
        from relay.watchdog import record_killed

        record_killed(spec)


def main(argv: list[str]) -> int:
    """``watchdog_process.py SPEC_JSON``: the spec relay wrote (:mod:`relay.watchdog`)."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)  # only relay's "end" ends it
    os.set_blocking(1, False)
    try:
        spec = json.loads(argv[1])
        return watch(spec)
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        print(f"watchdog: bad start: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
