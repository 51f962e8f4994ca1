"""The ``--json`` object of a goal (SPEC §12): ``relay run --json``, ``relay status --json``;
its shape is :class:`relay.outputs.GoalResult` (docs/outputs.md)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from relay.models.base import Usage
from relay.text_call_texts import text_tool_calls_json

if TYPE_CHECKING:
    from relay.gitrepo import GitRepo
    from relay.outputs import GoalResult
    from relay.store import Store

__all__ = ["NO_CACHE_NOTE", "cache_note", "goal_json", "goal_result"]

NO_CACHE_NOTE = (
    "the provider reported no cached tokens: every prompt token was counted (the provider or "
    "server caches no prompt, or does not report it; each step re-sends the whole context)"
)
"""Said when a goal's model calls reported no cache use at all (issue 14)."""


def cache_note(usage: Usage) -> str | None:
    """:data:`NO_CACHE_NOTE` when the goal sent prompts (uncached input) and the provider
    reported neither a cache read nor a cache write over the whole goal, else None."""
    if usage.uncached_input > 0 and usage.cached_input == 0 and usage.cache_write == 0:
        return NO_CACHE_NOTE
    return None


def goal_json(store: Store, goal_id: str, git: GitRepo | None = None) -> dict[str, Any]:
    """:func:`goal_result` as JSON-ready data (a dict of plain values)."""
    return goal_result(store, goal_id, git).model_dump(mode="json")


def goal_result(store: Store, goal_id: str, git: GitRepo | None = None) -> GoalResult:
    """The ``--json`` object of SPEC §12 for a goal (also ``relay status --json``), as the
    model :class:`relay.outputs.GoalResult`.

    With ``git``, ``commits`` lists only commits that are on the goal's branch: nothing relay
    reports names a commit that history rewriting removed (SPEC §14)."""
    from relay.outputs import GoalResult

    goal = store.goal(goal_id)
    audit = store.latest_audit(goal_id)
    events = [
        {"kind": e["kind"], "round": e["round"], "detail": e["detail"]}
        for e in store.events(goal_id)
    ]
    commits = [{"round": r.n, "sha": r.commit_sha} for r in store.rounds(goal_id) if r.commit_sha]
    if git is not None and goal.branch and git.branch_exists(goal.branch):
        on_branch = git.reachable_commits(goal.branch, [c["sha"] for c in commits])
        commits = [c for c in commits if c["sha"] in on_branch]
    final = store.last_answer(goal_id)
    from relay.config_sections import RENAMED_KEYS, with_new_names  # pydantic: not at start-up

    limits = with_new_names(dict(goal.limits), RENAMED_KEYS["limits"])  # an older goal's names
    usage = Usage(goal.uncached_input, goal.cache_write, goal.cached_input, goal.output)
    data = {
        "goal_id": goal.id,
        "goal": goal.text,
        "status": goal.status,
        "reason": goal.reason,
        "message": goal.message,
        "question": goal.question,
        "rounds": goal.rounds,
        "no_progress_streak": goal.no_progress_streak,
        "blocked_reports": goal.blocked_reports,
        "model": goal.model,
        "mode": goal.mode,
        "worker": goal.worker,
        "limits": limits,
        "tokens": {
            "counted": usage.budget_tokens,
            "uncached_input": goal.uncached_input,
            "cache_write": goal.cache_write,
            "cached_input": goal.cached_input,
            "output": goal.output,
        },
        "cache_note": cache_note(usage),
        "cost_usd": round(goal.cost_usd, 6),
        "elapsed_s": round(goal.elapsed_s, 3),
        "audit": audit and _audit(audit, len(goal.deliverables)),
        "diagnosis": goal.diagnosis,
        "final_response": final,
        "events": events,
        "text_tool_calls": text_tool_calls_json(events),
        "branch": goal.branch,
        "sandbox": goal.sandbox,
        "base_commit": goal.base_commit,
        "commits": commits,
        "supplements": [
            {"text": s["text"], "source": s["source"], "created_at": s["created_at"]}
            for s in goal.supplements
        ],
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(goal.updated_at)),
    }
    return GoalResult.model_validate(data)


def _audit(audit: dict[str, Any], deliverables: int) -> dict[str, Any]:
    """The ``audit`` of the JSON: ``passed, round, checks``, whether the goal's deliverables
    were checked (``deliverables_checked``: false for a goal without any, SPEC §9 step 5) and
    the ``note`` saying what was checked instead (None when they were)."""
    from relay.audit_scope import audit_scope_note

    return {
        "passed": audit["passed"],
        "round": audit["round"],
        "checks": audit["checks"],
        "deliverables_checked": deliverables > 0,
        "note": audit_scope_note(audit, deliverables),
    }
