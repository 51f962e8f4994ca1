"""Models: the provider-neutral types, the scripted model and the ``PROVIDER:MODEL`` registry.

The names are imported on first use (module ``__getattr__``), so that a module needing only
the types (``relay.models.base``) does not load the scripted model's schema or the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay.lazy import lazy_names

if TYPE_CHECKING:
    from relay.models.base import Message, Model, Request, Response, ToolCall, ToolSpec, Usage
    from relay.models.registry import create_model
    from relay.models.scripted import ScriptedModel

_PUBLIC: dict[str, tuple[str, str]] = {
    "Message": ("relay.models.base", "Message"),
    "Model": ("relay.models.base", "Model"),
    "Request": ("relay.models.base", "Request"),
    "Response": ("relay.models.base", "Response"),
    "ScriptedModel": ("relay.models.scripted", "ScriptedModel"),
    "ToolCall": ("relay.models.base", "ToolCall"),
    "ToolSpec": ("relay.models.base", "ToolSpec"),
    "Usage": ("relay.models.base", "Usage"),
    "create_model": ("relay.models.registry", "create_model"),
}
"""Public name → (module, attribute) it is imported from on first use."""

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


__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC)
