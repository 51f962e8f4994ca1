"""The run's transcript, ``transcript.jsonl``: one JSON line per model call (SPEC §12).

A line holds ``round, step, mode, time, request {system, messages, tools, tool_choice}``, then
``response`` or ``error`` (and ``wire`` with ``--debug``): the exact provider-neutral request the
model saw, in both modes, so that any reader of the file (the shared scenarios, a user's ``jq``)
sees every request whole. Its published shape is :class:`relay.outputs.TranscriptLine`
(docs/outputs.md): the response and the error are built through its models; the request is
written from the messages' own JSON (below), and the tests validate whole lines against it.

Writing a session request whole at every step must not cost the whole history's serialisation
every time: each message (an immutable :class:`~relay.models.base.Message`) is turned into
JSON once, when it is first sent, and later lines reuse that text. A step's cost is then the new
messages' serialisation plus copying the line out; the line itself is bounded by the session
context's ``context.max_tokens``, so the file grows linearly with the steps.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from relay.errors import ModelError
from relay.models.base import Message, Request, Response
from relay.outputs import TranscriptError, TranscriptResponse

__all__ = ["Transcript", "read_transcript"]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class Transcript:
    """Appends the lines of one run's transcript.

    Args:
        path: the run's ``transcript.jsonl``.
        mode: ``relay`` or ``session`` (the run's context mode).
    """

    def __init__(self, path: Path, mode: str) -> None:
        self.path = path
        self.mode = mode
        self._messages: dict[int, tuple[Message, str]] = {}  # id(message) -> (message, JSON)
        self._tools: tuple[Any, str] | None = None
        self._system: tuple[str, str] | None = None  # (system prompt, its JSON)

    def write(
        self,
        round_n: int,
        step: int,
        request: Request,
        *,
        response: Response | None = None,
        error: ModelError | None = None,
        wire: Any = None,
    ) -> None:
        """Append the line of one model call (``wire``: the raw provider exchange with
        ``--debug``, already redacted)."""
        head = {"round": round_n, "step": step, "mode": self.mode, "time": time.time()}
        tail: dict[str, Any] = {}
        if wire is not None:
            tail["wire"] = wire
        if response is not None:
            tail["response"] = TranscriptResponse.model_validate(response.to_dict()).model_dump()
        if error is not None:
            code = error.code  # from the provider's error body: any JSON value
            if not (code is None or isinstance(code, str | int)) or isinstance(code, bool):
                code = _dumps(code)
            tail["error"] = TranscriptError(
                kind=str(error.kind), message=str(error.message), code=code
            ).model_dump()
        parts = [_dumps(head)[:-1], f', "request": {self._request(request)}']
        if tail:
            parts.append(", " + _dumps(tail)[1:-1])
        _append(self.path, ("".join(parts) + "}\n").encode("utf-8"))

    def _request(self, request: Request) -> str:
        """The request as JSON text, each message's text reused from its first line."""
        seen: dict[int, tuple[Message, str]] = {}
        texts = []
        for message in request.messages:
            cached = self._messages.get(id(message))
            if cached is None or cached[0] is not message:
                cached = (message, _dumps(message.to_dict()))
            seen[id(message)] = cached
            texts.append(cached[1])
        self._messages = seen  # only what the history still sends is kept
        return (
            f'{{"system": {self._system_text(request)}, "messages": [{", ".join(texts)}], '
            f'"tools": {self._tools_text(request)}, "tool_choice": {_dumps(request.tool_choice)}}}'
        )

    def _system_text(self, request: Request) -> str:
        if self._system is None or self._system[0] is not request.system:
            self._system = (request.system, _dumps(request.system))
        return self._system[1]

    def _tools_text(self, request: Request) -> str:
        if self._tools is None or self._tools[0] is not request.tools:
            self._tools = (request.tools, _dumps([t.to_dict() for t in request.tools]))
        return self._tools[1]


def _append(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created when missing) with one ``write`` (``O_APPEND``: a
    line is never interleaved), without a buffered file object (three system calls, not
    eight: the transcript takes one line per model call)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """Every line of the transcript file ``path``, parsed (blank lines skipped)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
