"""Models: the provider-neutral types, the scripted model and the ``PROVIDER:MODEL`` registry.

The names are imported on first use (module ``__getattr__``), so that a module needing only
the types (``relay.models.base``) does not load the scripted model's schema or the registry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relay.models.base import Message, Model, Request, Response, ToolCall, ToolSpec, Usage
    from relay.models.registry import create_model
    from relay.models.scripted import ScriptedModel

_PUBLIC: dict[str, str] = {
    "Message": "relay.models.base",
    "Model": "relay.models.base",
    "Request": "relay.models.base",
    "Response": "relay.models.base",
    "ScriptedModel": "relay.models.scripted",
    "ToolCall": "relay.models.base",
    "ToolSpec": "relay.models.base",
    "Usage": "relay.models.base",
    "create_model": "relay.models.registry",
}
"""Public name → the module it is imported from on first use."""

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


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562); AttributeError for any other name, so
    that ``from relay.models import <submodule>`` still finds the submodule."""
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'relay.models' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
