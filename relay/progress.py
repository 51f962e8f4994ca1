"""The progress file: the handoff between rounds (SPEC §6).

Rendering is pure: :func:`render_progress` takes the goal's facts and returns Markdown bounded
by ``max_chars``. :func:`shown_rounds` reads the rounds it shows from the store — the newest
few and a tally of the others, so that the cost of a round does not grow with their number.
The loop writes the file, keeps its own copy in the store, and restores it when it was changed
behind the orchestrator's back.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from relay.store.records import Round, Tally
from relay.text import counted, first_line

if TYPE_CHECKING:
    from relay.store import Store

OLDER_ROUNDS_SHOWN = 3
"""Rounds before the full ones that keep a line each; earlier ones share one line, so that the
round message stays the same size from round to round (issue 7: round 50 / round 5 ≤ 1.1)."""

SUPPLEMENTS_SHOWN = 10
"""Newest supplements shown in the progress file (all of them stay in the store)."""

HEADER = "# Goal progress\n\n_Maintained by goal-relay; do not edit (changes are restored)._\n"


def shown_rounds(
    store: Store, goal_id: str, keep_rounds: int, closing: dict[str, Any] | None = None
) -> tuple[list[Round], Tally]:
    """The finished rounds the progress file can show, oldest first — the newest
    ``keep_rounds`` + :data:`OLDER_ROUNDS_SHOWN` of them — and the tally of the finished
    rounds before them. ``closing``: the fields of the closing round's record not stored yet
    (with its ``n``), laid over its stored record. A few queries that read no older round's
    row."""
    want = keep_rounds + OLDER_ROUNDS_SHOWN
    rounds = store.rounds(goal_id, last=want, finished=True)
    if closing is not None:
        newest = store.last_round(goal_id)
        rounds = [r for r in rounds if r.n != closing["n"]]
        if newest is not None and newest.n == closing["n"]:
            rounds.append(replace(newest, **closing))
        rounds = [r for r in rounds if r.finished][-want:]
    return rounds, store.round_tally(goal_id, before=rounds[0].n if rounds else None)


def _stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 40)].rstrip() + f"\n[… {len(text) - limit + 40} characters cut]"


def _files(files: tuple[str, ...], limit: int = 12) -> str:
    if not files:
        return "none"
    shown = ", ".join(files[:limit])
    return shown + (f" and {len(files) - limit} more" if len(files) > limit else "")


def _short_sha(r: Round) -> str | None:
    """The round's commit, shortened; None for the round whose commit this file is part of."""
    return r.commit_sha[:7] if r.commit_sha else None


def _full_round(r: Round, note_limit: int) -> str:
    commit = f" · commit {_short_sha(r)}" if r.commit_sha else ""
    kind = " (automatic)" if r.handoff_auto else ""
    return (
        f"### Round {r.n} · {_stamp(r.ended_at or 0.0)}{commit}\n"
        f"- tool calls: {r.tool_calls}\n"
        f"- files changed: {_files(r.files_changed)}\n"
        f"- handoff{kind}:\n\n{_indent(_clip((r.handoff or '').strip() or '(none)', note_limit))}\n"
    )


def _indent(text: str) -> str:
    return "\n".join("  " + ln if ln else "" for ln in text.splitlines())


def _short_round(r: Round) -> str:
    commit = f", commit {_short_sha(r)}" if r.commit_sha else ""
    return (
        f"- Round {r.n} · {_stamp(r.ended_at or 0.0)} · {counted(r.tool_calls, 'tool call')}, "
        f"{counted(len(r.files_changed), 'file')}{commit}: {first_line(r.handoff, 100)}"
    )


def _deliverable_lines(audit: dict[str, Any] | None, deliverables: list[dict[str, Any]]) -> str:
    if audit is not None:
        lines = []
        for check in audit["checks"]:
            mark = "✓" if check["passed"] else "✗"
            lines.append(
                f"- {mark} {check['kind']} {check['target']}: {first_line(check['evidence'], 100)}"
            )
        head = f"Latest audit (round {audit.get('round')}): {'passed' if audit['passed'] else 'failed'}"
        return head + "\n" + "\n".join(lines)
    if not deliverables:
        return "None declared: the audit requires a change since the goal started."
    lines = []
    for d in deliverables:
        kind = next(k for k in ("file", "command", "changed") if d.get(k))
        lines.append(f"- · {kind} {d[kind]}: not audited yet")
    return "\n".join(lines)


