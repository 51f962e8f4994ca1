"""How a goal of a batch ended: one row, whatever happened to it (issue 17, items 1, 3, 4).

A row holds what dies with the worker's folder: the status, the run's JSON object and
summary, the branch's head and whether the remote has it (``pushed``), the worker's host and
the attempt. A goal whose attempt never came back — a lost worker the engine gave up on, a
broken local pool, a cancelled or timed-out task, commits that never reached the remote — is a
row with status ``lost`` and a reason (:data:`LOST_REASONS`), never a traceback.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from relay.interrupts import INTERRUPTED_EXIT_CODES

__all__ = ["LOST_REASONS", "BatchResult", "lost", "worst_exit_code"]

LOST_REASONS = {
    "killed_worker": "the engine lost the goal's worker more often than it retries",
    "broken_pool": "a process of the local pool died",
    "cancelled": "the batch was cancelled before the goal ran",
    "timeout": "the batch's --timeout ran out before the goal ended",
    "engine_error": "the engine failed to run the task",
    "not_pushed": "the goal's last commits are not on the remote",
}
"""The reasons of a ``lost`` row, and what each means."""


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """How one goal of a batch ended (``status`` ``error`` when relay refused to run it,
    ``lost`` when its attempt never came back or its work is not on the remote)."""

    name: str
    branch: str
    exit_code: int
    status: str
    reason: str | None
    rounds: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    message: str = ""
    pushed: bool = False
    head: str | None = None
    host: str | None = None
    attempt: int = 0
    summary: str | None = None
    result: dict[str, Any] | None = None

    def row(self) -> dict[str, Any]:
        """The row as ``relay batch --json`` prints it."""
        return dataclasses.asdict(self)


def lost(name: str, branch: str, reason: str, detail: str = "", **fields: Any) -> BatchResult:
    """A ``lost`` row: ``reason`` one of :data:`LOST_REASONS`, ``detail`` the engine's words.
    Its exit code is 130 for a cancelled goal (the user stopped the batch), else 1."""
    words = LOST_REASONS[reason] + (f": {detail}" if detail else "")
    code = 130 if reason == "cancelled" else 1
    return BatchResult(name, branch, code, "lost", reason, message=words, **fields)


def worst_exit_code(codes: list[int]) -> int:
    """One exit code for the batch: 0 when every goal completed, else the worst one (usage,
    repository and engine errors, 1, are worst; then failed 7, terminated 6, … needs_user_input
    2; a paused or cancelled goal's 129/130/141/143 only when nothing else went wrong)."""
    if not codes or all(c == 0 for c in codes):
        return 0
    if 1 in codes:
        return 1
    ordinary = [c for c in codes if c != 0 and c not in INTERRUPTED_EXIT_CODES]
    return max(ordinary) if ordinary else max(codes)
