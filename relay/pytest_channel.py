"""The channel that carries relay's pytest report out of the test process (issue 27, SPEC §14).

The report of relay's plugin (``relay/audit_plugin/relay_audit_pytest.py``) never goes
through a file the test process can find and rewrite: relay opens a pipe, the test process
inherits its write end (its number in ``RELAY_AUDIT_CHANNEL``, which the plugin removes from
the environment when it is imported), and a thread of relay reads the records as the tests
run. :class:`ReportChannel` assembles them into one report file per session
(``session-<id>.json``, the format :func:`relay.pytest_report.load_report` reads) in a folder
only relay writes.

How records count (:func:`assemble`): a session's last snapshot gives its collection, exit
status and whether it finished; every test phase comes from the phase record streamed when
it was reported, the first one when a phase was streamed twice, never from a snapshot's copy
(which code of the test process could have changed before the session ended). A line that is
not one of relay's records, or more than :data:`MAX_BYTES` of records, is said in the report
as an unreadable file, which fails the run.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CHANNEL_VARIABLE", "MAX_BYTES", "ReportChannel", "assemble"]

CHANNEL_VARIABLE = "RELAY_AUDIT_CHANNEL"
MAX_BYTES = 256 * 1024 * 1024
"""Records read from one command at most (bytes); more is a problem, not a bigger report."""

_DRAIN_S = 10.0
"""Seconds relay waits, after the command ended, for the last records of a process that still
holds the channel."""


@dataclass
class _Session:
    snapshot: dict[str, Any] | None = None
    phases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def assemble(lines: list[bytes]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The session reports the records ``lines`` carry, and the problems of the stream.

    Args:
        lines: the channel's lines, without their line breaks.

    Returns:
        ``({session id: report data}, [problem, ...])``; a problem names a line that is not
        a record of relay's plugin.
    """
    sessions: dict[str, _Session] = {}
    problems: list[str] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record = _record(line)
        if record is None:
            problems.append(f"line {n} of the report channel is not a record of relay's plugin")
            continue
        entry = sessions.setdefault(record["session"], _Session())
        if "snapshot" in record:
            entry.snapshot = record["snapshot"]
        else:
            nodeid, when, phase = record["phase"]
            entry.phases.setdefault((nodeid, when), phase)  # the first report counts
    return {sid: _merged(sid, s) for sid, s in sessions.items() if s.snapshot}, problems


def _record(line: bytes) -> dict[str, Any] | None:
    """One record, or None when ``line`` is not a record of relay's plugin."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("session"), str):
        return None
    if isinstance(record.get("snapshot"), dict):
        return record
    phase = record.get("phase")
    ok = isinstance(phase, list) and len(phase) == 3 and isinstance(phase[2], dict)
    return record if ok and isinstance(phase[0], str) and isinstance(phase[1], str) else None


def _merged(sid: str, entry: _Session) -> dict[str, Any]:
    """The session's last snapshot with its tests' phases as streamed (see the module
    docstring): a phase only the snapshot holds keeps its final outcome but not pytest's own
    (``raw``), so it counts for nothing unless it was streamed or came from a worker."""
    data = dict(entry.snapshot or {})
    data["session"] = sid
    worker = bool(data.get("worker"))
    tests: dict[str, Any] = {}
    for nodeid, phases in (data.get("tests") or {}).items():
        if isinstance(phases, dict):
            tests[str(nodeid)] = {
                w: p if worker else {k: v for k, v in p.items() if k == "final"}
                for w, p in phases.items()
                if isinstance(p, dict)
            }
    for (nodeid, when), phase in entry.phases.items():
        tests.setdefault(nodeid, {})[when] = phase
    data["tests"] = tests
    return data


class ReportChannel:
    """A pipe relay reads a pytest command's report from (see the module docstring).

    Use: ``env()`` and ``pass_fds`` for the command; after it ended, :meth:`write_reports`.
    The read end is drained by a thread while the command runs (a full pipe never blocks
    the tests).

    Raises:
        OSError: the pipe could not be made.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self._chunks: list[bytes] = []
        self._size = 0
        self.overflow = False
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """The file descriptor the command inherits."""
        return (self._write,)

    def env(self) -> dict[str, str]:
        """The variable that tells relay's plugin where to write."""
        return {CHANNEL_VARIABLE: str(self._write)}

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._read, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            if self._size + len(chunk) > MAX_BYTES:
                self.overflow = True
                continue  # keep reading: the writer must not block
            self._chunks.append(chunk)
            self._size += len(chunk)
        os.close(self._read)

    def close(self, wait_s: float = _DRAIN_S) -> list[bytes]:
        """Close relay's write end and wait up to ``wait_s`` seconds for the records still
        coming; returns the lines read."""
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        self._thread.join(wait_s)
        return b"".join(self._chunks).split(b"\n")

    def write_reports(self, folder: Path, relocate: tuple[str, str] | None = None) -> list[str]:
        """Close the channel (:meth:`close`), write each session's report into ``folder``
        (``session-<n>.json``, for :func:`relay.pytest_report.load_report`) and return the
        problems of the stream (lines that are not records, too many bytes).
        ``relocate`` ``(old, new)``: paths of the report that start with the folder ``old``
        (the copy the command ran in) are given as below ``new`` (the export it was copied
        from), where the audit reads the files.

        Raises:
            OSError: a report file could not be written.
        """
        sessions, problems = assemble(self.close())
        if self.overflow:
            problems.append(f"the report channel carried more than {MAX_BYTES} bytes")
        for n, data in enumerate(sessions.values(), 1):
            if relocate is not None:
                data = _relocated(data, *relocate)
            (folder / f"session-{n:04d}.json").write_text(json.dumps(data), encoding="utf-8")
        return problems


def _relocated(value: Any, old: str, new: str) -> Any:
    """``value`` with every string that is ``old`` or starts with ``old/`` moved to ``new``."""
    if isinstance(value, str):
        if value == old or value.startswith(old.rstrip("/") + "/"):
            return new + value[len(old) :]
        return value
    if isinstance(value, list):
        return [_relocated(v, old, new) for v in value]
    if isinstance(value, dict):
        return {_relocated(k, old, new): _relocated(v, old, new) for k, v in value.items()}
    return value
