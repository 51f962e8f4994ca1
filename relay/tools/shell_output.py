"""The ``shell`` tool's output (SPEC §5): both streams bounded in memory, the output in a file
(bounded too), and the result text the model sees.

Every byte goes to an output file under ``run_dir/outputs/`` (:class:`OutputFile`; past
``tools.kept_output_bytes`` only its head and tail are kept, :mod:`relay.tools.kept_output`)
while memory keeps only a head and a tail of each stream (:class:`Stream`); :func:`render_result`
writes the ``exit code: N`` line, the notes and the ``--- stdout ---`` / ``--- stderr ---``
sections, cut to the output limit with a marker naming the cut byte count and the file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from relay.sandbox import Redactor
from relay.tools.kept_output import DEFAULT_KEPT_BYTES, KeptOutput

__all__ = ["Ending", "OutputFile", "Stream", "fmt_seconds", "render_result", "saved_output"]


@dataclass
class Stream:
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


def fmt_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _describe_exit(code: int) -> str:
    if code >= 0:
        return f"exit code: {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"exit code: {code} (killed by signal {-code}, {name})"


class OutputFile:
    """The kept-output file of one command: created only once the output grows past
    ``limit`` bytes (what is shown of it is then cut, and the file is kept), so that a
    command with little output writes no file at all. It keeps at most ``keep`` bytes of the
    output, its head and its tail with a note between them naming the full size and the bytes
    dropped (:class:`relay.tools.kept_output.KeptOutput`). Stops writing (and remembers why)
    on the first OS error.

    Args:
        run_dir: the run folder; the file goes to its ``outputs`` folder.
        limit: bytes of output (both streams) held in memory before the file is made.
        keep: bytes of output kept in the file (``tools.kept_output_bytes``).
    """

    def __init__(self, run_dir: Path, limit: int, keep: int = DEFAULT_KEPT_BYTES) -> None:
        self.run_dir = run_dir
        self.limit = limit
        self.keep = keep
        self.path: Path | None = None
        self.handle: BinaryIO | None = None
        self.kept: KeptOutput | None = None
        self.error: str | None = None
        self._held: list[bytes] | None = []
        self._held_bytes = 0

    def write(self, data: bytes) -> None:
        if self._held is not None:
            self._held.append(data)
            self._held_bytes += len(data)
            if self._held_bytes <= self.limit:
                return
            data, self._held = b"".join(self._held), None
            self._create()
        if self.kept is None:
            return
        try:
            self.kept.write(data)
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.error = str(exc)
        self.kept = None
        self.close()

    def _create(self) -> None:
        try:
            folder = self.run_dir / "outputs"
            folder.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            fd, name = tempfile.mkstemp(prefix=f"shell-{stamp}-", suffix=".log", dir=folder)
            self.path = Path(name)
            self.handle = os.fdopen(fd, "wb")
            self.kept = KeptOutput(self.handle, self.keep)
        except OSError as exc:
            self.error = str(exc)

    def close(self) -> None:
        """Write the kept tail (once) and close the file."""
        if self.kept is not None and self.handle is not None:
            try:
                self.kept.finish()
            except OSError as exc:
                self.error = str(exc)
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
            self.handle = None

    def discard(self) -> None:
        self.kept = None
        self.close()
        self._held = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


def saved_output(
    output: OutputFile, sizes: tuple[int, int], limit: int, redact: Redactor
) -> tuple[str, str | None]:
    """Keep the output file when the output was cut (with secrets replaced), else delete it.
    Returns the cut marker (with ``{cut}`` for the byte count) and the kept file's path. The
    marker says ``full output in FILE``, or, when the file keeps only the output's head and
    tail, ``output kept in FILE``, the full size and the bytes dropped."""
    if sum(sizes) > limit and output.path is not None:
        with contextlib.suppress(OSError):
            redact.redact_file(output.path)  # the kept copy holds no secret either
        where = f"full output in {output.path}"
        kept = output.kept
        if kept is not None and kept.dropped:
            where = (
                f"output kept in {output.path} (its first {kept.head} and last "
                f"{kept.tail_bytes} bytes; {kept.dropped} of {kept.total} bytes dropped)"
            )
        if output.error:
            where += f" (incomplete: {output.error})"
        full_path: str | None = str(output.path)
    else:
        where = f"full output not saved: {output.error}" if output.error else ""
        full_path = None
        output.discard()
    return "\n[... {cut} bytes cut; " + (where or "output limit reached") + " ...]\n", full_path


@dataclass(frozen=True)
class Ending:
    """How a command ended.

    Attributes:
        code: its exit status (negative ``-N`` when killed by signal ``N``); None when it
            could not be reaped.
        timed_out: it hit its timeout and its process group was killed.
        interrupted: :func:`relay.tools.shell.kill_running` stopped it.
        stragglers: background processes still holding its output after it exited were
            killed.
    """

    code: int | None
    timed_out: bool = False
    interrupted: bool = False
    stragglers: bool = False

    @property
    def is_error(self) -> bool:
        """True unless the command exited 0 by itself."""
        return self.timed_out or self.interrupted or self.code != 0

    def headline(self, timeout: float) -> list[str]:
        """The result's first line(s): the exit code, or the timeout (``timeout`` seconds) or
        stop notice, and the note about killed background processes."""
        if self.timed_out:
            lines = [f"timed out after {fmt_seconds(timeout)} s; process group killed"]
        elif self.interrupted:
            lines = ["stopped by relay (pause, interrupt or the time budget); process group killed"]
        elif self.code is not None:
            lines = [_describe_exit(self.code)]
        else:
            lines = ["exit code: unknown (the process could not be reaped)"]
        if self.stragglers:
            lines.append(
                "(background processes still holding the output after the command exited were "
                "killed; redirect a background job's output to a file to keep it running)"
            )
        return lines


def render_result(
    headline: Sequence[str], streams: dict[str, Stream], limit: int, marker: str
) -> list[str]:
    """The result's lines: ``headline`` (:meth:`Ending.headline` and notes), then each
    non-empty stream's section in at most its share of ``limit`` bytes (``(no output)`` when
    both are empty); ``marker`` is the cut marker of :func:`saved_output`."""
    lines = list(headline)
    sizes = (streams["stdout"].total, streams["stderr"].total)
    for (name, stream), share in zip(streams.items(), _shares(sizes, limit), strict=True):
        if stream.total:
            lines.append(f"--- {name} ---")
            lines.append(stream.render(share, marker).removesuffix("\n"))
    if not any(sizes):
        lines.append("(no output)")
    return lines
