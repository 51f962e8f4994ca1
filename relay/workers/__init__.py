"""Agent workers (SPEC §15; docs/workers.md): Claude Code or Codex CLI as the round's worker,
under relay's supervisor, guard, audit and budgets, with relay as their API gateway.

``worker: builtin`` runs relay's own steps (:class:`relay.loop.GoalLoop`); ``claude-code``
and ``codex`` run one fresh agent process per round (:class:`relay.workers.loop.AgentLoop`).
"""

from __future__ import annotations

from typing import Any

from relay.config import Config
from relay.errors import ConfigError
from relay.loop import GoalLoop, LoopSetup
from relay.store import GoalRecord

__all__ = ["goal_loop", "worker_of"]


def worker_of(config: Config, goal: GoalRecord, flags: dict[str, Any]) -> Config:
    """The configuration of a resumed goal with the worker stored with it (SPEC §15).

    Raises:
        ConfigError: ``--worker`` (``flags``) names another worker than the goal's.
    """
    if "worker" in flags and flags["worker"] != goal.worker:
        raise ConfigError(
            f"goal {goal.id} runs with worker {goal.worker} (stored with the goal); "
            f"--worker {flags['worker']} cannot change it"
        )
    return config.model_copy(update={"worker": goal.worker})


def goal_loop(setup: LoopSetup) -> GoalLoop:
    """The loop of the run's ``worker``.

    Raises:
        ConfigError: an agent worker whose executable is not on ``PATH``.
    """
    if setup.config.worker == "builtin":
        return GoalLoop(setup)
    from relay.workers.loop import AgentLoop

    return AgentLoop(setup)
