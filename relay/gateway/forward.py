"""How relay's gateway forwards one agent request to relay's model (SPEC §7.4, §7.6, §15).

Before each attempt the ``admit`` hook decides whether the request may go (a budget reached
or the round ended: a :class:`Refusal` the agent gets as a non-retryable error). Each attempt
is reported to ``on_exchange`` (transcript, usage, budgets, guard events). A transient error
is retried by relay after the wait of :func:`relay.retry.retry_wait`; a fatal one, a wait
over ``api_max_wait_s`` or used-up retries end the request with the error and the stop that
the supervisor integration applies to the goal.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from relay.errors import ModelError
from relay.models.base import Model, Request, Response, response_problem
from relay.retry import RetryPolicy, retry_wait
from relay.supervisor import Stop

WIRE_NAMES = {"messages": "Anthropic Messages API", "responses": "OpenAI Responses API"}


@dataclass(frozen=True)
class Refusal:
    """A request relay does not forward.

    Attributes:
        message: shown to the agent (and by it to its user), e.g. "relay: the token budget of
            the goal is used up".
        kind: ``budget`` (a budget is reached, SPEC §7.4) or ``stopped`` (the round or goal
            ended): both are answered with an error the agent does not retry; ``end_turn``
            (the round is over, e.g. after an accepted ``update_goal`` or a handoff): answered
            as the model's last answer, ``message`` as its text with no tool call, so that the
            agent ends its turn and exits normally. Nothing reaches the model either way.
    """

    message: str
    kind: str = "budget"


@dataclass(frozen=True)
class Exchange:
    """One attempt of one agent request, as the gateway reports it.

    Attributes:
        wire: ``messages`` or ``responses``.
        agent_model: the model name the agent asked for.
        request: the neutral request relay's model got.
        attempt: 1 for the first attempt, 2 for the first retry, …; 0 for a refusal.
        response: the answer the agent got (scripted tool names already translated).
        error: the provider's classified error of this attempt.
        refusal: set when ``admit`` refused the request (nothing was forwarded).
        stop: set on the last attempt of a request that failed for good: the goal's stop
            (``failed`` with ``quota``, ``auth``, ``rate_limited``, ``api_unavailable`` …).
        duration_s: wall time of the attempt, seconds.
    """

    wire: str
    agent_model: str
    request: Request
    attempt: int
    response: Response | None = None
    error: ModelError | None = None
    refusal: Refusal | None = None
    stop: Stop | None = None
    duration_s: float = 0.0


Admit = Callable[[Request, str], Refusal | None]
"""``admit(request, wire)``: None lets the request go; a :class:`Refusal` stops it."""

OnExchange = Callable[[Exchange], None]
"""Called with every :class:`Exchange`, in order, from the gateway's request threads."""

Translate = Callable[[Response, Request], Response]
"""Rewrites a model's answer for the agent (the scripted tool names, :mod:`.agent_tools`);
raises :class:`ModelError` when it cannot."""


def admit_all(request: Request, wire: str) -> Refusal | None:
    """The default hook: every request may go."""
    return None


@dataclass
class Forwarder:
    """Forwards requests to ``model`` under relay's retry policy.

    Args:
        model: relay's model (a provider or the scripted model); it never retries itself.
        admit: the hook deciding before each attempt.
        on_exchange: the callback of every attempt.
        policy: relay's retry policy (``limits.api_retries`` …).
        translate: applied to each answer before the agent gets it, or None.
        sleep: waits that many seconds (injectable for tests).
        rng: the jitter of the backoff.
    """

    model: Model
    admit: Admit = admit_all
    on_exchange: OnExchange | None = None
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    translate: Translate | None = None
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    stopped: Stop | None = None
    """The stop of the first request that failed for good; every later request is refused
    without reaching the model (an agent that re-sends after a fatal error, as Claude Code
    does once after a 400, must not cost another upstream request: SPEC §7.6)."""

    def forward(
        self, request: Request, wire: str, agent_model: str
    ) -> Response | ModelError | Refusal:
        """The answer to one agent request: a response (also relay's end of turn for a refusal
        of kind ``end_turn``), the error relay gave up on, or a refusal (the hook's, or
        ``stopped`` once an earlier request failed for good). Never raises for a model's
        failure."""
        attempt = 0
        while True:
            attempt += 1
            refusal = self.admit(request, wire)
            if self.stopped is not None:
                refusal = Refusal(f"relay: the goal stopped: {self.stopped.message}", "stopped")
            if refusal is not None:
                self._report(Exchange(wire, agent_model, request, 0, refusal=refusal))
                if refusal.kind == "end_turn":
                    return Response(text=refusal.message, stop_reason="end_turn")
                return refusal
            started = time.monotonic()
            outcome = self._attempt(request)
            took = time.monotonic() - started
            if isinstance(outcome, Response):
                self._report(
                    Exchange(wire, agent_model, request, attempt, outcome, duration_s=took)
                )
                return outcome
            decision = retry_wait(outcome, attempt, self.rng, self.policy)
            stop = decision if isinstance(decision, Stop) else None
            self._report(
                Exchange(
                    wire, agent_model, request, attempt, error=outcome, stop=stop, duration_s=took
                )
            )
            if stop is not None:
                self.stopped = self.stopped or stop
                return outcome
            self.sleep(float(decision))  # type: ignore[arg-type]

    def _attempt(self, request: Request) -> Response | ModelError:
        try:
            response = self.model.complete(request)
            problem = response_problem(response)
            if problem is not None:
                return ModelError("internal", f"relay's model gave a malformed answer: {problem}")
            if self.translate is not None:
                response = self.translate(response, request)
        except ModelError as exc:
            return exc
        except Exception as exc:  # a model that is not one of relay's: never hang the agent
            return ModelError("internal", f"relay's model failed: {type(exc).__name__}: {exc}")
        return response

    def _report(self, exchange: Exchange) -> None:
        if self.on_exchange is not None:
            self.on_exchange(exchange)
