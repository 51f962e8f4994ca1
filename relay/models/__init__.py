"""Models: the provider-neutral types, the scripted model and the ``PROVIDER:MODEL`` registry."""

from relay.models.base import Message, Model, Request, Response, ToolCall, ToolSpec, Usage
from relay.models.registry import create_model
from relay.models.scripted import ScriptedModel

__all__ = [
    "Message",
    "Model",
    "Request",
    "Response",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "create_model",
]
