"""The ``shell`` tool (SPEC §5): one command in ``/bin/bash``, bounded in time and in memory.

The command runs in the repository root, in its own process group (session), with stdin closed,
in the run's sandbox (:mod:`relay.sandbox`: bubblewrap, or relay's reaper when it is off) and
with an allow-listed environment without credentials. No process it starts outlives it. Both
pipes are read with a selector; every byte goes to an output file under ``run_dir/outputs/``
(its head and tail past ``ctx.kept_output_bytes``) while memory keeps only a head and a tail of
each stream (:mod:`relay.tools.shell_output`). A timeout - or :func:`kill_running` - sends SIGTERM to the whole process group, then
SIGKILL after a grace period, and reading stops within a bounded time even when a background
child keeps the pipes open.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from relay import treewrites
from relay.sandbox.env import is_credential_name, scrubbed_env
from relay.sandbox.kept import SessionProcess
from relay.sandbox.reaper import stop_run_processes
from relay.tools.base import ToolContext, ToolResult
from relay.tools.running import Process, Running, kill_running, register, signal_group
from relay.tools.shell_output import (
    Ending,
    OutputFile,
    Stream,
    fmt_seconds,
    is_cut,
    render_result,
    saved_output,
)

__all__ = ["is_credential_name", "kill_running", "run_shell", "scrubbed_env"]

BASH = "/bin/bash"
KILL_GRACE_S = 2.0
"""Seconds between SIGTERM and SIGKILL to the process group."""
ABANDON_AFTER_KILL_S = 1.0
"""Seconds after SIGKILL after which the pipes are abandoned even if still open."""
BACKGROUND_GRACE_S = 1.0
"""Seconds to wait, after the command itself exited, for background children holding the
pipes to finish before their process group is killed."""
READ_ONLY_HINT_WHEN = "Read-only file system"
READ_ONLY_HINT = (
    "[relay] In relay's sandbox .git, relay's files, the protected paths and everything outside "
    "the repository (but /tmp) are read-only. relay commits your changes after each round: use "
    "plain mv/rm instead of git mv/rm/add/commit, and do not write outside the repository."
)
"""Appended to a sandboxed command's result that hit a read-only file system, so that the
model learns the rule instead of retrying (SPEC §14)."""
_READ_SIZE = 65536
_POLL_S = 0.1

# --- the tool ------------------------------------------------------------------------------


def run_shell(
    ctx: ToolContext,
    command: str,
    timeout_s: int | None = None,
    *,
    env: Mapping[str, str] | None = None,
    writable: Sequence[Path] = (),
    pass_fds: Sequence[int] = (),
    plain: bool = False,
) -> ToolResult:
    """Run ``command`` with ``/bin/bash -c`` in the repository root.

    Args:
        ctx: the tool context (repository root, run folder, output limit, timeouts).
        command: the bash command line.
        timeout_s: the model's timeout in whole seconds (positive); default
            ``ctx.shell_timeout_s``, capped at ``ctx.max_shell_timeout_s``.
        env: variables added to the command's allow-listed environment (e.g. ``CI=1`` for the
            audit); names that look like credentials are dropped all the same.
        writable: extra absolute folders the command may write inside the sandbox (e.g. the
            folder of relay's own test report); without a sandbox everything the user may
            write is writable anyway.
        pass_fds: file descriptors the command inherits (the audit's report channel).
        plain: the environment names nothing of relay (no ``RELAY_*`` variable): the
            audit's run of a command as a user would run it (issue 27).

    Returns:
        ``exit code: N`` (or the timeout / stop notice) followed by ``--- stdout ---`` and
        ``--- stderr ---`` sections (empty ones omitted). At most about
        ``ctx.output_limit_bytes`` characters of output are shown: head + a marker naming the
        cut byte count and the full-output file + tail (a cut output that is mostly not text:
        one line naming its size). ``is_error`` for a non-zero exit, a
        timeout, a stop by :func:`kill_running` or a command that could not start.
    """
    if not isinstance(command, str) or not command.strip():
        return ToolResult("shell: command is empty", is_error=True)
    if "\x00" in command:
        return ToolResult("shell: command contains a NUL byte", is_error=True)
    timing = _timeout(ctx, timeout_s)
    if isinstance(timing, ToolResult):
        return timing
    timeout, notes = timing
    limit = max(64, ctx.output_limit_bytes)
    output = OutputFile(ctx.run_dir, limit, ctx.kept_output_bytes)
    argv = [BASH, "-c", command]
    environment = ctx.sandbox.environment({**(env or {}), "RELAY_RUN": ctx.run_dir.name})
    if plain:
        environment = {k: v for k, v in environment.items() if not k.startswith("RELAY_")}
    kept = None
    if (
        ctx.session is not None
        and not (writable or pass_fds or plain)
        and ctx.session.serves(ctx.repo_root, ctx.sandbox)
    ):
        kept = ctx.session.process(argv, environment)
    try:
        proc = kept or subprocess.Popen(
            ctx.sandbox.command(
                argv, root=ctx.repo_root, protected=ctx.protected_paths, writable=writable
            ),
            cwd=ctx.repo_root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
            start_new_session=True,
            bufsize=0,
            pass_fds=tuple(pass_fds),
        )
    except (OSError, ValueError) as exc:
        output.discard()
        return ToolResult(f"shell: cannot start {BASH}: {exc}", is_error=True)
    streams = {"stdout": Stream(limit), "stderr": Stream(limit)}
    try:
        ending = _supervise(proc, streams, output, timeout, ctx.sandbox.active, ctx.run_dir.name)
    finally:
        treewrites.wrote_anything()  # what a remembered scan of the tree found may be stale
    marker, full_path = saved_output(output, is_cut(streams, limit), ctx.redact)
    lines = render_result([*ending.headline(timeout), *notes], streams, limit, marker)
    if ctx.sandbox.active and READ_ONLY_HINT_WHEN in "\n".join(lines):
        lines.append(READ_ONLY_HINT)
    return ToolResult(
        "\n".join(lines),
        is_error=ending.is_error,
        exit_code=ending.code,
        timed_out=ending.timed_out,
        full_output_path=full_path,
    )


def _timeout(ctx: ToolContext, timeout_s: int | None) -> tuple[float, list[str]] | ToolResult:
    """The command's timeout in seconds and the note when it was capped, or the error result
    for a ``timeout_s`` that is not a positive whole number."""
    if timeout_s is None:
        return float(ctx.shell_timeout_s), []
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or timeout_s < 1:
        return ToolResult(
            f"shell: timeout_s must be a positive whole number of seconds (got {timeout_s!r})",
            is_error=True,
        )
    if timeout_s > ctx.max_shell_timeout_s:
        timeout = float(ctx.max_shell_timeout_s)
        return timeout, [
            f"(timeout_s {timeout_s} capped at the maximum of {fmt_seconds(timeout)} s)"
        ]
    return float(timeout_s), []


def _supervise(
    proc: Process,
    streams: dict[str, Stream],
    output: OutputFile,
    timeout: float,
    sandboxed: bool,
    run_mark: str,
) -> Ending:
    """Read the command's output until it ended (:func:`_pump`), reap it, and make sure no
    process of its group lives on; the output file is closed. ``run_mark`` is the command's
    ``RELAY_RUN``: a sandboxed command that was stopped is followed by a sweep of the processes
    that carry it (a sandbox init orphaned in the instant between :func:`relay.tools.running.signal_group`'s look
    at the monitor's children and the monitor's death)."""
    entry = Running(proc, sandboxed)
    register(entry)
    timed_out = stragglers = abandoned = False
    group_may_live = True
    try:
        timed_out, stragglers, abandoned = _pump(proc, entry, streams, output, timeout)
        try:
            proc.wait(timeout=KILL_GRACE_S + ABANDON_AFTER_KILL_S)
        except subprocess.TimeoutExpired:
            signal_group(entry, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=ABANDON_AFTER_KILL_S)
        group_may_live = timed_out or stragglers or abandoned or entry.interrupted
    finally:
        register(entry, on=False)
        if group_may_live:
            signal_group(entry, signal.SIGKILL)
            if sandboxed:
                stop_run_processes(run_mark, wait_s=ABANDON_AFTER_KILL_S)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=ABANDON_AFTER_KILL_S)
        output.close()
    return Ending(proc.returncode, timed_out, entry.interrupted, stragglers)


@dataclass
class _Clock:
    """When a running command was seen to exit and when relay signalled its group: the
    timeout, the grace for background children, SIGTERM, then SIGKILL, then giving up."""

    proc: Process
    entry: Running
    deadline: float
    timed_out: bool = False
    stragglers: bool = False
    sigterm_at: float | None = None
    sigkill_at: float | None = None
    exited_at: float | None = None

    def _begin_kill(self, now: float) -> None:
        if self.sigterm_at is None:
            self.sigterm_at = now
            signal_group(self.entry, signal.SIGTERM)

    def advance(self, now: float, pipes_open: bool) -> bool | None:
        """Signal the group when a limit passed. Returns None to keep reading, False when the
        command exited and both pipes reached EOF, True when the pipes must be abandoned
        (still open :data:`ABANDON_AFTER_KILL_S` after SIGKILL)."""
        if self.exited_at is None and self.proc.poll() is not None:
            self.exited_at = now
        if self.sigterm_at is None:
            if self.entry.interrupted:
                self.sigterm_at = now  # kill_running already sent SIGTERM
            elif self.exited_at is None and now >= self.deadline:
                self.timed_out = True
                self._begin_kill(now)
        if self.exited_at is not None and not pipes_open:
            return False
        exited = self.exited_at
        if exited is not None and self.sigterm_at is None and now >= exited + BACKGROUND_GRACE_S:
            self.stragglers = True  # the pipes are still open: background children hold them
            self._begin_kill(now)
        if self.sigterm_at is not None:
            if self.sigkill_at is None and now >= self.sigterm_at + KILL_GRACE_S:
                self.sigkill_at = now
                signal_group(self.entry, signal.SIGKILL)
            if self.sigkill_at is not None and now >= self.sigkill_at + ABANDON_AFTER_KILL_S:
                return True
        return None

    def wait_s(self, now: float) -> float:
        """How long the next wait for output may take, in seconds."""
        if self.sigterm_at is None and self.exited_at is None:
            return max(0.0, min(_POLL_S, self.deadline - now))
        return _POLL_S


def _pump(
    proc: Process,
    entry: Running,
    streams: dict[str, Stream],
    output: OutputFile,
    timeout: float,
) -> tuple[bool, bool, bool]:
    """Read both pipes until EOF (or until they are abandoned after a kill), enforcing the
    timeout. The process's exit wakes the wait too (a pidfd, where the kernel has them), so
    that the call ends when the command does, not at the next poll. Returns ``(timed_out,
    stragglers_killed, pipes_abandoned)``."""
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, streams["stdout"])
    selector.register(proc.stderr, selectors.EVENT_READ, streams["stderr"])
    exit_fd = _exit_fd(proc)
    if exit_fd is not None:
        selector.register(exit_fd, selectors.EVENT_READ, None)
    clock = _Clock(proc, entry, time.monotonic() + timeout)
    try:
        while True:
            now = time.monotonic()
            pipes = [k for k in selector.get_map().values() if k.data is not None]
            abandoned = clock.advance(now, bool(pipes))
            if abandoned is not None:
                return clock.timed_out, clock.stragglers, abandoned
            wait = clock.wait_s(now)
            if not selector.get_map():
                # Both pipes are closed and no pidfd tells of the exit: wait for the process
                # itself, not for an empty selector (which would sleep the whole interval).
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait)
                continue
            for key, _events in selector.select(wait):
                if key.data is None:  # the command's first process ended
                    selector.unregister(key.fileobj)
                    proc.poll()
                    continue
                data = os.read(key.fd, _READ_SIZE)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                key.data.add(data)
                output.write(data)
    finally:
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)


def _exit_fd(proc: Process) -> int | None:
    """A pidfd of ``proc`` (readable once it exits), or None where the kernel or Python has
    none (the pump then polls for the exit); a command in the kept sandbox gives its own."""
    if isinstance(proc, SessionProcess):
        return proc.exit_fd()
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None
