"""Provider keys leave relay's process environment as soon as relay starts (SPEC §14).

Every process relay starts inherits its environment unless told otherwise: git (gitpython runs
``git version`` the moment it is imported), helper programs, test commands. Rather than rely on
every one of those call sites, relay takes the model providers' secrets out of ``os.environ``
before anything else is imported and keeps them here; the provider clients get them passed
explicitly. (The kernel's copy of the environment the process started with, under
``/proc/<pid>/environ``, is hidden by the sandbox's PID namespace and by
:func:`relay.sandbox.protect_process`.)
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from relay.sandbox.env import is_credential_name, is_provider_name

__all__ = ["held", "hold_provider_keys", "provider_key"]

_held: dict[str, str] = {}


def hold_provider_keys(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Move every provider secret (a provider's prefix and a credential word in the name, e.g.
    ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``) out of ``environ``
    (default ``os.environ``) into relay's memory. Returns the names moved."""
    source = os.environ if environ is None else environ
    moved = [n for n in list(source) if is_provider_name(n) and is_credential_name(n)]
    for name in moved:
        _held[name] = source.pop(name)
    return moved


def provider_key(name: str) -> str | None:
    """The value of the provider variable ``name``: from the environment if it is set there
    now (tests, embedding programs), else the one relay took at start."""
    return os.environ.get(name) or _held.get(name)


def held() -> dict[str, str]:
    """A copy of the secrets relay holds (for redaction)."""
    return dict(_held)
