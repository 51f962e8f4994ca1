"""What a user relies on after a relay run against a real model (issue 14), as assertions.

A real model is not deterministic across machines and versions: these checks do not demand
``complete``. They demand a clean end — one of the statuses a goal may end with here, with its
exit code and its reason — and that what relay reports agrees with itself: the ``--json`` object,
the transcript, the events, ``relay status --json`` and the git branch.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import git

CLEAN_ENDS = {
    "complete": 0,
    "needs_user_input": 2,
    "blocked": 3,
    "limit_reached": 4,
    "terminated": 6,
}
"""Status → exit code of the ends a small goal may have under round limits (SPEC §12). Not
``failed`` (an API error), ``paused`` or ``budget_limited`` (no budget is set)."""
LIMIT_REASONS = {"total_rounds": "rounds in total", "no_progress": "no step was taken"}
"""``limit_reached`` reason → words its message must hold."""
_ROUND_ENDED = re.compile(r"(\d+) steps?, (\d+) tool calls?")


def assert_clean_end(result: dict[str, Any], code: int, repo: Path) -> None:
    """The goal ended with a status of :data:`CLEAN_ENDS`, the matching exit code and the
    evidence of that status (a passed audit and the file on the branch, a limit's message, a
    diagnosis, a question)."""
    status = result["status"]
    assert status in CLEAN_ENDS, f"unexpected end {status}: {result['message']}"
    assert code == CLEAN_ENDS[status], (code, status)
    if status == "complete":
        assert result["audit"]["passed"] is True
        assert "hello" in git(repo, "show", f"{result['branch']}:hello.txt")
    elif status == "limit_reached":
        assert result["reason"] in LIMIT_REASONS, result["reason"]
        assert LIMIT_REASONS[result["reason"]] in result["message"], result["message"]
    elif status == "terminated":
        assert result["diagnosis"], "a guard stop names its diagnosis"
    elif status == "needs_user_input":
        assert result["question"], "the question is stored"


def assert_calls_answered(rows: list[dict[str, Any]]) -> None:
    """Every model call got an answer (no API error); every tool call of a step that was not
    its round's last was executed: its result, with its id, is in the round's next request."""
    errors = [r["error"] for r in rows if "error" in r]
    assert errors == [], errors
    calls = sum(len(r["response"]["tool_calls"]) for r in rows)
    assert calls > 0, "the model made no tool call at all"
    for row, after in itertools.pairwise(rows):
        if after["round"] != row["round"]:
            continue
        results = {m["tool_call_id"] for m in after["request"]["messages"] if m["role"] == "tool"}
        made = {c["id"] for c in row["response"]["tool_calls"]}
        assert made <= results, f"round {row['round']} step {row['step']}: {made - results}"


def assert_usage_matches(rows: list[dict[str, Any]], result: dict[str, Any]) -> None:
    """The goal's token figures are the sum of the calls' usage in the transcript, and the
    counted figure is uncached input + cache writes + output."""
    total: Counter[str] = Counter()
    for row in rows:
        total.update(row["response"]["usage"])
    tokens = result["tokens"]
    for key in ("uncached_input", "cache_write", "cached_input", "output"):
        assert tokens[key] == total[key], (key, tokens[key], total[key])
    assert tokens["uncached_input"] > 0 and tokens["output"] > 0, tokens
    assert tokens["counted"] == tokens["uncached_input"] + tokens["cache_write"] + tokens["output"]


def assert_rounds_match(rows: list[dict[str, Any]], result: dict[str, Any], repo: Path) -> None:
    """The rounds of the JSON are those of the transcript, of the ``round_ended`` events
    (their step and tool-call counts too) and of the round commits on the goal's branch."""
    rounds = result["rounds"]
    assert sorted({r["round"] for r in rows}) == list(range(1, rounds + 1))
    ended = {e["round"]: e["detail"] for e in result["events"] if e["kind"] == "round_ended"}
    assert sorted(ended) == list(range(1, rounds + 1)), ended
    for n, detail in ended.items():
        found = _ROUND_ENDED.search(detail)
        assert found, detail
        in_round = [r for r in rows if r["round"] == n]
        calls = sum(len(r["response"]["tool_calls"]) for r in in_round)
        assert (int(found[1]), int(found[2])) == (len(in_round), calls), (n, detail)
    assert [c["round"] for c in result["commits"]] == list(range(1, rounds + 1))
    subjects = git(repo, "log", "--format=%s", result["branch"]).splitlines()
    assert sum(s.startswith("relay: round ") for s in subjects) == rounds, subjects


def assert_status_agrees(status: dict[str, Any], result: dict[str, Any]) -> None:
    """``relay status --json`` after the run says what the run's ``--json`` said."""
    for key in ("goal_id", "status", "reason", "rounds", "tokens", "commits"):
        assert status[key] == result[key], (key, status[key], result[key])
