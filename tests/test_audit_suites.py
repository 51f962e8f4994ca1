"""The false-claim and honest suites of the completion audit (SPEC §9), through the real CLI.

Every case of ``tests/audit_suites/false`` must have its first ``complete`` claim rejected by
the audit (for the reason the case names), and every case of ``tests/audit_suites/honest``
its first claim accepted. ``bench/audit.py`` runs the same cases and prints the rates.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from audit_suites.runner import load_cases, run_case
from sandbox_support import require_bwrap

FALSE = load_cases("false")
HONEST = load_cases("honest")


def test_the_suites_are_big_enough() -> None:
    assert len(FALSE) >= 36
    assert len(HONEST) >= 22
    assert all(c.expect == "rejected" for c in FALSE)
    assert all(c.expect == "accepted" for c in HONEST)


@pytest.mark.parametrize("case", FALSE, ids=[c.name for c in FALSE])
def test_false_claim_is_rejected(case, tmp_path: Path) -> None:
    result = run_case(case, tmp_path)  # without the sandbox: the audit's own rules
    assert result.ok, f"{case.description}\n" + "\n".join(result.problems)
    if "tamper" in case.failing:
        # each finding is a tamper guard event and a line of the progress file
        events = [e["detail"] for e in result.data["events"] if e["kind"] == "tamper"]
        assert any(d.startswith("audit: ") for d in events), result.data["events"]
        assert "- ✗ tamper " in result.progress, result.progress


@pytest.mark.parametrize("case", HONEST, ids=[c.name for c in HONEST])
def test_honest_claim_is_accepted(case, tmp_path: Path) -> None:
    result = run_case(case, tmp_path)
    assert result.ok, f"{case.description}\n" + "\n".join(result.problems)
    assert result.status == "complete" and result.exit_code == 0


ONLY_THE_SCAN = [c for c in FALSE if c.failing == ("suspicious",)]


def test_some_false_claims_are_caught_by_the_suspicious_code_scan_alone() -> None:
    assert len(ONLY_THE_SCAN) >= 3


@pytest.mark.parametrize("case", ONLY_THE_SCAN, ids=[c.name for c in ONLY_THE_SCAN])
def test_warn_mode_accepts_suspicious_code_with_a_warning(case, tmp_path: Path) -> None:
    """``audit.suspicious: warn``: a claim that only the scan of the changed code rejects is
    accepted, its findings a passing ``suspicious`` check that warns (in the JSON) and a
    ``warning`` event (issue 27)."""
    config = {**case.config, "audit": {"suspicious": "warn"}}
    result = run_case(dataclasses.replace(case, config=config, expect="accepted"), tmp_path)
    assert result.ok, f"{case.description}\n" + "\n".join(result.problems)
    assert result.status == "complete" and result.exit_code == 0
    checks = [c for c in result.data["audit"]["checks"] if c["kind"] == "suspicious"]
    assert len(checks) == 1 and checks[0]["passed"], result.data["audit"]
    assert checks[0]["evidence"].startswith("warning: ")
    assert case.mentions[0] in checks[0]["evidence"]
    warnings = [e["detail"] for e in result.data["events"] if e["kind"] == "warning"]
    assert any("suspicious construct" in w for w in warnings), result.data["events"]


@pytest.mark.parametrize(
    "case", FALSE + HONEST, ids=[f"{c.suite}/{c.name}" for c in FALSE + HONEST]
)
def test_the_default_configuration_with_its_sandbox(case, tmp_path: Path) -> None:
    """Every false claim is still rejected, and every honest one accepted, inside the sandbox
    that the default ``sandbox.mode: auto`` picks."""
    require_bwrap()
    result = run_case(case, tmp_path, sandbox="auto")
    assert result.ok, f"{case.description}\n" + "\n".join(result.problems)
