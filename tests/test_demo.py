"""The README's main job: `relay demo` runs the shipped fizzbuzz example offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RELAY = [sys.executable, "-m", "relay.cli"]


def test_demo_completes_the_fizzbuzz_goal_with_a_real_audit(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*RELAY, "demo", "--dir", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "complete"
    assert out["rounds"] == 2
    assert out["audit"]["passed"] is True
    checks = {(c["kind"], c["target"]): c for c in out["audit"]["checks"]}
    pytest_check = checks[("command", "python -m pytest -q")]
    assert pytest_check["passed"] and "2 passed" in pytest_check["evidence"]
    base = checks[("tamper", "base tests (python -m pytest -q)")]
    assert base["evidence"].endswith("had no tests to compare with this run"), base  # not "0 tests"
    repo = Path(out["run_dir"]).parents[3]
    assert "FizzBuzz" in (repo / "fizzbuzz.py").read_text()
    subjects = subprocess.run(
        ["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert subjects[0].startswith("relay: round 2: complete")
    assert subjects[1].startswith("relay: round 1: Wrote test_fizzbuzz.py")
    # The round-2 context was fresh: it saw round 1's handoff, not its private text.
    transcript = (Path(out["run_dir"]) / "transcript.jsonl").read_text().splitlines()
    round2 = next(json.loads(line) for line in transcript if json.loads(line)["round"] == 2)
    request = json.dumps(round2["request"])
    assert "Next: write fizzbuzz.py" in request
    assert "I will write the test first" not in request
