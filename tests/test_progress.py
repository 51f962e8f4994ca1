"""The progress file (SPEC §6): sections, newest rounds first, the last ``keep_rounds`` in full
and older ones one line each, and never longer than ``max_chars``."""

from __future__ import annotations

import re
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay.progress import OLDER_ROUNDS_SHOWN, render_progress
from relay.store import Round, Tally

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC

DELIVERABLES = [{"file": "src/pool.py"}, {"command": "pytest -q"}, {"changed": "src/**"}]


def rnd(n: int, handoff: str | None = None, **extra: Any) -> Round:
    args: dict[str, Any] = {
        "n": n,
        "ended_at": T0 + 60 * n,
        "tool_calls": n + 1,
        "files_changed": (f"src/file{n}.py",),
        "commit_sha": f"c{n:06d}",
        "handoff": handoff if handoff is not None else f"Note of round {n}\ndetail line {n}",
    }
    args.update(extra)
    return Round(**args)


def render(**kw: Any) -> str:
    args: dict[str, Any] = {
        "goal": "Add a connection pool to the client.",
        "supplements": [],
        "deliverables": DELIVERABLES,
        "audit": None,
        "rounds": [],
        "keep_rounds": 5,
        "max_chars": 12000,
    }
    args.update(kw)
    return render_progress(**args)


def section(text: str, name: str) -> str:
    """The body of ``## name`` up to the next ``## `` heading."""
    m = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"no section {name!r} in:\n{text}"
    return m.group(1)


# --- sections ---------------------------------------------------------------------------


def test_sections_in_order_with_goal_id_and_status() -> None:
    text = render(goal_id="abc123def456", status="limit_reached (no_progress)")
    heads = re.findall(r"^## (.+)$", text, re.M)
    assert heads == ["Goal", "Supplements", "Deliverables", "Rounds"]
    assert "abc123def456" in text
    assert "limit_reached (no_progress)" in text
    assert "Add a connection pool to the client." in section(text, "Goal")


def test_supplements_newest_marked() -> None:
    sups = [
        {"text": "use asyncio", "source": "say", "created_at": T0},
        {"text": "document the pool", "source": "inbox", "created_at": T0 + 60},
        {"text": "keep Python 3.11", "source": "goal_file", "created_at": T0 + 120},
    ]
    body = section(render(supplements=sups), "Supplements")
    lines = [ln for ln in body.splitlines() if ln.startswith("- ")]
    assert len(lines) == 3
    assert "use asyncio" in lines[0] and "(say)" in lines[0]
    assert "document the pool" in lines[1] and "(inbox)" in lines[1]
    assert "keep Python 3.11" in lines[2] and "(goal_file)" in lines[2]
    assert "(newest)" in lines[2]
    assert "newest" not in lines[0] + lines[1]
    assert "2023-11-14 22:13 UTC" in lines[0]


def test_no_supplements_says_so() -> None:
    body = section(render(), "Supplements")
    assert body.strip() == "None."


def test_deliverables_not_audited_yet() -> None:
    body = section(render(), "Deliverables")
    lines = [ln for ln in body.splitlines() if ln.strip()]
    assert len(lines) == 3
    for line, target in zip(lines, ["src/pool.py", "pytest -q", "src/**"], strict=True):
        assert target in line
        assert "not audited yet" in line
        assert "✓" not in line and "✗" not in line


def test_no_deliverables_says_a_change_is_required() -> None:
    body = section(render(deliverables=[]), "Deliverables")
    assert "change" in body


def test_deliverables_show_the_latest_audit() -> None:
    audit = {
        "round": 4,
        "passed": False,
        "checks": [
            {"kind": "file", "target": "src/pool.py", "passed": True, "evidence": "exists"},
            {
                "kind": "command",
                "target": "pytest -q",
                "passed": False,
                "evidence": "exit code 1\nFAILED tests/test_pool.py::test_size",
            },
            {"kind": "changed", "target": "src/**", "passed": True, "evidence": "src/pool.py"},
        ],
    }
    body = section(render(audit=audit), "Deliverables")
    assert "round 4" in body and "failed" in body
    lines = [ln for ln in body.splitlines() if ln.startswith("- ")]
    assert len(lines) == 3
    assert lines[0].startswith("- ✓") and "src/pool.py" in lines[0]
    assert lines[1].startswith("- ✗") and "pytest -q" in lines[1] and "exit code 1" in lines[1]
    assert lines[2].startswith("- ✓") and "src/**" in lines[2]
    assert "not audited yet" not in body


def test_no_rounds_yet() -> None:
    body = section(render(), "Rounds")
    assert "None yet" in body


