"""relay against a real model (issue 14): Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) served on the CPU
by llama.cpp's OpenAI-compatible server (``xllamacpp``), through ``--model openai:NAME
--base-url http://127.0.0.1:PORT/v1``, on a small goal.

Bounded to a few minutes in all: 2 rounds of at most 8 steps a run, an output cap of 384
tokens a call (relay's ``--max-output-tokens``; the server's ``-n`` alone does not hold, relay
sends its own cap) and a small context. The model is not asked to succeed (a 0.5B model often does not):
the tests assert the round trip a user relies on and a clean end with the right reason.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import git, load_json, read_transcript

from real_model.checks import (
    assert_calls_answered,
    assert_clean_end,
    assert_rounds_match,
    assert_status_agrees,
    assert_usage_matches,
)
from real_model.harness import model_args, need, relay_cli, relay_env
from real_model.model_server import RunningServer

GOAL = (
    "Write the file hello.txt with the content: hello. Use write_file, then call update_goal "
    "with status complete."
)
CONFIG: dict[str, Any] = {
    "deliverables": [{"file": "hello.txt", "contains": "hello"}],
    "limits": {
        "max_rounds_total": 2,
        "max_no_progress": 2,
        "max_steps_per_round": 8,
        "api_retries": 1,
        "api_backoff_s": 1.0,
    },
}


def run_goal(server: RunningServer, repo: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    """``relay run GOAL --json`` against ``server``: exit code, JSON object, stderr."""
    run = relay_cli(["run", GOAL, "--repo", repo, *model_args(server), "--json", *extra])
    assert "Traceback" not in run.err, run.err[-4000:]
    assert run.out.strip(), f"exit {run.code}, nothing on stdout; stderr:\n{run.err[-3000:]}"
    print(f"relay run {' '.join(extra)}: exit {run.code} in {run.seconds:.1f} s")
    return run.code, load_json(run.out), run.err


def status_json(repo: Path) -> dict[str, Any]:
    run = relay_cli(["status", "--repo", repo, "--json"], timeout=60)
    assert run.code == 0 and "Traceback" not in run.err, run.err
    return load_json(run.out)


def test_a_small_goal_with_forced_tool_choice_makes_the_whole_round_trip(llama_server, make_repo):
    server = need(llama_server)
    repo = make_repo(config=CONFIG)
    code, result, err = run_goal(server, repo, "--force-tool-choice", "--unattended")
    assert_clean_end(result, code, repo)
    rows = read_transcript(repo)
    assert_calls_answered(rows)
    assert {r["request"]["tool_choice"] for r in rows if r["request"]["tools"]} == {"required"}
    assert_usage_matches(rows, result)
    assert max(r["response"]["usage"]["output"] for r in rows) <= server.settings.n_predict
    assert_rounds_match(rows, result, repo)
    assert_status_agrees(status_json(repo), result)
    assert f"{result['tokens']['counted']:,} counted" in err  # the summary shows the same figure
    assert git(repo, "status", "--porcelain").strip() == ""


def test_a_server_without_jinja_ends_the_run_as_failed_with_its_answer(
    llama_server_without_jinja, make_repo
):
    """llama.cpp without ``--jinja`` answers a request with tools HTTP 500 "tools param
    requires --jinja flag": relay retries it as a server error, then stops the goal as
    ``failed`` (exit 7) with the server's words, and the state is committed."""
    server = need(llama_server_without_jinja)
    repo = make_repo(config=CONFIG)
    code, result, err = run_goal(server, repo)
    assert (code, result["status"]) == (7, "failed"), result["message"]
    assert "--jinja" in result["message"] or "--jinja" in err, result["message"]
    rows = read_transcript(repo)
    assert len(rows) == 2 and all("error" in r for r in rows), rows  # the call, one retry
    assert result["tokens"]["counted"] == 0
    assert_status_agrees(status_json(repo), result)
    assert git(repo, "status", "--porcelain").strip() == ""


def test_tool_calls_written_as_text_warn_the_user(llama_server, make_repo):
    """Without forcing, this model writes its tool calls as a fenced JSON block that llama.cpp's
    parser (``<tool_call>`` tags) does not take: after 2 rounds relay warns once, naming
    ``--force-tool-choice``, on stderr, in the JSON events and in ``relay status``; and the
    model is told in its next step that it called no tool."""
    server = need(llama_server)
    repo = make_repo(config=CONFIG)
    code, result, err = run_goal(server, repo)
    assert code in (0, 4), result["message"]
    warnings = [
        e
        for e in result["events"]
        if e["kind"] == "warning" and "--force-tool-choice" in e["detail"]
    ]
    assert len(warnings) == 1, result["events"]  # once per goal
    assert result["text_tool_calls"]["warning"] == warnings[0]["detail"]
    assert "--force-tool-choice" in err
    shown = status_json(repo)
    assert any("--force-tool-choice" in e["detail"] for e in shown["events"]), shown["events"]
    told = [  # a user message after the model's answer in the same round: the next step's hint
        m["content"]
        for r in read_transcript(repo)
        for m in r["request"]["messages"][1:]
        if m["role"] == "user" and "tool" in (m["content"] or "").lower()
    ]
    assert told, "the model is told in its next step that its answer called no tool"


def _wait_for_a_model_call(server: RunningServer, proc: subprocess.Popen[str]) -> None:
    """Return once the server is generating for ``proc`` (its ``/slots`` say so)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:  # a busy server on a loaded machine may answer late: ask again
            with urllib.request.urlopen(f"{server.url}/slots", timeout=15) as answer:
                if any(slot.get("is_processing") for slot in json.load(answer)):
                    return
        except (TimeoutError, OSError):
            pass
        time.sleep(0.05)
    pytest.fail(f"no model call was seen in flight (relay exit {proc.poll()})")


def test_ctrl_c_during_a_model_call_exits_at_once_with_the_json_and_a_resumable_goal(
    llama_server, make_repo
):
    server = need(llama_server)
    repo = make_repo(config=CONFIG)
    argv = [sys.executable, "-m", "relay.cli", "run", GOAL, "--repo", str(repo)]
    argv += [*model_args(server), "--force-tool-choice", "--json"]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=relay_env(),
    )
    try:
        _wait_for_a_model_call(server, proc)
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert took < 5, f"relay took {took:.1f} s to stop after Ctrl+C"
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == 130, err[-3000:]
    result = load_json(out)
    assert (result["status"], result["reason"]) == ("paused", "user")
    assert git(repo, "status", "--porcelain").strip() == "", "the .relay files are committed"
    shown = status_json(repo)
    assert shown["status"] == "paused" and shown["rounds"] == result["rounds"]
