"""The records the guard scores, and their canonical forms (SPEC §8).

Pure, no I/O. :class:`Action` is one real tool call with a fingerprint of its result,
:class:`GuardRound` what the guard knows of one round (finished, or in progress: the calls so
far), :class:`GuardEvent` a risk event. The canonical forms make two calls comparable:
:func:`result_fingerprint` drops the volatile parts of a result, :func:`call_text` the blanks
and shell comments of a call, :func:`path_tokens` picks the words that name files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Action:
    """One real tool call of a round: tool name, arguments, a fingerprint of its result, and
    whether it failed (non-zero exit, timeout, error result)."""

    name: str
    arguments: dict[str, Any]
    result_fp: str
    failed: bool

    def text(self) -> str:
        """The canonical text of the call (:func:`call_text`), computed once."""
        cached = self.__dict__.get("_text")
        if cached is None:
            cached = call_text(self.name, self.arguments)
            object.__setattr__(self, "_text", cached)
        return cached

    def tokens(self) -> tuple[str, ...]:
        """The file-naming words of its canonical text (:func:`path_tokens`), computed once."""
        cached = self.__dict__.get("_tokens")
        if cached is None:
            cached = path_tokens(self.text())
            object.__setattr__(self, "_tokens", cached)
        return cached


@dataclass(frozen=True)
class GuardRound:
    """What the guard knows of one round, finished or in progress.

    ``actions`` are the real tool calls in order; ``handoff`` the round's note; ``api_errors``
    failed model calls; ``tamper`` tamper findings (texts); ``repeat_events`` in-round repeat
    findings from :class:`relay.guard.repeats.RepeatTracker`; ``files_changed`` changed paths.
    A round in progress has the calls, failed model calls, tamper findings and repeat findings
    so far, and no handoff or changed paths yet (see :func:`relay.guard.risk.evaluate_step`).
    """

    n: int
    actions: tuple[Action, ...] = ()
    handoff: str = ""
    files_changed: tuple[str, ...] = ()
    api_errors: tuple[str, ...] = ()
    tamper: tuple[str, ...] = ()
    repeat_events: tuple[str, ...] = ()


@dataclass(frozen=True)
class GuardEvent:
    """A risk event: its kind, the round, and a detail a user can read."""

    kind: str
    round: int
    detail: str


# fingerprints -----------------------------------------------------------------------------

_VOLATILE = [
    # the shell tool's cut marker names the bytes cut and a per-call file; the partial lines
    # around it move with the output's length
    (re.compile(r"[^\n]*\n\[\.\.\. \d+ bytes cut[^\n]*\.\.\.\]\n[^\n]*"), "<cut>", " bytes cut"),
    (re.compile(r"\b\d+(\.\d+)?\s*(ms|s|sec|secs|seconds|minutes?)\b"), "<duration>", ""),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?(\.\d+)?Z?\b"), "<datetime>", ":"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b"), "<time>", ":"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "<address>", "0x"),
    (re.compile(r"/tmp/[\w.-]+"), "<tmp>", "/tmp/"),
    (re.compile(r"[ \t]+"), " ", ""),
]
"""``(pattern, replacement, a text every match holds)``: a pattern whose text is not in the
result cannot match, and is not run (a regular expression that starts with ``\\b`` scans the
whole text)."""


@functools.lru_cache(maxsize=64)
def result_fingerprint(text: str) -> str:
    """A short hash (12 hex digits) of a tool result with volatile parts removed: the shell
    tool's cut marker (with the partial lines around it), durations (``0.03s``, ``12 ms``),
    dates and clock times, hex addresses, ``/tmp/...`` paths, runs of blanks. The same outcome
    gives the same fingerprint while real changes (a progress counter, a different error)
    give a different one. Remembered for the last results: a step's record asks again for
    the fingerprints the guard took when its calls ran."""
    for pattern, repl, needle in _VOLATILE:
        if needle in text:
            text = pattern.sub(repl, text)
    return hashlib.sha1(text.strip().encode("utf-8", "replace")).hexdigest()[:12]


def normalised_arguments(arguments: dict[str, Any]) -> str:
    """``arguments`` as JSON with sorted keys and runs of blanks in strings collapsed (for
    event details)."""

    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return " ".join(value.split())
        if isinstance(value, dict):
            return {k: norm(v) for k, v in sorted(value.items())}
        if isinstance(value, list):
            return [norm(v) for v in value]
        return value

    return json.dumps(norm(arguments), sort_keys=True, ensure_ascii=False)


# the canonical text of a call -------------------------------------------------------------

_COMMENT_STARTS_AFTER = frozenset(" \t\n;&|()")


def strip_shell_comments(command: str) -> str:
    """``command`` without its shell comments: a ``#`` outside quotes at the start of a word
    runs to the end of its line (bash's rule; ``$#`` and ``${#x}`` are not comments).

    Args:
        command: a shell command line (several lines allowed).

    Returns:
        The command with every comment removed (the line breaks stay). Used only to compare
        calls, never to run them: ``pytest -k a  # attempt 3`` and ``pytest -k a  # attempt 4``
        are the same call.
    """
    out: list[str] = []
    quote: str | None = None
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote is not None:
            out.append(c)
            if c == "\\" and quote == '"' and i + 1 < n:
                out.append(command[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c == "\\" and i + 1 < n:
            out.append(command[i : i + 2])
            i += 2
            continue
        elif c in "'\"":
            quote = c
            out.append(c)
        elif c == "#" and (not out or out[-1][-1] in _COMMENT_STARTS_AFTER):
            end = command.find("\n", i)
            if end == -1:
                break
            i = end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


_TOKEN_SPLIT = re.compile(r"[\s;|&()<>=,\"'`]+")
_FILE_NAME = re.compile(r"^[\w.+-]*\w\.[A-Za-z]\w{0,7}$")


def path_tokens(text: str) -> tuple[str, ...]:
    """The words of ``text`` that name files: those containing ``/`` or looking like
    ``name.ext`` (``src/mod1.py``, ``calc.py``, ``'s/old/new/g'``), in order.

    Two calls that differ in such a word act on different things (``sed -i … mod1.py`` and
    ``sed -i … mod2.py``), so they are never near-identical, however similar the rest.
    """
    return tuple(t for t in _TOKEN_SPLIT.split(text) if t and ("/" in t or _FILE_NAME.match(t)))


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """The canonical text of a call, as compared for near-identity: the tool name, then each
    argument sorted by name as ``key=value``. In text values, runs of blanks are collapsed
    within each line and blank lines are dropped; shell comments are removed from a ``shell``
    command. Other values are JSON."""
    parts = [name]
    for key in sorted(arguments):
        value = arguments[key]
        if isinstance(value, str):
            if name == "shell" and key == "command":
                value = strip_shell_comments(value)
            text = "\n".join(" ".join(line.split()) for line in value.splitlines() if line.strip())
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        parts.append(f"{key}={text}")
    return "\n".join(parts)
