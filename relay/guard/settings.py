"""The guard's configuration (``guard`` section of relay.yaml; SPEC §8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EVENT_KINDS = ("loop", "drift", "tool_failures", "api_errors", "tamper")


DEFAULT_WEIGHTS = {"loop": 30, "drift": 25, "tool_failures": 15, "api_errors": 10, "tamper": 30}
"""Each event kind's weight in the risk score by default (SPEC §8)."""


@dataclass(frozen=True)
class GuardSettings:
    """The guard configuration (``guard`` section of relay.yaml; SPEC §8)."""

    enabled: bool = True
    threshold: int = 70
    weights: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    detectors: tuple[str, ...] = EVENT_KINDS
    loop_window: int = 4
    loop_similarity: float = 0.95
    repeat_limit: int = 5
    failure_streak: int = 3
    decay: float = 0.5
    drift: str = "lexical"

    @classmethod
    def from_config(cls, guard: Any) -> GuardSettings:
        """Build from :class:`relay.config.GuardConfig`."""
        return cls(
            enabled=guard.enabled,
            threshold=guard.threshold,
            weights=dict(guard.weights),
            detectors=tuple(guard.detectors),
            loop_window=guard.loop_window,
            loop_similarity=guard.loop_similarity,
            repeat_limit=guard.repeat_limit,
            failure_streak=guard.failure_streak,
            decay=guard.decay,
            drift=guard.drift,
        )
