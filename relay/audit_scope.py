"""What an audit had of the user's to check (SPEC §9; issue 14).

A goal without deliverables is audited with the fallback checks of SPEC §9 step 5 alone: a
change since the base commit, and the project's test command when one is detected (with the
tamper and checklist checks that every audit runs). None of them looks at what the goal asked
for, so a goal "containing hello" passes with a file that says "Hello World". Every output of
such a goal (the end of a run, ``relay status``, the JSON, the summary) says so with
:func:`audit_scope_note`, and how to add deliverables. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ADD_DELIVERABLES", "audit_scope_note"]

ADD_DELIVERABLES = (
    "Declare deliverables (`deliverables:` in relay.yaml or the goal file's front matter: "
    "files that must exist or contain a text, commands that must pass; README, "
    '"The completion audit") to have the result itself checked.'
)
"""How a user makes the audit check the result (the README section that shows it)."""


def _checked(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the checks of a fallback audit looked at, in words, each once."""
    said: list[str] = []
    for c in checks:
        kind, target = c.get("kind"), str(c.get("target", ""))
        if kind == "changed":
            text = "that a file changed since the goal started"
        elif kind == "tests" and target == "none detected":
            text = "no tests (no test command was detected)"
        elif kind == "tests":
            text = f"that the project's test command `{target}` passes"
        elif kind == "tamper":
            text = "that no test was deleted or skipped and no protected path changed"
        elif kind == "evidence":
            text = "that the paths the model's checklist names exist"
        else:
            text = f"{kind} {target}".strip()
        if text not in said:
            said.append(text)
    return said


def audit_scope_note(audit: Mapping[str, Any] | None, deliverables: int) -> str | None:
    """The note that a goal's audit checked no deliverable of the user's; None when the goal
    has deliverables or no audit ran.

    Args:
        audit: the latest audit, ``{passed, checks: [{kind, target, passed, evidence}]}``.
        deliverables: the number of the goal's frozen deliverables.

    Returns:
        e.g. ``complete was accepted without deliverables being checked: the goal has none,
        so the audit checked only that a file changed since the goal started and no tests (no
        test command was detected). Declare deliverables …``.
    """
    if audit is None or deliverables > 0:
        return None
    checked = _checked(audit.get("checks") or []) or ["nothing"]
    listed = ", ".join(checked[:-1]) + (" and " if len(checked) > 1 else "") + checked[-1]
    lead = (
        "complete was accepted without deliverables being checked"
        if audit.get("passed")
        else "the audit checked no deliverables"
    )
    return f"{lead}: the goal has none, so the audit checked only {listed}. {ADD_DELIVERABLES}"
