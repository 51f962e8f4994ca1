"""relay's API gateway for agent workers (SPEC §15; docs/workers.md).

An agent CLI (Claude Code, Codex) runs with a dummy key equal to the run's token and relay's
loopback gateway as its base URL. The gateway reads each request (Anthropic Messages API or
OpenAI Responses API, JSON or SSE), turns it into relay's neutral request, lets relay's hook
admit it, sends it to relay's model (a provider with the real key, or the scripted model)
under relay's retry policy, reports every attempt to relay's callback, and answers in the
agent's wire format. ``relay mcp`` (:mod:`relay.gateway.mcp_server`) forwards the agent's
goal-tool calls to the same gateway.

Example::

    forwarder = Forwarder(model, admit=budgets.admit, on_exchange=transcript.record,
                          translate=translator_for(model, str(repo)))
    with Gateway(forwarder, goal_tools=supervisor.decide) as gateway:
        env = {"ANTHROPIC_BASE_URL": gateway.url, "ANTHROPIC_API_KEY": gateway.token}
"""

from __future__ import annotations

from relay.gateway.agent_tools import translate_response
from relay.gateway.forward import Admit, Exchange, Forwarder, OnExchange, Refusal, Translate
from relay.gateway.server import Gateway, GoalToolAnswer, GoalToolHandler
from relay.models.base import Model, Request, Response

__all__ = [
    "Admit",
    "Exchange",
    "Forwarder",
    "Gateway",
    "GoalToolAnswer",
    "GoalToolHandler",
    "OnExchange",
    "Refusal",
    "Translate",
    "translator_for",
]


def translator_for(model: Model, workdir: str) -> Translate | None:
    """The translation of script tool names into the agent's tools when ``model`` is relay's
    scripted model (SPEC §13); None for a real provider, whose model already calls the
    agent's tools. ``workdir``: the agent's working directory, absolute."""
    from relay.models.scripted import ScriptedModel

    if not isinstance(model, ScriptedModel):
        return None

    def translate(response: Response, request: Request) -> Response:
        return translate_response(response, request, workdir)

    return translate
