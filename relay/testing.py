"""A fake model provider for offline tests: one loopback HTTP server that speaks the Anthropic
Messages API (``POST /v1/messages``), OpenAI Chat Completions (``POST /v1/chat/completions``)
and the OpenAI Responses API (``POST /v1/responses``), answering from a scripted-model script
(SPEC §13). A request with ``"stream": true`` to the Messages or Responses API is answered with
the server-sent events of the real API (those of relay's gateway, :mod:`relay.gateway`), so
agent CLIs and streaming SDK clients can talk to it directly.

Real SDK clients talk to it over real HTTP, so everything from the request body to error
classification is exercised exactly as with the providers::

    with FakeProvider({"responses": [...]}) as fake:
        relay run … --model anthropic:test --base-url {fake.anthropic_url}
        relay run … --model openai:test --base-url {fake.openai_url}
        fake.requests  # every request: path, headers, JSON body

Script ``error`` entries become the provider's error responses with the right status codes
and bodies (and ``Retry-After`` when ``retry_after_s`` is given); ``connection`` closes the
socket without an answer. Run ``python -m relay.testing SCRIPT [--port N]`` to serve a script
by hand.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from relay.errors import ForcedToolChoiceRejected, ModelError
from relay.gateway import messages_wire, responses_wire
from relay.gateway.wire import WireError, WireRequest, sse
from relay.gateway.wire_errors import ANTHROPIC_ERRORS, OPENAI_ERRORS
from relay.models.base import Message, Request, Response
from relay.models.scripted import ScriptedModel


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received: ``path``, ``headers`` (lower-case names), JSON ``body``."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


# Script error kind → (status, error type, error code) on each wire: the gateway's tables.
__all__ = ["ANTHROPIC_ERRORS", "OPENAI_ERRORS", "FakeProvider", "RecordedRequest"]


def _neutral(body: dict[str, Any], wire: str) -> Request:
    """Enough of a provider-neutral request for the scripted model: tool choice and size."""
    choice = body.get("tool_choice")
    forced = (wire == "anthropic" and isinstance(choice, dict) and choice.get("type") == "any") or (
        wire in ("openai", "responses") and choice == "required"
    )
    return Request(
        system="",
        messages=(Message("user", json.dumps(body.get("messages", []))),),
        tool_choice="required" if forced else ("auto" if body.get("tools") else "none"),
    )


def anthropic_body(response: Response, model: str) -> dict[str, Any]:
    """A Messages API response body for a neutral response."""
    content: list[dict[str, Any]] = []
    if response.text:
        content.append({"type": "text", "text": response.text})
    for call in response.tool_calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    u = response.usage
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if response.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": u.uncached_input,
            "output_tokens": u.output,
            "cache_creation_input_tokens": u.cache_write,
            "cache_read_input_tokens": u.cached_input,
        },
    }


def openai_body(response: Response, model: str) -> dict[str, Any]:
    """A Chat Completions response body for a neutral response."""
    message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in response.tool_calls
        ]
    u = response.usage
    prompt = u.uncached_input + u.cached_input + u.cache_write
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:20]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if response.tool_calls else "stop",
                "message": message,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": u.output,
            "total_tokens": prompt + u.output,
            "prompt_tokens_details": {"cached_tokens": u.cached_input},
        },
    }


def _error_body(wire: str, exc: ModelError) -> tuple[int, dict[str, Any]]:
    if isinstance(exc, ForcedToolChoiceRejected):
        if wire == "anthropic":
            return 400, {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Thinking may not be enabled when tool_choice forces tool use.",
                },
            }
        return 400, {
            "error": {
                "message": "tool_choice 'required' is not supported by this model",
                "type": "invalid_request_error",
                "param": "tool_choice",
                "code": None,
            }
        }
    table = ANTHROPIC_ERRORS if wire == "anthropic" else OPENAI_ERRORS
    status, error_type, code = table.get(exc.kind, table["server"])
    if wire == "anthropic":
        error: dict[str, Any] = {"type": error_type, "message": exc.message}
        if code:
            error["details"] = {"error_code": code}
        return status, {"type": "error", "error": error, "request_id": "req_fake"}
    return status, {
        "error": {"message": exc.message, "type": error_type, "param": None, "code": code}
    }


class FakeProvider:
    """The fake server. ``script`` is a §13 script (a mapping or a YAML file path).

    Attributes:
        requests: every request received, in order (thread-safe to read after a run).
        anthropic_url: base URL for ``anthropic:`` models (no ``/v1``).
        openai_url: base URL for ``openai:`` models (with ``/v1``).
    """

    def __init__(self, script: dict[str, Any] | Path, *, port: int = 0) -> None:
        if isinstance(script, Path):
            self.model = ScriptedModel.from_file(script)
        else:
            self.model = ScriptedModel.from_dict(script)
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeProvider:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def paths(self) -> list[str]:
        """The paths of all requests, in order."""
        return [r.path for r in self.requests]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_FakeHandler,), {"fake": self})


class _FakeHandler(BaseHTTPRequestHandler):
    """One request of a :class:`FakeProvider` (``fake`` is set on the subclass per server)."""

    fake: FakeProvider

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.fake._lock:
            self.fake.requests.append(RecordedRequest(self.path, headers, body))
        if self.path.rstrip("/").endswith("/v1/messages"):
            wire = "anthropic"
        elif self.path.rstrip("/").endswith("/chat/completions"):
            wire = "openai"
        elif self.path.rstrip("/").endswith("/v1/responses"):
            wire = "responses"
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
            return
        try:
            response = self.fake.model.complete(_neutral(body, wire))
        except ModelError as exc:
            if exc.kind == "connection":
                self.close_connection = True  # no answer at all
                return
            status, payload = _error_body(wire, exc)
            extra = {"x-should-retry": "false"}
            if exc.retry_after_s is not None:
                extra["retry-after"] = f"{exc.retry_after_s:g}"
            self._send(status, payload, extra)
            return
        model = str(body.get("model", "fake"))
        if wire == "responses" or body.get("stream"):
            self._streamed(wire, body, response, model)
            return
        payload = (
            anthropic_body(response, model) if wire == "anthropic" else openai_body(response, model)
        )
        self._send(200, payload, {})

    def _streamed(self, wire: str, body: Any, response: Response, model: str) -> None:
        """The Messages API's SSE, or the Responses API's JSON or SSE."""
        if wire == "anthropic":
            events = messages_wire.response_events(response, model)
        else:
            try:
                parsed = responses_wire.parse_request(body)
            except WireError:
                parsed = WireRequest(_neutral({}, wire), model, bool(body.get("stream")))
            if not parsed.stream:
                self._send(200, responses_wire.response_body(response, parsed), {})
                return
            events = responses_wire.response_events(response, parsed)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for name, data in events:
            self.wfile.write(sse(name, data))
        self.close_connection = True

    def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_fake")
        self.send_header("x-request-id", "req_fake")
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> int:
    """``python -m relay.testing SCRIPT [--port N]``: serve a script until Ctrl+C."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", type=Path)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    fake = FakeProvider(args.script, port=args.port)
    print(f"anthropic base URL: {fake.anthropic_url}\nopenai base URL:    {fake.openai_url}")
    try:
        fake._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
