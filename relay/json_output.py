"""The ``--json`` object of a goal (SPEC §12): ``relay run --json``, ``relay status --json``;
its shape is :class:`relay.outputs.GoalResult` (docs/outputs.md)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from relay.models.base import Usage

if TYPE_CHECKING:
    from relay.gitrepo import GitRepo
    from relay.outputs import GoalResult
    from relay.store import Store

__all__ = ["goal_json", "goal_result"]


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
    return GoalResult.model_validate(
        {
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
            "limits": limits,
            "tokens": {
                "counted": Usage(
                    goal.uncached_input, goal.cache_write, goal.cached_input, goal.output
                ).budget_tokens,
                "uncached_input": goal.uncached_input,
                "cache_write": goal.cache_write,
                "cached_input": goal.cached_input,
                "output": goal.output,
            },
            "cost_usd": round(goal.cost_usd, 6),
            "elapsed_s": round(goal.elapsed_s, 3),
            "audit": audit
            and {"passed": audit["passed"], "round": audit["round"], "checks": audit["checks"]},
            "diagnosis": goal.diagnosis,
            "final_response": final,
            "events": events,
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
    )
