"""The goal state relay commits on the goal's branch, read back (SPEC §6, §11, §14).

A branch carries its goal: a fresh machine (a CI job) continues the open goal it finds there
(:func:`goal_state_on_branch`), and a store that disagrees with what relay committed is restored from
it (:func:`check_store_against_branch`). Only a goal state that carries relay's seal made with
this machine's key is trusted (:mod:`relay.branch_trust`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from relay import goal_state
from relay.branch_trust import Committed, read_committed, relays_state, require_trusted
from relay.errors import (
    GoalStateError,
    RepoStateError,
    StoreError,
    UnreadableGoalError,
)
from relay.goal import CLOSED_STATUSES
from relay.integrity import branch_findings
from relay.protected import goal_state_path
from relay.store import GoalRecord, Store

if TYPE_CHECKING:
    from relay.config import Config
    from relay.gitrepo import GitRepo

__all__ = [
    "check_store_against_branch",
    "fetch_goal_branch",
    "goal_state_on_branch",
    "import_goal_state",
    "record_from_goal_state",
    "refuse_other_goal",
]


def check_store_against_branch(git: GitRepo, store: Store, config: Config) -> list[str]:
    """Restore the latest goal's frozen fields and final status from the goal state relay
    sealed on its branch when the store disagrees (a change no relay command made, SPEC §14);
    each finding is recorded as ``tamper``. A committed state without relay's seal never
    changes the store: that it differs is recorded (:mod:`relay.branch_trust`). Returns the
    findings.

    Raises:
        UnreadableGoalError: the goal's row cannot be read and no sealed state restores it.
        ConfigError: a bad ``RELAY_STATE_KEY`` or key file.
    """
    try:
        latest = store.latest_goal()
    except UnreadableGoalError as exc:
        branch = git.current_branch()
        sealed = relays_state(git, branch, exc.goal_id, config)[0] if branch else None
        if sealed is None:
            raise
        frozen = {k: sealed.goal[k] for k in ("deliverables", "limits", "overrides")}
        store.restore_goal(exc.goal_id, None, **frozen)
        store.add_event(exc.goal_id, "tamper", f"{exc}; restored from the branch")
        latest = store.latest_goal()
    if latest is None or not latest.branch:
        return []
    sealed, untrusted = relays_state(git, latest.branch, latest.id, config)
    findings = _untrusted_findings(latest, untrusted, sealed)
    for detail in findings:
        store.add_event(latest.id, "tamper", detail, weight=0)
    if sealed is None:
        return findings
    restore, restored = branch_findings(latest, sealed.goal)
    if restored:
        store.restore_goal(latest.id, None, **restore)
        for detail in restored:
            store.add_event(latest.id, "tamper", detail, weight=0)
    return findings + restored


def _untrusted_findings(
    goal: GoalRecord, untrusted: Committed | None, sealed: Committed | None
) -> list[str]:
    """One line when the branch's head holds a goal state of ``goal`` without relay's seal
    that differs from the store: it is not used (``sealed``, relay's own, is, if any)."""
    if untrusted is None or not branch_findings(goal, untrusted.goal)[1]:
        return []
    instead = (
        f"the goal state relay sealed at {sealed.commit[:7]} is the one checked against it"
        if sealed is not None and sealed.commit
        else "it is not checked against anything else"
    )
    return [
        f"{untrusted.where} {untrusted.distrust()}, and its goal differs from relay's store "
        f"(deliverables, limits or status): it is not used; the store's goal is kept, and {instead}"
    ]


def goal_state_on_branch(
    git: GitRepo, branch: str | None, config: Config, store: Store | None
) -> dict[str, Any] | None:
    """The open goal that ``branch`` (local, or the remote-tracking one) carries in its goal
    state file, when this machine's store does not know it; None otherwise (SPEC §6, §11).

    Raises:
        StoreError: the file is not a goal state relay can continue, is another branch's, or
            does not carry relay's seal made with this machine's key (naming the file, why,
            and how to continue: :func:`relay.branch_trust.require_trusted`).
        ConfigError: a bad ``RELAY_STATE_KEY`` or key file.
    """
    if not branch:
        return None
    ref = git.branch_ref(branch)
    if ref is None:
        return None
    path = goal_state_path(config)
    text = git.file_at(ref, path)
    if text is None:
        return None
    where = f"{path} on branch {branch}"
    committed = read_committed(text, where, commit=ref)
    state = committed.state
    goal = state["goal"]
    _check_carried(git, goal, branch, ref, where)
    rounds = state["rounds"]
    if rounds and not rounds[-1].commit_sha:  # the commit that holds this very file
        rounds[-1] = dataclasses.replace(rounds[-1], commit_sha=git.resolve(ref))
    if goal.get("status") in {s.value for s in CLOSED_STATUSES}:
        return None
    if store is not None:
        try:
            store.goal(goal["id"])
            return None  # known here: the store is the authority
        except GoalStateError:
            pass
    require_trusted(committed)
    return state


def _check_carried(git: GitRepo, goal: dict[str, Any], branch: str, ref: str, where: str) -> None:
    """A goal state read from ``branch`` (at ``ref``) continues only the goal of that branch,
    from a base commit in its history: a file naming another branch would make relay commit
    (and push) there, and a later base commit would hide changes from the audit (SPEC §9, §11,
    §14). Raises ``StoreError`` naming the file and the value."""
    if goal.get("branch") != branch:
        raise StoreError(
            f"{where} is the goal state of the branch {goal.get('branch')!r}, not of {branch}: "
            "a branch carries only its own goal; it cannot be continued"
        )
    base = goal["base_commit"]
    try:
        known = git.is_ancestor(base, ref)
    except RepoStateError:
        known = False
    if not known:
        raise StoreError(
            f"{where} names the base commit {base}, which is not in the history of {branch}; "
            "it cannot be continued"
        )


def record_from_goal_state(state: dict[str, Any]) -> GoalRecord:
    """A goal record built from a branch's goal state (before it is imported into the
    store)."""
    g = dict(state["goal"])
    g.setdefault("progress_text", None)
    g.setdefault("updated_at", g.get("created_at") or time.time())
    g.setdefault("sandbox", "off")
    g.setdefault("worker", "builtin")  # a goal state written before agent workers
    fields = {f.name for f in dataclasses.fields(GoalRecord)} - {"supplements"}
    record = GoalRecord(**{name: g.get(name) for name in fields})
    record.supplements = list(state.get("supplements", []))
    return record


def import_goal_state(git: GitRepo, store: Store, state: dict[str, Any]) -> GoalRecord:
    """Import the goal a branch carries into this machine's store (its branch tracked from
    the remote when it is not here)."""
    branch = state["goal"]["branch"]
    if branch and not git.branch_exists(branch):
        git.track_branch(branch)
    return goal_state.import_goal(store, state)


def fetch_goal_branch(git: GitRepo, branch: str | None, config: Config) -> None:
    """Before a run with ``--branch B`` and ``git.push`` looks for the goal B carries: fetch
    B from ``origin`` (a CI checkout holds only its default branch), and move a local B that
    is behind to the remote's commit (never a local B with commits of its own, nor the one
    checked out: a push of it is then refused and stops the goal, ``branch_moved``).

    Raises:
        RepoStateError: ``origin`` exists but cannot be fetched from.
    """
    if not branch or not config.git.push or not git.has_remote("origin"):
        return
    if not git.fetch_branch(branch):
        return
    remote = git.resolve(f"origin/{branch}")
    if not git.branch_exists(branch) or git.current_branch() == branch:
        return
    local = git.resolve(branch)
    if local != remote and git.is_ancestor(local, remote):
        git.move_branch(branch, remote)


def refuse_other_goal(goal: GoalRecord, goal_text: str, branch: str | None) -> None:
    """``relay run GOAL`` with an open ``goal`` (in the store, or carried by the branch): the
    same goal text (on the same branch, when ``--branch`` names one) continues it — a retried
    batch task, a second CI job; another goal is refused.

    Raises:
        GoalStateError: ``goal`` is another goal, naming it and what to do.
    """
    same_text = goal.text.strip() == goal_text.strip()
    if same_text and (branch is None or goal.branch == branch):
        return
    raise GoalStateError(
        f"goal {goal.id} is still open ({goal.status}, branch "
        f"{goal.branch}): `relay resume` continues it, `relay clear` drops it"
    )
