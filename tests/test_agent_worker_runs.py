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
from relay.store import Store
from relay.workers.events import AgentEvents

WORKERS = ["claude-code", "codex"]


@pytest.fixture()
def agents_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agents' executables and this Python (``python`` in the goal's commands) on PATH."""
    for worker in WORKERS:
        agent_binary(worker)  # skips, or fails in CI
    bins = [str(AGENTS_DIR / "node_modules" / ".bin"), str(Path(sys.executable).parent)]
    monkeypatch.setenv("PATH", ":".join([*bins, "/usr/local/bin", "/usr/bin", "/bin"]))
    # an agent edits a file within the second it was imported in, at the same size: a cached
    # .pyc would hide the edit from the next pytest run
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")


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


def _script_usage(script: Path) -> dict[str, int]:
    """The usage the example's script reports, summed over its responses."""
    import yaml

    total = {"input": 0, "cached": 0, "cache_write": 0, "output": 0}
    for response in yaml.safe_load(script.read_text())["responses"]:
        for key in total:
            total[key] += response.get("usage", {}).get(key, 0)
    return total


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
    rows = read_transcript(repo)
    assert [row["round"] for row in rows] == [1] * 4 + [2] * 5
    # relay's goal tools reach the model, the agent's own (Codex's goals) do not
    offered = {tool["name"] for tool in rows[0]["request"]["tools"]}
    assert "mcp__relay__update_goal" in offered
    assert not offered & {"update_goal", "get_goal", "create_goal"}
    usage = _script_usage(script)  # the script's usage, exactly
    assert result["tokens"]["counted"] == usage["input"] + usage["cache_write"] + usage["output"]
    assert result["tokens"]["cached_input"] == usage["cached"]
    ended = [e["detail"].split(";")[0] for e in result["events"] if e["kind"] == "round_ended"]
    assert ended == ["handoff", "complete"]
    # the agent's own test runs found python and pytest (Codex's login shell would reset PATH)
    parsed = AgentEvents(worker)
    runs = [
        a.result
        for event in _agent_events(repo, 2)
        for a in parsed.feed(json.dumps(event))
        if "pytest" in str(a.arguments.get("command"))
    ]
    assert len(runs) == 2 and "1 failed, 1 passed" in runs[0] and "2 passed" in runs[1], runs
    # each step is stored with its tool results as the agent sent them back to the model
    store = Store(state_dir(repo) / "relay.db")
    try:
        steps = store.steps(result["goal_id"])
    finally:
        store.close()
    failed = [(s["round"], s["step"]) for s in steps for a in s["actions"] if a["is_error"]]
    assert failed == [(1, 3), (2, 2)]  # the two pytest runs that failed
    assert all(a["result"] for s in steps for a in s["actions"])
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


@pytest.mark.parametrize("worker", WORKERS)
def test_a_used_up_budget_makes_the_next_request_the_wrap_up(
    make_repo: Any, write_script: Any, relay_run: Any, agents_on_path: None, worker: str
) -> None:
    repo = make_repo()
    usage = {"input": 3000, "output": 10}
    steps = [respond(call("shell", command=f"echo step {n}"), usage=usage) for n in (1, 2)]
    late = call("shell", command="touch never.txt")
    wrap = respond(late, text="Summary: echoed twice.", usage={"input": 100, "output": 5})
    script = write_script([*steps, wrap, complete()])
    code, out, _ = relay_run(repo, script, "Echo.", "--worker", worker, "--token-budget", "5000")
    assert (code, out["status"], out["reason"]) == (5, "budget_limited", "token_budget"), out
    assert out["message"].endswith("Summary: echoed twice.")
    rows = read_transcript(repo)
    assert len(rows) == 3  # two steps, then the wrap-up; nothing after it
    assert rows[-1]["request"]["tools"] == [] and rows[-1]["request"]["tool_choice"] == "none"
    assert "token budget" in json.dumps(rows[-1]["request"]["messages"][-1])
    assert not (repo / "never.txt").exists()  # the wrap-up's tool call never reached the agent
    assert out["tokens"]["counted"] == 2 * 3010 + 105


@pytest.mark.parametrize("worker", WORKERS)
def test_a_quota_error_ends_the_goal_after_one_request(
    make_repo: Any, write_script: Any, relay_run: Any, agents_on_path: None, worker: str
) -> None:
    repo = make_repo()
    script = write_script([{"repeat": 5, "response": {"error": "insufficient_quota"}}])
    code, out, _ = relay_run(repo, script, "Do it.", "--worker", worker)
    assert (code, out["status"], out["reason"]) == (7, "failed", "quota"), out
    assert len(read_transcript(repo)) == 1
    assert [e["kind"] for e in out["events"]].count("api_errors") == 1


