"""The run's transcript, ``transcript.jsonl``: one JSON line per model call (SPEC §12).

A line holds ``round, step, mode, time, request``, then ``response`` or ``error`` (and ``wire``
with ``--debug``). In relay mode ``request`` is the whole request
``{system, messages, tools, tool_choice}``.

In session mode the history grows through the goal: written whole at every step, a transcript
would grow with the square of the goal's length. A session line's ``request`` holds
``tool_choice`` and ``history``, plus ``system`` and ``tools`` only when they differ from the
line before. ``history`` names what changed since the previous line of the same file:

* ``new``: the messages that joined the history sent, in order, each with its ``id`` (its
  place in the goal's history);
* ``gone``: the ids of messages no longer sent (an earlier round message, dropped exchanges);
* ``masked``: ``{id: content}`` of messages now sent as a placeholder (observation masking);
* ``lead`` / ``trail``: relay's own notes sent before / after the history (written whole).

Each message is thus written once (and once more as its placeholder). :func:`read_transcript`
rebuilds every line's whole request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from relay.errors import ModelError
from relay.models.base import Message, Request, Response

HistoryIds = Sequence[int | None]
"""For each message of a session request, its id in the goal's history, or None for a note of
relay's that is not part of the history."""


class Transcript:
    """Appends the lines of one run's transcript.

    Args:
        path: the run's ``transcript.jsonl``.
        mode: ``relay`` or ``session`` (the run's context mode).
    """

    def __init__(self, path: Path, mode: str) -> None:
        self.path = path
        self.mode = mode
        self._sent: list[int] = []
        self._masked: set[int] = set()
        self._system: str | None = None
        self._tools: list[dict[str, Any]] | None = None

    def write(
        self,
        round_n: int,
        step: int,
        request: Request,
        *,
        ids: HistoryIds | None = None,
        masked: frozenset[int] | set[int] = frozenset(),
        response: Response | None = None,
        error: ModelError | None = None,
        wire: Any = None,
    ) -> None:
        """Append the line of one model call.

        Args:
            ids: in session mode, the history id of each of ``request.messages``
                (:data:`HistoryIds`); without them the whole request is written.
            masked: the history ids whose message is sent as a placeholder.
            wire: the raw provider exchange (``--debug``), already redacted.
        """
        line: dict[str, Any] = {
            "round": round_n,
            "step": step,
            "mode": self.mode,
            "time": time.time(),
            "request": self._request(request, ids, masked),
        }
        if wire is not None:
            line["wire"] = wire
        if response is not None:
            line["response"] = response.to_dict()
        if error is not None:
            line["error"] = {"kind": error.kind, "message": error.message, "code": error.code}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")

    def _request(
        self, request: Request, ids: HistoryIds | None, masked: frozenset[int] | set[int]
    ) -> dict[str, Any]:
        tools = [t.to_dict() for t in request.tools]
        history = None
        if self.mode == "session" and ids is not None:
            history = self._history(request.messages, ids, masked)
        if history is None:  # the whole request: a reader starts over from it
            self._sent = []
            self._system, self._tools = request.system, tools
            return request.to_dict()
        out: dict[str, Any] = {}
        if request.system != self._system:
            out["system"] = self._system = request.system
        if tools != self._tools:
            out["tools"] = self._tools = tools
        out["tool_choice"] = request.tool_choice
        out["history"] = history
        return out

    def _history(
        self, messages: Sequence[Message], ids: HistoryIds, masked: frozenset[int] | set[int]
    ) -> dict[str, Any] | None:
        """The change since the previous line, or None when it cannot be told as one (the
        history sent is not the previous one minus some messages plus new ones at its end)."""
        if len(ids) != len(messages):
            return None
        lead = next((i for i, n in enumerate(ids) if n is not None), len(ids))
        end = len(ids)
        while end > lead and ids[end - 1] is None:
            end -= 1
        core = list(ids[lead:end])
        if None in core:
            return None
        present = set(core)
        kept = [n for n in self._sent if n in present]
        if core[: len(kept)] != kept:
            return None
        out: dict[str, Any] = {}
        gone = [n for n in self._sent if n not in present]
        fresh = {
            str(n): messages[lead + k].content
            for k, n in enumerate(kept)
            if n in masked and n not in self._masked
        }
        new = [
            {"id": n, **messages[lead + k].to_dict()} for k, n in enumerate(core) if k >= len(kept)
        ]
        for key, value in (
            ("new", new),
            ("gone", gone),
            ("masked", fresh),
            ("lead", [m.to_dict() for m in messages[:lead]]),
            ("trail", [m.to_dict() for m in messages[end:]]),
        ):
            if value:
                out[key] = value
        self._masked.update(n for n in core if n in masked)
        self._sent = core
        return out


def expand(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The lines of one transcript file, in order, each with its whole request
    ``{system, messages, tools, tool_choice}`` (session lines rebuilt; others unchanged)."""
    sent: list[int] = []
    by_id: dict[int, dict[str, Any]] = {}
    system: Any = None
    tools: Any = []
    for row in rows:
        request = row.get("request")
        if not isinstance(request, dict) or "history" not in request:
            if isinstance(request, dict):
                sent, system, tools = [], request.get("system"), request.get("tools", [])
            yield row
            continue
        history = request["history"]
        gone = set(history.get("gone", ()))
        sent = [n for n in sent if n not in gone]
        for n, content in history.get("masked", {}).items():
            by_id[int(n)] = {**by_id[int(n)], "content": content}
        for message in history.get("new", ()):
            message = dict(message)
            n = message.pop("id")
            by_id[n] = message
            sent.append(n)
        system = request.get("system", system)
        tools = request.get("tools", tools)
        messages = [*history.get("lead", ()), *(by_id[n] for n in sent), *history.get("trail", ())]
        whole = {
            "system": system,
            "messages": messages,
            "tools": tools,
            "tool_choice": request.get("tool_choice"),
        }
        yield {**row, "request": whole}


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """Every line of the transcript file ``path`` with its whole request (:func:`expand`)."""
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return list(expand(rows))
