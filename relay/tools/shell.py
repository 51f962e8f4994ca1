"""The ``shell`` tool (SPEC §5): one command in ``/bin/bash``, bounded in time and in memory.

The command runs in the repository root, in its own process group (session), with stdin closed,
in the run's sandbox (:mod:`relay.sandbox`: bubblewrap, or relay's reaper when it is off) and
with an allow-listed environment without credentials. No process it starts outlives it. Both pipes are read with a selector; every byte goes to
a full-output file under ``run_dir/outputs/`` while memory keeps only a head and a tail of each
stream. A timeout - or :func:`kill_running` - sends SIGTERM to the whole process group, then
SIGKILL after a grace period, and reading stops within a bounded time even when a background
child keeps the pipes open.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from relay.sandbox.env import is_credential_name, scrubbed_env
from relay.tools.base import ToolContext, ToolResult

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

# --- running commands, for kill_running ----------------------------------------------------


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    interrupted: bool = False


_running: tuple[_Running, ...] = ()
_running_lock = threading.Lock()


def _register(entry: _Running) -> None:
    global _running
    with _running_lock:
        _running = (*_running, entry)


def _unregister(entry: _Running) -> None:
    global _running
    with _running_lock:
        _running = tuple(item for item in _running if item is not entry)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> bool:
    """Send ``sig`` to the process group led by ``proc``; False when the group is gone."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_running() -> bool:
    """Stop the shell command(s) currently running: SIGTERM to their process groups now; the
    thread running the command sends SIGKILL after :data:`KILL_GRACE_S` seconds and returns an
    error result saying the command was stopped.

    Safe to call from another thread or from a signal handler (takes no lock).

    Returns:
        True if a running command was signalled.
    """
    killed = False
    for entry in _running:  # a tuple replaced atomically: no lock needed to read it
        entry.interrupted = True
        killed = _signal_group(entry.proc, signal.SIGTERM) or killed
    return killed


# --- bounded capture ----------------------------------------------------------------------


@dataclass
class _Stream:
    """One output stream: its byte count, first ``cap`` bytes and last ``cap`` bytes."""

    cap: int
    total: int = 0
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.tail += data[-self.cap :]
        if len(self.tail) > 2 * self.cap:
            del self.tail[: len(self.tail) - self.cap]

    def render(self, share: int, cut_marker: str) -> str:
        """The stream text in at most ``share`` bytes (plus the marker when cut)."""
        if self.total <= share:
            return bytes(self.head[: self.total]).decode("utf-8", errors="replace")
        head_size = (share + 1) // 2
        tail_size = share - head_size
        head = _trim_utf8_end(bytes(self.head[:head_size]))
        tail = bytes(self.tail[len(self.tail) - tail_size :]) if tail_size else b""
        tail = _trim_utf8_start(tail)
        cut = self.total - len(head) - len(tail)
        return (
            head.decode("utf-8", errors="replace")
            + cut_marker.format(cut=cut)
            + tail.decode("utf-8", errors="replace")
        )


def _trim_utf8_end(data: bytes) -> bytes:
    """``data`` without a UTF-8 character that is cut off at its end."""
    for index in range(len(data) - 1, max(-1, len(data) - 5), -1):
        byte = data[index]
        if byte & 0xC0 == 0x80:
            continue
        size = 2 if 0xC0 <= byte < 0xE0 else 3 if 0xE0 <= byte < 0xF0 else 4 if byte >= 0xF0 else 1
        return data[:index] if index + size > len(data) else data
    return data


def _trim_utf8_start(data: bytes) -> bytes:
    """``data`` without continuation bytes (at most 3) of a character cut off at its start."""
    skip = 0
    while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:]


def _shares(sizes: tuple[int, int], budget: int) -> tuple[int, int]:
    """Split ``budget`` bytes between two streams: a small stream gets all it needs, the rest
    goes to the other."""
    out_size, err_size = sizes
    if out_size + err_size <= budget:
        return out_size, err_size
    half = budget // 2
    if out_size <= half:
        return out_size, budget - out_size
    if err_size <= half:
        return budget - err_size, err_size
    return budget - half, half


