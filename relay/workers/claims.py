"""An agent's ``complete`` is judged on the tree relay commits (SPEC §9, §14, §15).

With the built-in worker nothing of the model runs while the audit runs or before the round's
commit: each ``shell`` call ends with every process it started. An agent worker's processes
live for its whole round, so a process it left running (``setsid … &``) can change the working
tree while the audit runs or after it passed, before relay commits: the audit would vouch for
files that are not the ones committed (tested: a ``sleep 0.3; echo BAD > result.txt`` made
``complete`` stand with the failing file on the branch).

So the agent loop takes the :func:`tree_state` of the working tree before it audits a
``complete`` claim, and again once the agent and every process of its round are gone. When
they differ, the claim is audited again then — when nothing of the model can run — and only
that audit decides.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from relay.supervisor import UpdateDecision, review_audit

if TYPE_CHECKING:
    from relay.gitrepo import GitRepo
    from relay.goal_tools import GoalTools
    from relay.loop_state import EventLog, RoundState

__all__ = ["TreeState", "audited_again", "tree_state"]

TreeState = tuple[tuple[str, int, int, int, int, int] | tuple[str], ...]
"""Per file ``(path, mode, size, inode, mtime_ns, ctime_ns)``, or ``(path,)`` when gone."""


def tree_state(git: GitRepo) -> TreeState:
    """The state of every file relay would commit (tracked, and untracked not ignored): one
    ``git ls-files`` and an ``lstat`` per file, no content read. Any write changes it: a
    file's change time (``ctime``) cannot be set back by its writer, unlike its
    modification time."""
    out: list[tuple[str, int, int, int, int, int] | tuple[str]] = []
    for rel in git.files():
        try:
            st = os.lstat(git.root / rel)
        except OSError:
            out.append((rel,))
            continue
        out.append((rel, st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def audited_again(
    git: GitRepo,
    tools: GoalTools,
    events: EventLog,
    rnd: RoundState,
    seen: TreeState,
    claim: dict[str, Any],
) -> UpdateDecision | None:
    """After the agent's round ended with an accepted ``complete`` (``claim``: its
    ``update_goal`` arguments; ``seen``: :func:`tree_state` before its audit): None when the
    tree is unchanged or a new audit passes; else the rejection (counters and message as for
    a failed audit, SPEC §7.1), also recorded as an ``update_goal`` event."""
    if tree_state(git) == seen:
        return None
    events.add(
        "audit_repeated",
        rnd.n,
        "the working tree changed while or after the audit of the complete claim ran "
        "(a process of the agent was still running): audited again after the agent ended",
    )
    audit = tools.audit(claim.get("checklist") or [], rnd)
    if audit.passed:
        return None
    summary = str(claim.get("summary") or "")
    decision = review_audit(False, audit.failures_text(), summary, rnd.counters)
    first = decision.message.splitlines()[0]
    events.add("update_goal", rnd.n, f"complete: rejected after the agent ended - {first}")
    return decision
