"""goal-relay: keep an LLM coding agent working on a goal until it is verifiably done.

The public surface is re-exported here; everything else is internal.
"""
# ruff: noqa: E402 - the provider keys are taken out of the environment before other imports

from relay.secrets import hold_provider_keys

hold_provider_keys()  # before anything can start a process that would inherit them (SPEC §14)

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
from relay.runner import RunOutcome, RunRequest, goal_json
from relay.runner import run as run_goal
from relay.sandbox import Sandbox, SandboxUnavailable, resolve_sandbox

__version__ = "0.1.0"

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