def test_rounds_newest_first_recent_in_full_older_one_line_each() -> None:
    rounds = [rnd(n) for n in (3, 1, 8, 5, 2, 7, 4, 6)]  # any order in, newest first out
    text = render(rounds=rounds, keep_rounds=3)
    body = section(text, "Rounds")
    full = re.findall(r"^### Round (\d+)", body, re.M)
    short = re.findall(r"^- Round (\d+)", body, re.M)
    assert full == ["8", "7", "6"]
    assert short == ["5", "4", "3"]
    for n in (8, 7, 6):
        block = body.split(f"### Round {n} ", 1)[1].split("### Round", 1)[0].split("Older", 1)[0]
        assert f"c{n:06d}" in block
        assert f"tool calls: {n + 1}" in block
        assert f"src/file{n}.py" in block
        assert f"Note of round {n}" in block and f"detail line {n}" in block
        assert time_of(n) in block
    for n in (5, 4, 3):
        (line,) = [ln for ln in body.splitlines() if ln.startswith(f"- Round {n} ")]
        assert f"Note of round {n}" in line
        assert f"c{n:06d}" in line
        assert time_of(n) in line
        assert f"detail line {n}" not in body  # older rounds: one line only
    # earlier ones share one line, so the round message does not grow round after round
    assert "2 older rounds omitted (rounds 1–2" in body


def time_of(n: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(T0 + 60 * n))


def test_automatic_handoff_and_uncommitted_round_are_marked() -> None:
    rounds = [rnd(1), rnd(2, commit_sha=None, handoff_auto=True, handoff="ran pytest: exit 1")]
    body = section(render(rounds=rounds), "Rounds")
    newest = body.split("### Round 2", 1)[1].split("### Round 1", 1)[0]
    assert "automatic" in newest
    assert "ran pytest: exit 1" in newest
    assert "commit" not in newest
    older = body.split("### Round 1", 1)[1]
    assert "automatic" not in older


def test_many_files_changed_are_summarised() -> None:
    files = tuple(f"src/m{i}.py" for i in range(30))
    body = section(render(rounds=[rnd(1, files_changed=files)]), "Rounds")
    assert "src/m0.py" in body
    assert "src/m29.py" not in body
    assert "18 more" in body


def test_final_summary_of_a_budget_limited_goal() -> None:
    text = render(wrap_up="Pool done; tests for timeouts remain.", rounds=[rnd(1)])
    assert "Pool done; tests for timeouts remain." in section(text, "Final summary")


def test_a_huge_handoff_is_clipped_with_a_marker() -> None:
    note = "x" * 50_000
    text = render(rounds=[rnd(1, handoff=note)], max_chars=12000)
    assert len(text) <= 12000
    assert "characters cut" in text
    assert "x" * 200 in text


def test_hundreds_of_rounds_stay_bounded_and_keep_the_newest() -> None:
    rounds = [rnd(n) for n in range(1, 301)]
    text = render(rounds=rounds, max_chars=12000)
    assert len(text) <= 12000
    assert "### Round 300 " in text
    assert "Note of round 300" in text
    assert "older rounds omitted" in text or "progress file cut" in text


# --- bounded, whatever goes in ----------------------------------------------------------

notes = st.one_of(
    st.text(max_size=200),
    st.builds(lambda s, k: s * k, st.text(min_size=1, max_size=40), st.integers(1, 5000)),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    goal=st.one_of(
        st.text(max_size=300), st.builds(lambda s: s * 2000, st.text(min_size=1, max_size=20))
    ),
    n_rounds=st.integers(0, 300),
    handoffs=st.lists(notes, min_size=1, max_size=6),
    newest_note=st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=150
    ),
    keep_rounds=st.integers(1, 10),
    max_chars=st.integers(2000, 20000),
)
def test_progress_is_bounded_for_any_input(
    goal: str,
    n_rounds: int,
    handoffs: list[str],
    newest_note: str,
    keep_rounds: int,
    max_chars: int,
) -> None:
    rounds = [
        rnd(n, handoff=newest_note if n == n_rounds else handoffs[n % len(handoffs)])
        for n in range(1, n_rounds + 1)
    ]
    text = render(goal=goal, rounds=rounds, keep_rounds=keep_rounds, max_chars=max_chars)
    assert len(text) <= max_chars
    assert "## Goal" in text
    if n_rounds:
        # a short note of the newest round always fits, so it is always there
        assert f"### Round {n_rounds} " in text
        assert newest_note in text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_rounds=st.integers(0, 120),
    handoffs=st.lists(notes, min_size=1, max_size=4),
    keep_rounds=st.integers(1, 8),
    max_chars=st.integers(2000, 14000),
)
def test_the_newest_rounds_and_a_tally_render_like_every_round(
    n_rounds: int, handoffs: list[str], keep_rounds: int, max_chars: int
) -> None:
    """What the loop and a fresh clone pass (the rounds shown, the older ones summed up) gives
    the same file as passing every round: the cost of a round does not grow with their number."""
    rounds = [rnd(n, handoff=handoffs[n % len(handoffs)]) for n in range(1, n_rounds + 1)]
    cut = max(0, n_rounds - keep_rounds - OLDER_ROUNDS_SHOWN)
    earlier = Tally()
    for r in rounds[:cut]:
        earlier = earlier + Tally(1, r.n, r.n, r.tool_calls)
    every = render(rounds=rounds, keep_rounds=keep_rounds, max_chars=max_chars)
    shown = render(
        rounds=rounds[cut:], earlier=earlier, keep_rounds=keep_rounds, max_chars=max_chars
    )
    assert shown == every