@pytest.mark.parametrize("worker", WORKERS)
def test_a_pause_stops_the_agent_and_its_command_at_once(
    make_repo: Any, write_script: Any, agents_on_path: None, tmp_path: Path, worker: str
) -> None:
    from test_user_controls import STOP_WITHIN_S, Live, gone, pgrep

    live = Live(tmp_path)
    try:
        repo = make_repo()
        slow = live.slow().split()[1]  # a unique number: Claude Code refuses a plain `sleep`
        wait = f"python3 -c 'import sys, time; time.sleep(float(sys.argv[1]))' {slow}"
        script = write_script([respond(call("shell", command=wait)), complete()])
        run = live.run(repo, script, "Do it.", "--worker", worker)
        pids = live.wait_started(run, slow)
        proc = live.relay("pause", "--repo", repo)
        assert proc.returncode == 0, proc.stderr
        exit_code, took = run.wait_timed()
        assert exit_code == 130, run.stderr
        assert took < STOP_WITHIN_S + 5.0, f"the run took {took:.2f} s to stop"  # + agent exit
        assert gone(pids), f"the agent's command survived: {pgrep(slow)}"
        assert run.json()["status"] == "paused"
        assert len(read_transcript(repo)) == 1  # no model call after the pause
    finally:
        for r in live.runs:
            if r.proc.poll() is None:
                r.proc.kill()


SECRET = "sk-ant-api03-relay-test-secret-0123456789"


@pytest.mark.parametrize("worker", WORKERS)
def test_the_agent_runs_in_the_sandbox_and_no_key_reaches_it(
    make_repo: Any, write_script: Any, run_relay: Any, agents_on_path: None, worker: str
) -> None:
    from sandbox_support import require_bwrap

    require_bwrap()
    repo = make_repo(config={"deliverables": [{"file": "seen.txt"}]})
    look = (
        "(env; cat /proc/[0-9]*/environ; cat ~/.claude*/* ~/.codex/* 2>/dev/null) "
        "| tr '\\0' '\\n' > seen.txt; ls /proc | grep -c '^[0-9]'; "
        "curl -sS -m 5 https://example.com -o /dev/null && echo NETWORK || echo no network"
    )
    script = write_script([respond(call("shell", command=look)), complete()])
    argv = ["run", "Look around.", "--repo", repo, "--model", f"scripted:{script}", "--json"]
    keys = {"ANTHROPIC_API_KEY": SECRET, "OPENAI_API_KEY": SECRET}  # relay's, never the agent's
    argv += ["--worker", worker, "--sandbox", "required"]
    code, out, err = run_relay(argv, subprocess=True, env=keys)
    result = json.loads(out)
    assert (code, result["status"], result["sandbox"]) == (0, "complete", "bwrap"), err
    seen = (repo / "seen.txt").read_text()
    assert "ANTHROPIC_BASE_URL" in seen or "RELAY_AGENT_KEY" in seen  # the agent's own
    assert SECRET not in seen
    events = json.dumps(_agent_events(repo, 1))
    assert SECRET not in events and "no network" in events
    assert SECRET not in json.dumps(read_transcript(repo))


def test_compare_runs_the_same_goal_with_each_worker(
    tmp_path: Path, agents_on_path: None, run_relay: Any
) -> None:
    from relay.store import Store

    repo, script = _fizzbuzz_repo(tmp_path)
    out_dir = tmp_path / "compare"
    argv = ["compare", "--goal-file", repo / "GOAL.md", "--repo", repo, "--out", out_dir]
    argv += ["--model", f"scripted:{script}", "--json"]
    argv += ["--worker", "builtin", "--worker", "claude-code", "--worker", "codex"]
    code, out, err = run_relay(argv)
    assert code == 0, err
    data = json.loads(out)
    assert (data["compared"], data["arms"]) == ("worker", ["builtin", "claude-code", "codex"])
    assert [r["arm"] for r in data["runs"]] == data["arms"]
    for run in data["runs"]:
        store = Store(Path(run["store_path"]))
        try:
            goal = store.goal(run["goal_id"])
        finally:
            store.close()
        assert (goal.worker, goal.mode, goal.status) == (run["arm"], "relay", "complete")
        assert run["branch"].endswith(f"-{run['arm']}") and run["audit"] == "passed"
        # the same script, the same model calls and tokens, whoever did the work
        usage = _script_usage(script)
        assert (run["model_calls"], run["uncached_input"], run["output"]) == (
            9,
            usage["input"],
            usage["output"],
        )
    assert set(data["summary"]) == {"builtin", "claude-code", "codex"}
    table = (out_dir / "compare.md").read_text()
    assert "|   | builtin | claude-code | codex |" in table and "1 per worker" in table
