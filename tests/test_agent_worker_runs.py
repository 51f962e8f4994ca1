"""``relay run --worker claude-code|codex`` (SPEC §15): the real agent CLIs as the round's
worker, relay their API gateway serving a scripted model, relay's supervisor, audit and guard
deciding. Skips without the agents on a developer machine; fails with ``CI=true``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import AGENTS_DIR, agent_binary
from conftest import call, complete, read_transcript, respond, state_dir

from relay.data import data_dir

WORKERS = ["claude-code", "codex"]


@pytest.fixture()
def agents_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agents' executables and this Python (``python`` in the goal's commands) on PATH."""
    for worker in WORKERS:
        agent_binary(worker)  # skips, or fails in CI
    bins = [str(AGENTS_DIR / "node_modules" / ".bin"), str(Path(sys.executable).parent)]
    monkeypatch.setenv("PATH", ":".join([*bins, "/usr/local/bin", "/usr/bin", "/bin"]))


def _fizzbuzz_repo(tmp_path: Path) -> tuple[Path, Path]:
    """The shipped fizzbuzz example in a fresh repository; its script's path."""
    src = data_dir("examples") / "fizzbuzz"
    repo = tmp_path / "repo"
    shutil.copytree(src / "repo", repo)
    shutil.copy(src / "goal.md", repo / "GOAL.md")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *cmd],
            cwd=repo,
            check=True,
        )
    return repo, src / "script.yaml"


def _agent_events(repo: Path, round_n: int) -> list[dict[str, Any]]:
    """The agent's JSON events of round ``round_n`` (the latest run), as relay kept them."""
    runs = sorted((state_dir(repo) / "runs").iterdir())
    text = (runs[-1] / "agent" / f"round-{round_n}" / "events.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("worker", WORKERS)
def test_the_fizzbuzz_example_completes_through_the_agent(
    tmp_path: Path, agents_on_path: None, run_relay: Any, worker: str
) -> None:
    repo, script = _fizzbuzz_repo(tmp_path)
    argv = ["run", "--repo", repo, "--goal-file", repo / "GOAL.md", "--worker", worker]
    code, out, err = run_relay([*argv, "--model", f"scripted:{script}", "--json"])
    result = json.loads(out)
    assert (code, result["status"], result["reason"]) == (0, "complete", "complete"), err
    assert result["worker"] == worker and result["rounds"] == 2
    assert result["audit"]["passed"] is True
    assert "def fizzbuzz" in (repo / "fizzbuzz.py").read_text()
    # every model call went through relay: 4 in round 1 (up to the handoff), 5 in round 2
    assert [row["round"] for row in read_transcript(repo)] == [1] * 4 + [2] * 5
    assert result["tokens"]["counted"] == 27_850  # the script's usage, exactly
    ended = [e["detail"].split(";")[0] for e in result["events"] if e["kind"] == "round_ended"]
    assert ended == ["handoff", "complete"]
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    assert json.loads(out)["worker"] == worker


@pytest.mark.parametrize("worker", WORKERS)
def test_a_false_completion_claim_is_rejected_by_the_audit(
    make_repo: Any, write_script: Any, relay_run: Any, agents_on_path: None, worker: str
) -> None:
    repo = make_repo(config={"deliverables": [{"file": "done.txt"}]})
    script = write_script([complete("done.txt is written"), respond(text="I see, not yet.")])
    _, out, _ = relay_run(repo, script, "Write done.txt.", "--worker", worker, "--max-rounds", "1")
    assert out["status"] != "complete" and out["audit"]["passed"] is False, out
    decided = [e["detail"] for e in out["events"] if e["kind"] == "update_goal"]
    assert len(decided) == 1 and decided[0].startswith("complete: rejected"), decided
    assert not (repo / "done.txt").exists()
    # the agent got the audit's rejection as the error result of its MCP tool call
    results = json.dumps(_agent_events(repo, 1))
    assert "done.txt" in results and "rejected" in results


@pytest.mark.parametrize("worker", WORKERS)
def test_a_stuck_agent_is_stopped_by_the_guard(
    make_repo: Any, write_script: Any, relay_run: Any, agents_on_path: None, worker: str
) -> None:
    repo = make_repo(config={"deliverables": [{"file": "t.txt"}]})
    same = respond(call("shell", command="echo still stuck"))
    script = write_script([{"repeat": 100, "response": same}, complete()])
    code, out, _ = relay_run(repo, script, "Create t.txt.", "--worker", worker)
    assert (code, out["status"], out["reason"]) == (6, "terminated", "guard"), out
    assert out["rounds"] == 1
    assert out["diagnosis"].startswith("Terminated: loop (round 1).")
    loops = [e["detail"] for e in out["events"] if e["kind"] == "loop"]
    assert loops[:3] == [
        f"shell called {n} times in a row with the same result" for n in (5, 10, 15)
    ]
    # the guard saw the 15th call from the agent's events; the agent's next request (at most
    # one more model call, when it came before that event was read) got relay's end of turn
    assert 15 <= len(read_transcript(repo)) <= 16
