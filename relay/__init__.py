"""goal-relay: keep an LLM coding agent working on a goal until it is verifiably done.

The public surface is :data:`__all__`, re-exported here; everything else is internal. The
names are imported on first use (module ``__getattr__``), so that importing ``relay`` (and
``relay --version``) does not load gitpython, pydantic or the provider SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay.lazy import lazy_names
from relay.secrets import hold_provider_keys

hold_provider_keys()  # before anything can start a process that would inherit them (SPEC §14)

if TYPE_CHECKING:
    from relay.config import Config, Deliverable, Limits, load_config
    from relay.errors import (
        ConfigError,
        GoalStateError,
        ModelError,
        RelayError,
        RepoStateError,
        StoreError,
    )
    from relay.goal import GoalStatus, exit_code_for
    from relay.json_output import goal_json
    from relay.runner import RunOutcome, RunRequest
    from relay.runner import run as run_goal
    from relay.sandbox import Sandbox, SandboxUnavailable, resolve_sandbox

__version__ = "0.1.0"

_PUBLIC: dict[str, tuple[str, str]] = {
    "Config": ("relay.config", "Config"),
    "ConfigError": ("relay.errors", "ConfigError"),
    "Deliverable": ("relay.config", "Deliverable"),
    "GoalStateError": ("relay.errors", "GoalStateError"),
    "GoalStatus": ("relay.goal", "GoalStatus"),
    "Limits": ("relay.config", "Limits"),
    "ModelError": ("relay.errors", "ModelError"),
    "RelayError": ("relay.errors", "RelayError"),
    "RepoStateError": ("relay.errors", "RepoStateError"),
    "RunOutcome": ("relay.runner", "RunOutcome"),
    "RunRequest": ("relay.runner", "RunRequest"),
    "Sandbox": ("relay.sandbox", "Sandbox"),
    "SandboxUnavailable": ("relay.sandbox", "SandboxUnavailable"),
    "StoreError": ("relay.errors", "StoreError"),
    "exit_code_for": ("relay.goal", "exit_code_for"),
    "goal_json": ("relay.json_output", "goal_json"),
    "load_config": ("relay.config", "load_config"),
    "resolve_sandbox": ("relay.sandbox", "resolve_sandbox"),
    "run_goal": ("relay.runner", "run"),
}
"""Public name → (module, attribute) it is imported from on first use."""

__all__ = [
    "Config",
    "ConfigError",
    "Deliverable",
    "GoalStateError",
    "GoalStatus",
    "Limits",
    "ModelError",
    "RelayError",
    "RepoStateError",
    "RunOutcome",
    "RunRequest",
    "Sandbox",
    "SandboxUnavailable",
    "StoreError",
    "exit_code_for",
    "goal_json",
    "load_config",
    "resolve_sandbox",
    "run_goal",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC)
