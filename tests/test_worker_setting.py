"""The ``worker`` setting (SPEC §15): ``--worker``, ``RELAY_WORKER`` and relay.yaml, stored
with the goal and shown by ``relay status``; refused before any change when it cannot work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import call, complete, respond, tree_snapshot

WORK = [respond(call("write_file", path="a.txt", content="a\\n")), complete()]


def test_the_builtin_worker_is_stored_and_shown(
    make_repo: Any, write_script: Any, relay_run: Any, run_relay: Any
) -> None:
    repo = make_repo()
    code, out, _ = relay_run(repo, write_script(WORK))
    assert (code, out["worker"]) == (0, "builtin")
    code, text, _ = run_relay(["status", "--repo", repo])
    assert "relay mode · worker builtin" in text


def test_an_agent_that_is_not_installed_is_refused_before_any_change(
    make_repo: Any, write_script: Any, run_relay: Any, tmp_path: Path
) -> None:
    repo = make_repo()
    before = tree_snapshot(repo)
    script = write_script(WORK)
    argv = ["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}", "--worker", "codex"]
    code, _, err = run_relay(argv, subprocess=True, env={"PATH": "/usr/bin:/bin"})
    assert code == 1
    assert "worker codex needs the `codex` command on PATH" in err
    assert "npm install -g @openai/codex@" in err and "Traceback" not in err
    assert tree_snapshot(repo) == before


def test_an_agent_worker_needs_relay_mode(
    make_repo: Any, write_script: Any, run_relay: Any
) -> None:
    repo = make_repo()
    script = write_script(WORK)
    argv = ["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}"]
    code, _, err = run_relay([*argv, "--worker", "claude-code", "--mode", "session"])
    assert code == 1
    assert "worker" in err and "claude-code starts a fresh agent each round: use mode relay" in err


def test_relay_worker_in_the_environment_is_checked(
    make_repo: Any, write_script: Any, run_relay: Any
) -> None:
    repo = make_repo()
    script = write_script(WORK)
    argv = ["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}", "--json"]
    code, _, err = run_relay(argv, subprocess=True, env={"RELAY_WORKER": "cursor"})
    assert code == 1
    assert "RELAY_WORKER" in err and "cursor" in err and "claude-code" in err, err
    code, out, err = run_relay(argv, subprocess=True, env={"RELAY_WORKER": "builtin"})
    assert (code, json.loads(out)["worker"]) == (0, "builtin"), err


def test_a_resumed_goal_keeps_its_worker(
    make_repo: Any, write_script: Any, relay_run: Any, run_relay: Any
) -> None:
    repo = make_repo()
    script = write_script([respond(call("handoff", note="later")), *WORK])
    code, out, _ = relay_run(repo, script, "Do it.", "--max-rounds", "1")
    assert (out["status"], out["worker"]) == ("limit_reached", "builtin"), out
    code, _, err = run_relay(["run", "--repo", repo, "--worker", "codex"])
    assert code == 1
    assert "runs with worker builtin (stored with the goal); --worker codex cannot" in err
    code, out, _ = relay_run(repo, script, None)
    assert (code, out["status"], out["worker"]) == (0, "complete", "builtin"), out


def test_compare_needs_two_different_workers(
    make_repo: Any, write_script: Any, run_relay: Any
) -> None:
    repo = make_repo()
    argv = ["compare", "Do it.", "--repo", repo, "--model", f"scripted:{write_script(WORK)}"]
    code, _, err = run_relay([*argv, "--worker", "codex"])
    assert code == 1 and "--worker codex: give two or more different workers" in err
    code, _, err = run_relay([*argv, "--worker", "builtin", "--worker", "builtin"])
    assert code == 1 and "two or more different workers" in err
    code, _, err = run_relay([*argv, "--worker", "builtin", "--worker", "cursor"])
    assert code == 1 and "cursor" in err and "claude-code" in err
