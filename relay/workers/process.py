"""One agent process of one round (SPEC §15): started in its own process group with stdin
closed, its stdout read line by line by a thread that hands each line to the loop's thread,
its stderr kept in the round's folder, and stopped with its whole group when the round ends
(the agent's MCP server and any command it left running included)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from relay.workers.handover import Handover

__all__ = ["AgentProcess"]

POLL_S = 0.2
"""How often the loop's thread looks at the user's pause and the process while waiting."""

STRAGGLER_S = 5.0
"""Seconds the output may stay open after the agent exited (a command it left running holds
it) before the group is stopped."""

STOP_GRACE_S = 5.0
"""Seconds between SIGTERM and SIGKILL when the group is stopped."""


class AgentProcess:
    """Runs ``command`` in ``cwd`` with exactly ``env``.

    Args:
        command, env, cwd: what to run, its whole environment, its working directory.
        folder: the round's folder: ``events.jsonl`` (stdout) and ``stderr.txt`` go there.
        handover: where each stdout line goes (``on_line`` runs on the loop's thread).
        on_line: called with each line of stdout, in order.
    """

    def __init__(
        self,
        command: list[str],
        env: dict[str, str],
        cwd: Path,
        folder: Path,
        handover: Handover,
        on_line: Callable[[str], None],
    ) -> None:
        self.handover = handover
        self.on_line = on_line
        self.folder = folder
        self._eof = threading.Event()
        with open(folder / "stderr.txt", "wb") as stderr:
            self.proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
            )
        self._reader = threading.Thread(target=self._read, name="relay-agent-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.folder / "events.jsonl", "wb") as kept:
            for raw in self.proc.stdout:
                kept.write(raw)
                line = raw.decode("utf-8", "replace").strip()
                if line:
                    self.handover.post(lambda line=line: self.on_line(line))
        self._eof.set()

    def wait(self, stop_now: Callable[[], bool]) -> int | None:
        """Serve the hand-overs until the agent exited and its output was read; stops the
        group early when ``stop_now()`` (asked between hand-overs) says so. Returns the exit
        code (negative: killed by that signal)."""
        exited_at: float | None = None
        while True:
            self.handover.serve(POLL_S)
            if stop_now():
                self.stop()
            if self.proc.poll() is not None:
                exited_at = exited_at or time.monotonic()
                if self._eof.is_set() or time.monotonic() - exited_at > STRAGGLER_S:
                    break
        self._eof.wait(STOP_GRACE_S)
        while self.handover.serve(0):  # the last lines
            pass
        return self.proc.returncode

    def stop(self) -> None:
        """Stop the agent's process group: SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                return
            try:
                self.proc.wait(STOP_GRACE_S)
                if sig == signal.SIGTERM:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # what is left of the group
                return
            except subprocess.TimeoutExpired:
                continue
            except (ProcessLookupError, PermissionError):
                return