def render_progress(
    *,
    goal: str,
    supplements: list[dict[str, Any]],
    deliverables: list[dict[str, Any]],
    audit: dict[str, Any] | None,
    rounds: list[Round],
    keep_rounds: int,
    max_chars: int,
    wrap_up: str | None = None,
    status: str = "active",
    goal_id: str = "",
    earlier: Tally | None = None,
) -> str:
    """Render the progress file (SPEC §6), at most ``max_chars`` characters.

    Args:
        goal: the goal text.
        supplements: ``[{text, source, created_at}]`` oldest first.
        deliverables: the frozen deliverables (as dicts) for the "not audited yet" lines.
        audit: the latest audit ``{round, passed, checks}`` or None.
        rounds: finished rounds in any order; shown newest first, the last ``keep_rounds``
            in full and older ones one line each (rounds without a handoff note are left out).
        keep_rounds: rounds kept in full.
        max_chars: upper bound of the result; notes, then old rounds, then the goal text are
            shortened to fit.
        wrap_up: the final summary of a budget-limited goal, if any.
        status: the goal's status line (e.g. ``active`` or ``limit_reached (no_progress)``).
        goal_id: the goal's id, so that a later run on the branch can find its goal.
        earlier: the tally of rounds older than every one in ``rounds`` (not passed one by
            one: :func:`shown_rounds`); they join the folded line of old rounds.
    """
    ordered = sorted((r for r in rounds if r.handoff is not None), key=lambda r: r.n, reverse=True)
    note_limit = 1500
    goal_limit = max_chars // 3
    keep = keep_rounds
    while True:
        text = _render(
            goal,
            supplements,
            deliverables,
            audit,
            (ordered, earlier or Tally()),
            keep,
            note_limit,
            goal_limit,
            wrap_up,
        )
        text = text.replace(HEADER, HEADER + f"\nGoal id: {goal_id or '-'} · status: {status}\n", 1)
        if len(text) <= max_chars:
            return text
        if note_limit > 300:
            note_limit //= 2
        elif keep > 1:
            keep -= 1
        elif goal_limit > 500:
            goal_limit //= 2
        else:
            return text[: max_chars - 30] + "\n[… progress file cut]\n"


def _render(
    goal: str,
    supplements: list[dict[str, Any]],
    deliverables: list[dict[str, Any]],
    audit: dict[str, Any] | None,
    rounds: tuple[list[Round], Tally],
    keep: int,
    note_limit: int,
    goal_limit: int,
    wrap_up: str | None,
) -> str:
    """The file's text with ``rounds`` (newest first, and the tally of rounds older than
    all of them) shown ``keep`` in full and the rest one line each or folded."""
    ordered, earlier = rounds
    parts = [HEADER, "## Goal\n", _clip(goal.strip(), goal_limit), ""]
    parts.append("## Supplements\n")
    if supplements:
        shown = supplements[-SUPPLEMENTS_SHOWN:]
        if len(supplements) > len(shown):
            parts.append(f"- … {len(supplements) - len(shown)} older supplements in the store")
        for i, s in enumerate(shown):
            newest = " (newest)" if i == len(shown) - 1 else ""
            parts.append(
                f"- {_stamp(s['created_at'])} ({s['source']}){newest}: "
                f"{_clip(s['text'].strip(), note_limit)}"
            )
    else:
        parts.append("None.")
    parts += ["", "## Deliverables\n", _deliverable_lines(audit, deliverables), ""]
    if wrap_up:
        parts += ["## Final summary\n", _clip(wrap_up.strip(), note_limit * 2), ""]
    parts.append("## Rounds\n")
    if not ordered:
        parts.append("None yet.")
    full, short = ordered[:keep], ordered[keep:]
    parts += [_full_round(r, note_limit) for r in full]
    shown, folded = short[:OLDER_ROUNDS_SHOWN], short[OLDER_ROUNDS_SHOWN:]
    tally = earlier
    for r in folded:
        tally = tally + Tally(1, r.n, r.n, r.tool_calls)
    if shown or tally.count:
        lines = [_short_round(r) for r in shown]
        if tally.count:
            lines.append(
                f"- … {tally.count} older rounds omitted (rounds {tally.first}–{tally.last}, "
                f"{counted(tally.tool_calls, 'tool call')}); their notes are in the git log"
            )
        parts.append("Older rounds:\n")
        parts += lines
    return "\n".join(parts).rstrip() + "\n"
