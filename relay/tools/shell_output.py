"""The ``shell`` tool's output (SPEC §5): both streams bounded in memory, the output in a file
(bounded too), and the result text the model sees.

Every byte goes to an output file under ``run_dir/outputs/`` (:class:`OutputFile`; past
``tools.kept_output_bytes`` only its head and tail are kept, :mod:`relay.tools.kept_output`)
while memory keeps only a head and a tail of each stream (:class:`Stream`); :func:`render_result`
writes the ``exit code: N`` line, the notes and the ``--- stdout ---`` / ``--- stderr ---``
sections, cut to the output limit (``tools.output_limit_bytes``, counted in characters of the
text shown: issue 28) with a marker naming the cut byte count and the file. Control characters
and bytes that are not UTF-8 never reach the model as such (:func:`shown_text`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from relay.sandbox import Redactor
from relay.tools.kept_output import DEFAULT_KEPT_BYTES, KeptOutput

__all__ = [
    "Ending",
    "OutputFile",
    "Stream",
    "fmt_seconds",
    "is_cut",
    "render_result",
    "saved_output",
    "shown_text",
]


SMALL_OUTPUT = 256
"""Characters of a stream shown as they are even when mostly not text (a few stray bytes)."""

NOT_TEXT_SHARE = 0.1
"""A cut stream with more than this share of characters that are not text (bytes that are not
UTF-8, control characters) is told in one line instead of shown: each of them would travel
as a 6-character JSON escape (``\\ufffd``, ``\\u0000``) and tell the model nothing."""

_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\udc80-\udcff]")
"""Control characters but tab, newline and carriage return, and bytes that are not UTF-8 (as
``surrogateescape`` decodes them, one per byte)."""
_COLOURS = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
"""Terminal colour and cursor sequences (CSI): dropped from what the model sees."""


def _raw(data: bytes) -> str:
    """``data`` decoded one code point per UTF-8 character and one per other byte (reversible:
    :func:`_size`)."""
    return data.decode("utf-8", "surrogateescape")


def _size(raw: str) -> int:
    """Bytes of the output that the :func:`_raw` text ``raw`` came from."""
    return len(raw.encode("utf-8", "surrogateescape"))


def shown_text(raw: str) -> str:
    """The :func:`_raw` text ``raw`` as the model sees it: colour sequences dropped, every
    other control character (but tab, newline, carriage return) and every byte that is not
    UTF-8 replaced by U+FFFD (SPEC §5: non-UTF-8 bytes replaced)."""
    return _NOT_TEXT.sub("\ufffd", _COLOURS.sub("", raw))


def _not_text(raw: str) -> bool:
    """Whether more than :data:`NOT_TEXT_SHARE` of ``raw``'s characters are not text."""
    text = _COLOURS.sub("", raw)
    return len(_NOT_TEXT.findall(text)) > NOT_TEXT_SHARE * max(1, len(text))


@dataclass
class Stream:
    """One output stream: its byte count and the first and last bytes of it that the model
    may be shown, ``cap`` characters (at most 4 bytes each) from either end."""

    cap: int
    total: int = 0
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)

    @property
    def keep(self) -> int:
        """Bytes kept of each end: enough for ``cap`` characters of 4 bytes."""
        return 4 * self.cap + 8

    def add(self, data: bytes) -> None:
        self.total += len(data)
        keep = self.keep
        room = keep - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.tail += data[-keep:]
        if len(self.tail) > 2 * keep:
            del self.tail[: len(self.tail) - keep]

    def _whole(self) -> str | None:
        """The :func:`_raw` text of the whole stream when all of it is in memory."""
        return _raw(bytes(self.head)) if self.total <= len(self.head) else None

    def fits(self, share: int) -> bool:
        """Whether the whole stream is shown in ``share`` characters (nothing is cut): it is
        all in memory, that long at most, and text (more than :data:`SMALL_OUTPUT` characters
        mostly not text are told in one line, as a cut stream is)."""
        whole = self._whole()
        if whole is None or len(whole) > share:
            return False
        return len(whole) <= SMALL_OUTPUT or not _not_text(whole)

    def render(self, share: int, cut_marker: str) -> str:
        """The stream as the model sees it (:func:`shown_text`) in at most ``share``
        characters, its head and tail around ``cut_marker`` (``{cut}``: the bytes cut) when
        it is longer; a cut stream that is mostly not text (:data:`NOT_TEXT_SHARE`) is one
        line naming its size, followed by the marker."""
        whole = self._whole()
        if self.fits(share):
            return shown_text(whole or "")
        head_size = (share + 1) // 2
        tail_size = share - head_size
        if whole is not None:
            head, tail = whole[:head_size], whole[len(whole) - tail_size :]
        else:
            head = _raw(_trim_utf8_end(bytes(self.head)))[:head_size]
            tail = _raw(_trim_utf8_start(bytes(self.tail)))
            tail = tail[len(tail) - tail_size :]
        if not tail_size:
            tail = ""
        if _not_text(head + tail):
            return (
                f"({self.total} bytes, mostly not UTF-8 text: not shown; look at the file "
                "with e.g. file, xxd or iconv)" + cut_marker.format(cut=self.total).rstrip("\n")
            )
        cut = self.total - _size(head) - _size(tail)
        return shown_text(head) + cut_marker.format(cut=cut) + shown_text(tail)


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

    def keep_held(self) -> None:
        """Write output still held in memory to the file now and close it: a short output
        that is shown cut all the same (mostly not text, :meth:`Stream.fits`)."""
        if self._held is None or self.path is not None:
            return
        data, self._held = b"".join(self._held), None
        self._create()
        if self.kept is not None:
            try:
                self.kept.write(data)
            except OSError as exc:
                self._failed(exc)
        self.close()

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


def is_cut(streams: dict[str, Stream], limit: int) -> bool:
    """Whether :func:`render_result` cuts a stream to fit ``limit`` characters."""
    sizes = (streams["stdout"].total, streams["stderr"].total)
    shares = _shares(sizes, limit)
    return not all(s.fits(n) for s, n in zip(streams.values(), shares, strict=True))


def saved_output(output: OutputFile, cut: bool, redact: Redactor) -> tuple[str, str | None]:
    """Keep the output file when the output was ``cut`` (:func:`is_cut`; with secrets
    replaced), else delete it. Returns the cut marker (with ``{cut}`` for the byte count) and
    the kept file's path. The marker says ``full output in FILE``, or, when the file keeps only
    the output's head and tail, ``output kept in FILE``, the full size and the bytes dropped."""
    if cut:
        output.keep_held()
    if cut and output.path is not None:
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
    non-empty stream's section in at most its share of ``limit`` characters (the streams'
    byte counts split it; ``(no output)`` when both are empty); ``marker`` is the cut marker
    of :func:`saved_output`."""
    lines = list(headline)
    sizes = (streams["stdout"].total, streams["stderr"].total)
    for (name, stream), share in zip(streams.items(), _shares(sizes, limit), strict=True):
        if stream.total:
            lines.append(f"--- {name} ---")
            lines.append(stream.render(share, marker).removesuffix("\n"))
    if not any(sizes):
        lines.append("(no output)")
    return lines
