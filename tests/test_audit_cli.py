"""``relay audit`` (SPEC §9, §12): the completion audit now, for the current goal or for
``--deliverables``/``--base``; exit 0 only when every check passes; usable in CI without a
goal, a model or a store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import call, flat, git, respond, write_files
from sandbox_support import require_bwrap

RunRelay = Callable[..., tuple[int, str, str]]

CALC = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture()
def repo(make_repo: Callable[..., Path]) -> Path:
    return make_repo({"calc.py": CALC, "tests/test_calc.py": TEST})


def audit(run_relay: RunRelay, repo: Path, *args: str | Path) -> tuple[int, str, str]:
    return run_relay(["audit", "--repo", repo, *args])


def audit_json(run_relay: RunRelay, repo: Path, *args: str | Path) -> tuple[int, dict[str, Any]]:
    code, out, err = audit(run_relay, repo, "--json", *args)
    assert out.strip(), err
    return code, json.loads(out)


def kinds(data: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(c["kind"], c["passed"]) for c in data["checks"]]


def test_without_a_goal_nothing_changed_fails(run_relay: RunRelay, repo: Path) -> None:
    code, out, _ = audit(run_relay, repo)
    assert code == 1
    assert "audit (no goal; deliverables: configuration; base: HEAD)" in out
    assert "✗ changed **" in out
    assert "✗ tests python -m pytest -q" in out
    assert "discovered: Python test files: tests/test_calc.py" in out
    assert "audit FAILED: 2 of 3 checks failed" in out
    assert not (repo / ".relay").exists()  # looking writes nothing


def test_without_a_goal_a_change_with_passing_tests_passes(run_relay: RunRelay, repo: Path) -> None:
    write_files(repo, {"calc.py": CALC + "\n\ndef sub(a, b):\n    return a - b\n"})
    code, data = audit_json(run_relay, repo)
    assert code == 0, data
    assert data["passed"] is True
    # the tamper checks, and the base commit's tests compared with the run
    assert kinds(data) == [("changed", True), ("tests", True), ("tamper", True), ("tamper", True)]
    assert "1 passed" in data["checks"][1]["evidence"]
    assert data["checks"][3]["evidence"].endswith("ran (1 test)")  # not "1 tests"
    assert (data["goal_id"], data["base"], data["stored"]) == (None, "HEAD", False)


def test_deliverables_from_a_file_as_a_list_or_a_mapping(
    run_relay: RunRelay, repo: Path, tmp_path: Path
) -> None:
    listing = tmp_path / "d.yaml"
    listing.write_text("- {file: calc.py, contains: 'def add'}\n- {command: 'exit 3'}\n")
    code, data = audit_json(run_relay, repo, "--deliverables", listing)
    assert code == 1
    assert kinds(data) == [("file", True), ("command", False), ("tamper", True)]
    assert "exit code 3" in data["checks"][1]["evidence"]
    mapping = tmp_path / "relay.yaml"
    mapping.write_text("model: scripted:x.yaml\ndeliverables:\n  - file: calc.py\n")
    code, out, _ = audit(run_relay, repo, f"--deliverables={mapping}")
    assert code == 0, out
    assert "✓ file calc.py" in out and "audit passed: 2 checks" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- {file: a.py, command: b}\n", "entry 1"),
        ("just text\n", "expected a list of deliverables"),
        ("other: 1\n", "no deliverables key"),
        ("- [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_deliverables_file_is_a_usage_error(
    run_relay: RunRelay, repo: Path, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    code, out, err = audit(run_relay, repo, "--deliverables", path)
    assert code == 1
    assert message in flat(err) and str(path) in flat(err)
    assert not out


def test_missing_deliverables_file_and_bad_base_are_usage_errors(
    run_relay: RunRelay, repo: Path, tmp_path: Path
) -> None:
    code, _, err = audit(run_relay, repo, "--deliverables", tmp_path / "nope.yaml")
    assert code == 1 and "cannot read it" in err
    code, _, err = audit(run_relay, repo, "--base", "no-such-ref")
    assert code == 1 and "--base 'no-such-ref' is not a commit of this repository" in err


def test_base_ref_finds_a_test_deleted_in_a_commit(run_relay: RunRelay, repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "rm", "-q", "tests/test_calc.py")
    write_files(repo, {"README.md": "changed\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "drop tests")
    code, data = audit_json(run_relay, repo, "--base", base)
    assert code == 1
    tamper = [c for c in data["checks"] if c["kind"] == "tamper"]
    assert [(c["target"], c["passed"]) for c in tamper] == [
        ("tests/test_calc.py:5", False),
        ("base tests (python -m pytest -q)", True),  # the deleted test is no longer defined
    ]
    assert "test file deleted since " + base[:7] in tamper[0]["evidence"]
    # against HEAD the deletion is history: nothing to find
    code, data = audit_json(run_relay, repo, "--base", "HEAD", "--deliverables", os.devnull)
    assert ("tamper", True) in kinds(data)


def test_the_current_goal_is_audited_with_its_deliverables_and_base(
    make_repo: Callable[..., Path], write_script: Callable[..., Path], relay_run, run_relay
) -> None:
    repo = make_repo(
        {"calc.py": CALC, "tests/test_calc.py": TEST},
        config={"deliverables": [{"file": "notes.txt"}]},
    )
    script = write_script(
        [respond(call("update_goal", status="needs_user_input", summary="?", question="Which?"))]
    )
    code, data, _ = relay_run(repo, script)
    assert code == 2
    goal_id = data["goal_id"]
    code, out, _ = audit(run_relay, repo)
    assert code == 1
    assert f"audit (goal {goal_id}; deliverables: goal {goal_id}; base: " in out
    assert "✗ file notes.txt" in out
    # the model's work in the working tree: a note, and a skipped test
    write_files(repo, {"notes.txt": "hello\n"})
    test = repo / "tests" / "test_calc.py"
    test.write_text("import pytest\n\n\n@pytest.mark.skip\n" + TEST.split("\n\n\n")[1])
    code, data = audit_json(run_relay, repo)
    assert code == 1
    assert data["goal_id"] == goal_id and data["stored"] is True
    assert (
        data["base"]
        == json.loads(run_relay(["status", "--repo", repo, "--json"])[1])["base_commit"]
    )
    assert [(c["kind"], c["target"], c["passed"]) for c in data["checks"]] == [
        ("file", "notes.txt", True),
        ("tamper", "tests/test_calc.py:4", False),
    ]
    status = json.loads(run_relay(["status", "--repo", repo, "--json"])[1])
    assert status["audit"]["passed"] is False  # stored with the goal
    assert status["audit"]["checks"] == data["checks"]
    assert any(
        e["kind"] == "audit" and "relay audit: failed" in e["detail"] for e in status["events"]
    )
    # other deliverables are not the goal's audit: not stored
    code, data = audit_json(run_relay, repo, "--deliverables", os.devnull)
    assert data["stored"] is False


def test_in_ci_as_a_process_without_goal_or_model(repo: Path) -> None:
    write_files(repo, {"calc.py": CALC.replace("a + b", "a - b")})
    relay = Path(sys.executable).parent / "relay"  # the installed console script
    proc = subprocess.run(
        [str(relay), "audit", "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["passed"] is False
    tests = next(c for c in data["checks"] if c["kind"] == "tests")
    assert "1 failed" in tests["evidence"]
    assert not (repo / ".relay").exists()


def test_run_and_audit_protect_the_same_paths(tmp_path: Path) -> None:
    """SPEC §5, §14: one set for the goal's run and for `relay audit`: relay's own files
    (the progress file and the goal state beside it), relay.yaml, the configuration and goal
    files inside the repository, and tools.protected_paths."""
    from relay.config import Config
    from relay.protected import protected_paths

    root = tmp_path.resolve()
    config = Config.model_validate(
        {"progress": {"path": "notes/progress.md"}, "tools": {"protected_paths": ["ci/*.yml"]}}
    )
    entries = protected_paths(
        root,
        config,
        files=(root / "conf" / "relay.yaml", tmp_path.parent / "outside.yaml", None),
        goal_file="GOAL.md",
    )
    assert entries == (
        "notes/progress.md",
        "notes/goal.json",
        "relay.yaml",
        "conf/relay.yaml",
        "GOAL.md",
        "ci/*.yml",
    )


def test_the_audit_cannot_change_the_committed_goal_state(
    make_repo: Callable[..., Path], write_script: Callable[..., Path], relay_run, run_relay
) -> None:
    """The project's tests that `relay audit` runs are model-written code: like the goal's
    own commands, they find relay's goal state (`.relay/goal.json`) read-only (SPEC §14)."""
    require_bwrap()
    hostile = (
        "from pathlib import Path\n\n\ndef test_rewrites_the_goal_state():\n"
        "    try:\n        Path('.relay/goal.json').write_text('{}')\n"
        "    except OSError:\n        pass\n"
    )
    repo = make_repo({"calc.py": CALC, "tests/test_calc.py": TEST})
    script = write_script(
        [respond(call("update_goal", status="needs_user_input", summary="?", question="Which?"))]
    )
    code, _, _ = relay_run(repo, script)
    assert code == 2
    state = repo / ".relay" / "goal.json"
    before = state.read_bytes()
    write_files(repo, {"tests/test_hostile.py": hostile})
    audit(run_relay, repo)
    assert state.read_bytes() == before


def test_a_goal_file_gives_its_front_matters_deliverables(
    run_relay: RunRelay, repo: Path, tmp_path: Path
) -> None:
    goal = tmp_path / "GOAL.md"
    goal.write_text("---\ndeliverables:\n  - {file: calc.py, contains: 'def add'}\n---\nAdd.\n")
    code, out, err = audit(run_relay, repo, "--deliverables", goal)
    assert code == 0, err
    assert "✓ file calc.py" in out and "expected a single document" not in err


def test_the_full_output_file_the_evidence_names_is_kept(
    run_relay: RunRelay, repo: Path, tmp_path: Path
) -> None:
    listing = tmp_path / "d.yaml"
    listing.write_text("- {command: 'seq 1 200000; exit 2'}\n")
    code, data = audit_json(run_relay, repo, "--deliverables", listing)
    assert code == 1
    evidence = data["checks"][0]["evidence"]
    assert "full output in " in evidence, evidence
    path = Path(evidence.split("full output in ", 1)[1].split()[0].rstrip(")];"))
    assert path.is_file() and path.read_text().splitlines()[-1] == "200000"
