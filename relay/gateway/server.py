"""relay's API gateway (SPEC §15): a loopback HTTP server an agent CLI uses as its base URL.

Routes (every ``POST`` needs the run's token as ``x-api-key`` or ``Authorization: Bearer``):

* ``HEAD /`` (any path): 200, no body (Claude Code checks the base URL this way).
* ``POST /v1/messages`` (also ``?beta=true``): the Anthropic Messages API, JSON or SSE.
* ``POST /v1/responses``: the OpenAI Responses API, JSON or SSE.
* ``POST /relay/goal-tools/<name>``: ``update_goal``, ``handoff``, ``get_goal`` from
  ``relay mcp`` (body ``{"arguments": {...}}``; answer ``{"text": str, "is_error": bool}``).

Agent requests become relay's neutral :class:`Request`; :class:`~relay.gateway.forward.Forwarder`
sends them to relay's model under relay's hook, callback and retry policy; the answer goes
back in the agent's wire format. Errors carry ``x-should-retry: false`` (relay owns retries).
"""

from __future__ import annotations

import hmac
import json
import secrets
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from relay.errors import ModelError
from relay.gateway import messages_wire, responses_wire
from relay.gateway.forward import Forwarder, Refusal
from relay.gateway.wire import WireError, WireRequest, sse
from relay.gateway.wire_errors import error_answer, model_error_answer
from relay.models.base import Response
from relay.tools.specs import GOAL_TOOLS, check_arguments

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body the gateway reads (an agent's request is well under 1 MB)."""

REFUSAL_KIND = "permission"
"""How a :class:`Refusal` is answered: 403 ``permission_error``, which neither agent retries."""

GOAL_TOOL_PATH = "/relay/goal-tools/"

UNAUTHORIZED = "relay: this gateway serves only the agent relay started (wrong or no token)"

MAX_CONNECTIONS = 32
"""Connections served at once, per socket; a further one is closed unanswered, so that an
agent opening connections without end cannot exhaust relay's threads (SPEC §14)."""
IDLE_TIMEOUT_S = 120.0
"""Seconds one read or write of a connection may wait (a request that never comes, a client
that stops reading) before the connection is closed and its thread ends."""


class _Bounded:
    """A threading server that serves at most :data:`MAX_CONNECTIONS` connections at once,
    with a listen backlog that takes a burst of connections without the kernel dropping them
    (socketserver's default of 5 made a burst wait for TCP's one-second retry)."""

    request_queue_size = 128

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # type: ignore[attr-defined]
            return
        try:
            super().process_request(request, client_address)  # type: ignore[misc]
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self._slots.release()


class _TcpServer(_Bounded, ThreadingHTTPServer):
    daemon_threads = True


class _UnixServer(_Bounded, socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


@dataclass(frozen=True)
class GoalToolAnswer:
    """relay's decision on a goal-tool call: the tool result text, and whether it is an
    error result (rejected arguments, a refused call)."""

    text: str
    is_error: bool = False


GoalToolHandler = Callable[[str, dict[str, Any]], GoalToolAnswer]
"""``handler(name, arguments)`` for ``update_goal`` / ``handoff`` / ``get_goal``: the
supervisor's decision (arguments already checked against relay's schemas)."""


class Gateway:
    """The gateway of one run.

    Args:
        forwarder: how requests reach relay's model (model, hook, callback, retries).
        goal_tools: the supervisor's goal-tool handler, or None (goal-tool calls then get 503).
        token: the per-run secret the agent must send; default: 32 random bytes.
        port: the loopback port; 0 picks a free one.

    Attributes:
        token: the secret (give it to the agent as its API key, and to ``relay mcp``).
        url: ``http://127.0.0.1:PORT``: the Anthropic base URL (``ANTHROPIC_BASE_URL``).
        openai_url: ``url + "/v1"``: the OpenAI base URL (Codex's ``base_url``).
    """

    def __init__(
        self,
        forwarder: Forwarder,
        *,
        goal_tools: GoalToolHandler | None = None,
        token: str | None = None,
        port: int = 0,
    ) -> None:
        self.forwarder = forwarder
        self.goal_tools = goal_tools
        self.token = token or secrets.token_urlsafe(32)
        self._server = _TcpServer(("127.0.0.1", port), _handler_class(self))
        self._thread: threading.Thread | None = None
        self._unix: socketserver.ThreadingUnixStreamServer | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> Gateway:
        """Serve in a daemon thread; returns self."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="relay-gateway", daemon=True
        )
        self._thread.start()
        return self

    def serve_unix(self, path: str) -> None:
        """Serve the same routes on the Unix socket ``path`` too (created here; a sandbox
        without network reaches the gateway through it: :mod:`relay.workers.bridge`)."""
        server = _UnixServer(path, _handler_class(self))
        threading.Thread(
            target=server.serve_forever, name="relay-gateway-unix", daemon=True
        ).start()
        self._unix = server

    def stop(self) -> None:
        """Stop serving and close the sockets (requests in flight finish on their threads)."""
        for server in (self._server, self._unix):
            if server is not None:
                server.shutdown()
                server.server_close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def authorized(self, headers: Any) -> bool:
        """True when the request carries the run's token (``x-api-key`` or Bearer)."""
        given = headers.get("x-api-key") or ""
        bearer = headers.get("authorization") or ""
        if bearer.lower().startswith("bearer "):
            given = given or bearer[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def answer_model(self, wire: str, body: Any) -> tuple[int, Any, dict[str, str], bool]:
        """``(status, payload, headers, streamed)`` for an agent request; ``payload`` is a
        JSON body, or a list of SSE ``(event, data)`` pairs when ``streamed``."""
        try:
            parsed = (messages_wire if wire == "messages" else responses_wire).parse_request(body)
        except WireError as exc:
            status, payload, headers = error_answer(wire, "bad_request", f"relay: {exc}")
            return status, payload, headers, False
        outcome = self.forwarder.forward(parsed.request, wire, parsed.model)
        if isinstance(outcome, Refusal):
            status, payload, headers = error_answer(wire, REFUSAL_KIND, outcome.message)
            return status, payload, headers, False
        if isinstance(outcome, ModelError):
            status, payload, headers = model_error_answer(wire, outcome)
            return status, payload, headers, False
        return 200, *_rendered(outcome, parsed, wire)

    def answer_goal_tool(self, name: str, body: Any) -> tuple[int, dict[str, Any]]:
        """``(status, {"text", "is_error"})`` for a goal-tool call from ``relay mcp``."""
        if name not in GOAL_TOOLS:
            return 404, {"text": f"unknown goal tool {name!r}", "is_error": True}
        arguments = body.get("arguments", {}) if isinstance(body, dict) else None
        problem = check_arguments(name, arguments)
        if problem is not None:
            return 200, {"text": problem, "is_error": True}
        if self.goal_tools is None:
            return 503, {"text": "relay is not taking goal-tool calls now", "is_error": True}
        try:
            answer = self.goal_tools(name, dict(arguments))  # type: ignore[arg-type]
        except Exception as exc:  # the decision side failed: the agent gets an error result
            text = f"relay could not decide on {name}: {type(exc).__name__}: {exc}"
            return 500, {"text": text, "is_error": True}
        return 200, {"text": answer.text, "is_error": answer.is_error}


def _rendered(
    response: Response, parsed: WireRequest, wire: str
) -> tuple[Any, dict[str, str], bool]:
    if wire == "messages":
        if parsed.stream:
            return messages_wire.response_events(response, parsed.model), {}, True
        return messages_wire.response_body(response, parsed.model), {}, False
    if parsed.stream:
        return responses_wire.response_events(response, parsed), {}, True
    return responses_wire.response_body(response, parsed), {}, False


def _route(path: str) -> str | None:
    """``messages``, ``responses``, ``goal-tool`` or None for an unknown path."""
    clean = urlsplit(path).path.rstrip("/")
    if clean == "/v1/messages":
        return "messages"
    if clean == "/v1/responses":
        return "responses"
    if clean.startswith(GOAL_TOOL_PATH.rstrip("/")):
        return "goal-tool"
    return None


class _Handler(BaseHTTPRequestHandler):
    """One request of the gateway; ``gateway`` is set on the subclass made per gateway."""

    gateway: Gateway
    server_version = "relay-gateway"
    timeout = IDLE_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._json(404, {"error": {"message": f"relay: no route GET {self.path}"}}, {})

    def do_POST(self) -> None:
        route = _route(self.path)
        wire = route if route in ("messages", "responses") else "responses"
        if route is None:
            self._json(404, {"error": {"message": f"relay: no route POST {self.path}"}}, {})
            return
        if not self.gateway.authorized(self.headers):
            if route == "goal-tool":
                self._json(401, {"text": UNAUTHORIZED, "is_error": True}, {})
                return
            status, body, headers = error_answer(wire, "auth", UNAUTHORIZED)
            self._json(status, body, headers)
            return
        body = self._body(wire)
        if body is _UNREADABLE:
            return
        if route == "goal-tool":
            name = urlsplit(self.path).path.rstrip("/").rsplit("/", 1)[-1]
            status, payload = self.gateway.answer_goal_tool(name, body)
            self._json(status, payload, {})
            return
        status, payload, headers, streamed = self.gateway.answer_model(wire, body)
        if streamed:
            self._events(payload)
        else:
            self._json(status, payload, headers)

    def _body(self, wire: str) -> Any:
        raw = self.headers.get("content-length") or "0"
        length = int(raw) if raw.isascii() and raw.isdigit() else -1  # "\xb2".isdigit()
        problem = None
        if length < 0:
            problem = f"the content-length {raw[:40]!r} is not a number of bytes"
        elif length > MAX_BODY_BYTES:
            problem = f"the request body is {length} bytes (at most {MAX_BODY_BYTES})"
        else:
            try:
                return json.loads(self.rfile.read(length) or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                problem = f"the request body is not JSON ({exc})"
        status, body, headers = error_answer(wire, "bad_request", f"relay: {problem}")
        self._json(status, body, headers)
        return _UNREADABLE

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_relay")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_relay")
        self.end_headers()
        for name, data in events:
            self.wfile.write(sse(name, data))
        self.wfile.flush()
        self.close_connection = True


def _handler_class(gateway: Gateway) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"gateway": gateway})


_UNREADABLE = object()