def _fmt_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _describe_exit(code: int) -> str:
    if code >= 0:
        return f"exit code: {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"exit code: {code} (killed by signal {-code}, {name})"


class _OutputFile:
    """The full-output file; stops writing (and remembers why) on the first OS error."""

    def __init__(self, run_dir: Path) -> None:
        self.path: Path | None = None
        self.handle: BinaryIO | None = None
        self.error: str | None = None
        try:
            folder = run_dir / "outputs"
            folder.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            fd, name = tempfile.mkstemp(prefix=f"shell-{stamp}-", suffix=".log", dir=folder)
            self.path = Path(name)
            self.handle = os.fdopen(fd, "wb")
        except OSError as exc:
            self.error = str(exc)

    def write(self, data: bytes) -> None:
        if self.handle is None:
            return
        try:
            self.handle.write(data)
        except OSError as exc:
            self.error = str(exc)
            self.close()

    def close(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
            self.handle = None

    def discard(self) -> None:
        self.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


# --- the tool ------------------------------------------------------------------------------


def run_shell(
    ctx: ToolContext,
    command: str,
    timeout_s: int | None = None,
    *,
    env: Mapping[str, str] | None = None,
    writable: Sequence[Path] = (),
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

    Returns:
        ``exit code: N`` (or the timeout / stop notice) followed by ``--- stdout ---`` and
        ``--- stderr ---`` sections (empty ones omitted). At most about
        ``ctx.output_limit_bytes`` bytes of output are shown: head + a marker naming the cut
        byte count and the full-output file + tail. ``is_error`` for a non-zero exit, a
        timeout, a stop by :func:`kill_running` or a command that could not start.
    """
    if not isinstance(command, str) or not command.strip():
        return ToolResult("shell: command is empty", is_error=True)
    if "\x00" in command:
        return ToolResult("shell: command contains a NUL byte", is_error=True)
    notes: list[str] = []
    if timeout_s is None:
        timeout = float(ctx.shell_timeout_s)
    elif isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or timeout_s < 1:
        return ToolResult(
            f"shell: timeout_s must be a positive whole number of seconds (got {timeout_s!r})",
            is_error=True,
        )
    elif timeout_s > ctx.max_shell_timeout_s:
        timeout = float(ctx.max_shell_timeout_s)
        notes.append(f"(timeout_s {timeout_s} capped at the maximum of {_fmt_seconds(timeout)} s)")
    else:
        timeout = float(timeout_s)

    limit = max(64, ctx.output_limit_bytes)
    output = _OutputFile(ctx.run_dir)
    try:
        proc = subprocess.Popen(
            ctx.sandbox.command(
                [BASH, "-c", command],
                root=ctx.repo_root,
                protected=ctx.protected_paths,
                writable=writable,
            ),
            cwd=ctx.repo_root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ctx.sandbox.environment({**(env or {}), "RELAY_RUN": ctx.run_dir.name}),
            start_new_session=True,
            bufsize=0,
        )
    except (OSError, ValueError) as exc:
        output.discard()
        return ToolResult(f"shell: cannot start {BASH}: {exc}", is_error=True)

    entry = _Running(proc)
    _register(entry)
    streams = {"stdout": _Stream(limit), "stderr": _Stream(limit)}
    timed_out = False
    stragglers = False
    abandoned = False
    group_may_live = True
    try:
        timed_out, stragglers, abandoned = _pump(proc, entry, streams, output, timeout)
        try:
            proc.wait(timeout=KILL_GRACE_S + ABANDON_AFTER_KILL_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=ABANDON_AFTER_KILL_S)
        group_may_live = timed_out or stragglers or abandoned or entry.interrupted
    finally:
        _unregister(entry)
        if group_may_live:
            _signal_group(proc, signal.SIGKILL)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=ABANDON_AFTER_KILL_S)
        output.close()

    sizes = (streams["stdout"].total, streams["stderr"].total)
    cut = sum(sizes) > limit
    if cut and output.path is not None:
        with contextlib.suppress(OSError):
            ctx.redact.redact_file(output.path)  # the kept copy holds no secret either
        where = f"full output in {output.path}"
        if output.error:
            where += f" (incomplete: {output.error})"
        full_path: str | None = str(output.path)
    else:
        where = f"full output not saved: {output.error}" if output.error else ""
        full_path = None
        output.discard()
    marker = "\n[... {cut} bytes cut; " + (where or "output limit reached") + " ...]\n"

    code = proc.returncode
    lines: list[str] = []
    if timed_out:
        lines.append(f"timed out after {_fmt_seconds(timeout)} s; process group killed")
    elif entry.interrupted:
        lines.append("stopped by relay (pause or interrupt); process group killed")
    elif code is not None:
        lines.append(_describe_exit(code))
    else:
        lines.append("exit code: unknown (the process could not be reaped)")
    if stragglers:
        lines.append(
            "(background processes still holding the output after the command exited were "
            "killed; redirect a background job's output to a file to keep it running)"
        )
    lines.extend(notes)
    shares = _shares(sizes, limit)
    for (name, stream), share in zip(streams.items(), shares, strict=True):
        if stream.total:
            text = stream.render(share, marker)
            lines.append(f"--- {name} ---")
            lines.append(text.removesuffix("\n"))
    if not any(sizes):
        lines.append("(no output)")
    if ctx.sandbox.active and READ_ONLY_HINT_WHEN in "\n".join(lines):
        lines.append(READ_ONLY_HINT)
    is_error = timed_out or entry.interrupted or code is None or code != 0
    return ToolResult(
        "\n".join(lines),
        is_error=is_error,
        exit_code=code,
        timed_out=timed_out,
        full_output_path=full_path,
    )


def _pump(
    proc: subprocess.Popen[bytes],
    entry: _Running,
    streams: dict[str, _Stream],
    output: _OutputFile,
    timeout: float,
) -> tuple[bool, bool, bool]:
    """Read both pipes until EOF (or until they are abandoned after a kill), enforcing the
    timeout. Returns ``(timed_out, stragglers_killed, pipes_abandoned)``."""
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, streams["stdout"])
    selector.register(proc.stderr, selectors.EVENT_READ, streams["stderr"])
    start = time.monotonic()
    deadline = start + timeout
    timed_out = False
    stragglers = False
    sigterm_at: float | None = None
    sigkill_at: float | None = None
    exited_at: float | None = None

    def begin_kill(now: float) -> None:
        nonlocal sigterm_at
        if sigterm_at is None:
            sigterm_at = now
            _signal_group(proc, signal.SIGTERM)

    try:
        while True:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if sigterm_at is None:
                if entry.interrupted:
                    sigterm_at = now  # kill_running already sent SIGTERM
                elif exited_at is None and now >= deadline:
                    timed_out = True
                    begin_kill(now)
            if exited_at is not None and not selector.get_map():
                return timed_out, stragglers, False
            if (
                exited_at is not None
                and sigterm_at is None
                and selector.get_map()
                and now >= exited_at + BACKGROUND_GRACE_S
            ):
                stragglers = True
                begin_kill(now)
            if sigterm_at is not None:
                if sigkill_at is None and now >= sigterm_at + KILL_GRACE_S:
                    sigkill_at = now
                    _signal_group(proc, signal.SIGKILL)
                if sigkill_at is not None and now >= sigkill_at + ABANDON_AFTER_KILL_S:
                    return timed_out, stragglers, True
            wait = _POLL_S
            if sigterm_at is None and exited_at is None:
                wait = max(0.0, min(wait, deadline - now))
            if not selector.get_map():
                # Both pipes are closed; only the exit status is missing. Wait for the process
                # itself, not for an empty selector (which would sleep the whole interval).
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait)
                continue
            for key, _events in selector.select(wait):
                data = os.read(key.fd, _READ_SIZE)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                key.data.add(data)
                output.write(data)
    finally:
        selector.close()
