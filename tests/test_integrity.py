"""The goal row's seal and the branch check (relay/integrity.py, SPEC §14), as pure policy."""

from __future__ import annotations

from dataclasses import replace

from relay.integrity import GoalSeal, branch_findings, foreign_status
from relay.store import GoalRecord


def goal(**fields: object) -> GoalRecord:
    base: dict[str, object] = dict(
        id="g1",
        text="Do it.",
        goal_file=None,
        branch="relay/x",
        base_commit="a" * 40,
        mode="relay",
        model="scripted:s.yaml",
        deliverables=[{"file": "a.txt"}],
        limits={"max_rounds_total": 5},
        status="active",
        reason=None,
        message=None,
        question=None,
        rounds=1,
        counted_rounds=1,
        no_progress_streak=0,
        blocked_reports=0,
        auto_replies=0,
        uncached_input=100,
        cache_write=0,
        cached_input=0,
        output=10,
        cost_usd=0.01,
        elapsed_s=3.0,
        progress_text=None,
        diagnosis=None,
        risk_score=30.0,
        failure_streak=0,
        model_calls=2,
        overrides={},
        goal_file_digest=None,
        created_at=1.0,
        updated_at=2.0,
    )
    base.update(fields)
    return GoalRecord(**base)  # type: ignore[arg-type]


def test_an_untouched_row_has_no_finding() -> None:
    row = goal()
    seal = GoalSeal.of(row)
    assert seal.check(row) == ({}, [])


def test_the_loops_own_writes_are_not_findings() -> None:
    row = goal()
    seal = GoalSeal.of(row)
    seal.wrote({"rounds": 2, "risk_score": 0.0, "elapsed_s": 9.0})
    seal.added_usage({"uncached_input": 50, "cache_write": 0, "cached_input": 7, "output": 5}, 0.5)
    later = replace(
        row,
        rounds=2,
        risk_score=0.0,
        uncached_input=150,
        cached_input=7,
        output=15,
        cost_usd=0.51,
        elapsed_s=9.0,
    )
    assert seal.check(later) == ({}, [])


def test_foreign_changes_are_found_and_the_seals_values_restored() -> None:
    row = goal()
    seal = GoalSeal.of(row)
    forged = replace(
        row, deliverables=[], limits={"max_rounds_total": 1000}, output=0, risk_score=0.0
    )
    restore, findings = seal.check(forged)
    assert restore == {
        "deliverables": [{"file": "a.txt"}],
        "limits": {"max_rounds_total": 5},
        "output": 10,
        "risk_score": 30.0,
    }
    assert len(findings) == 4 and all("restored" in f for f in findings)


def test_only_pause_and_clear_are_statuses_a_user_command_sets() -> None:
    assert not foreign_status("paused") and not foreign_status("cleared")
    assert not foreign_status("active")
    for status in ("complete", "blocked", "limit_reached", "needs_user_input", "terminated"):
        assert foreign_status(status)


def test_the_branch_decides_frozen_fields_and_a_forged_final_status() -> None:
    committed = {
        "id": "g1",
        "status": "limit_reached",
        "reason": "total_rounds",
        "deliverables": [{"file": "a.txt"}],
        "limits": {"max_rounds_total": 5},
        "overrides": {},
        "text": "Do it.",
        "base_commit": "a" * 40,
        "mode": "relay",
    }
    forged = goal(status="complete", deliverables=[])
    restore, findings = branch_findings(forged, committed)
    assert restore["status"] == "limit_reached" and restore["deliverables"] == [{"file": "a.txt"}]
    assert len(findings) == 2


def test_a_crash_after_the_last_commit_and_the_users_word_are_left_alone() -> None:
    committed = {"id": "g1", "status": "complete", "deliverables": [{"file": "a.txt"}]}
    for status in ("active", "paused", "cleared"):
        assert branch_findings(goal(status=status), committed) == ({}, [])
