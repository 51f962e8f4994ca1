"""Which goal state relay goes on from: its store, or the state committed on the branch
(SPEC §6, §11, §14; issue 27).

Whoever can push a goal's branch writes its ``.relay/goal.json`` — without the sandbox, the
model's own commands can commit it. relay seals the goal state it commits
(:mod:`relay.state_seal`, purpose :data:`PURPOSE`) and decides from the seal:

* **on the machine that wrote it** (the store knows the goal) the store is relay's record. A
  committed state sealed with this machine's key is relay's too: where it and the store
  disagree on what never changes (deliverables, limits, …), the store was changed behind
  relay's back and the sealed state restores it (:mod:`relay.integrity`). A state without a
  valid seal never changes the store; the newest state relay sealed further down the branch
  is used for that check instead (:func:`relays_state`);
* **on another machine** (a CI job, a batch worker's clone) a goal is continued from the
  branch only when its state's seal verifies with a key of this machine's
  (``RELAY_STATE_KEY``, e.g. the CI secret the first job sealed with); otherwise relay refuses,
  saying why and how to continue (:func:`require_trusted`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relay import goal_state
from relay.errors import RelayError, StoreError
from relay.protected import goal_state_path
from relay.state_seal import KEY_ENV, StateKey, Verdict, check_seal, key_file_path, seal

if TYPE_CHECKING:
    from relay.config import Config
    from relay.gitrepo import GitRepo

__all__ = [
    "PURPOSE",
    "SEARCH_COMMITS",
    "Committed",
    "committed_at",
    "read_committed",
    "read_trusted",
    "relays_state",
    "require_trusted",
    "sealed_text",
]

PURPOSE = "goal-state"
"""What a goal state's seal is made for (a seal of another kind of file never verifies it)."""
SEAL = "seal"
"""The goal state's key that holds its seal."""
SEARCH_COMMITS = 20
"""How many commits that changed the goal state :func:`relays_state` looks through for the
newest one relay sealed, below an unsealed one."""


@dataclass(frozen=True)
class Committed:
    """A goal state read from a commit: ``state`` as :func:`relay.goal_state.loads` checks
    it, ``where`` it was read (for messages), what its seal says (``verdict``), and the
    ``commit`` it was read at."""

    state: dict[str, Any]
    where: str
    verdict: Verdict
    commit: str | None = None

    @property
    def trusted(self) -> bool:
        """Whether relay sealed it with a key of this machine's."""
        return self.verdict.trusted

    @property
    def goal(self) -> dict[str, Any]:
        return self.state["goal"]

    def distrust(self) -> str:
        """Why it is not trusted, in words that follow its ``where`` ("" when it is)."""
        v = self.verdict
        if v.status == "unsealed":
            return "is not sealed by relay"
        if v.status == "other_key":
            return f"is sealed with another key (key id {v.key_id}) than this machine's"
        if v.status == "forged":
            return (
                "is not sealed by relay as it stands: its seal does not match its contents (it "
                "was changed after relay sealed it)"
            )
        return ""


def sealed_text(state: dict[str, Any], key: StateKey) -> str:
    """The goal state file's text for ``state`` (as :func:`relay.goal_state.goal_state` builds
    it), sealed with ``key``."""
    payload = json.loads(json.dumps({k: v for k, v in state.items() if k != SEAL}))
    return goal_state.dumps({**payload, SEAL: seal(payload, PURPOSE, key)})


def read_committed(
    text: str, where: str, *, commit: str | None = None, keys: tuple[StateKey, ...] | None = None
) -> Committed:
    """Parse, check and verify a goal state file's ``text`` (with ``keys``, default this
    machine's, :func:`relay.state_seal.verifying_keys`).

    Raises:
        StoreError: it is not a goal state relay can continue (naming ``where``).
        ConfigError: a bad ``RELAY_STATE_KEY`` or key file.
    """
    raw = goal_state.parse(text, where)
    state = goal_state.checked(raw, where)
    payload = {k: v for k, v in raw.items() if k != SEAL}
    verdict = check_seal(payload, raw.get(SEAL), PURPOSE, keys)
    return Committed(state, where, verdict, commit)


def committed_at(git: GitRepo, ref: str, config: Config, where: str) -> Committed | None:
    """The goal state committed at ``ref``; None when there is none, or it is not one relay
    can continue. Raises ``ConfigError`` for a bad key."""
    text = git.file_at(ref, goal_state_path(config))
    if text is None:
        return None
    try:
        return read_committed(text, where, commit=ref)
    except StoreError:
        return None


def relays_state(
    git: GitRepo, branch: str, goal_id: str, config: Config
) -> tuple[Committed | None, Committed | None]:
    """The goal state the store of goal ``goal_id`` is checked against on this machine.

    Returns:
        ``(sealed, untrusted)``: ``sealed`` is the newest goal state of this goal on
        ``branch`` that relay sealed with this machine's key (the head's, or one of the
        :data:`SEARCH_COMMITS` commits below it that changed the file), None when there is
        none; ``untrusted`` is the head's goal state of this goal when it carries no valid
        seal (what it says is never used), else None.

    Raises:
        ConfigError: a bad ``RELAY_STATE_KEY`` or key file.
    """
    ref = git.branch_ref(branch)
    if ref is None:
        return None, None
    where = f"{goal_state_path(config)} on {branch}"
    head = committed_at(git, ref, config, where)
    if head is None or head.goal.get("id") != goal_id:
        return None, None
    if head.trusted:
        return head, None
    for sha in git.path_commits(ref, goal_state_path(config), SEARCH_COMMITS + 1)[1:]:
        older = committed_at(git, sha, config, f"{goal_state_path(config)} at {sha[:7]}")
        if older is not None and older.trusted and older.goal.get("id") == goal_id:
            return older, head
    return None, head


def require_trusted(committed: Committed) -> None:
    """A goal continued from its branch on a machine whose store does not know it: its state
    must carry relay's seal made with a key of this machine's.

    Raises:
        StoreError: it does not, naming the file, why, and how to continue.
    """
    if committed.trusted:
        return
    why = committed.distrust()
    how = (
        f"if relay wrote it on another machine, set {KEY_ENV} to the key relay sealed it with "
        f"there (that machine's {KEY_ENV}, e.g. the CI secret of the job that wrote it, or "
        f"its key file, {key_file_path()} on this machine) and run again; or continue "
        "the goal on the machine that started it, whose store holds it"
    )
    if committed.verdict.status == "forged":
        how = "continue the goal on the machine that started it, whose store holds it"
    raise StoreError(
        f"{committed.where} {why}: relay continues a goal from its branch only when relay "
        "sealed its state with this machine's key, so that whoever can push the branch cannot "
        f"change the goal's deliverables, limits or budgets; {how}"
    )


def read_trusted(text: str | None, where: str) -> dict[str, Any] | None:
    """The checked goal state of ``text`` when relay sealed it with this machine's key; None
    when it is absent, not a goal state, or not sealed so (never an error: for callers that
    fall back to something safe)."""
    if text is None:
        return None
    try:
        committed = read_committed(text, where)
    except RelayError:
        return None
    return committed.state if committed.trusted else None
