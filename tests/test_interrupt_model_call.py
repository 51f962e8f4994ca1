"""Ctrl+C and SIGTERM during a model call in flight (issue 14, item 3; SPEC §10).

A loopback HTTP server answers the real OpenAI and Anthropic SDK clients of a ``relay run
--json`` process and holds one request for a long time (like a local model that rambles). The
signal must stop the run at once: the call is abandoned and recorded as interrupted (transcript
and store), the round is committed as for a pause between steps, ``--json`` still prints the
result object, and ``relay resume`` completes the goal with the next round number. A second
Ctrl+C during that clean-up still leaves a committed, resumable goal.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import git, read_transcript, state_dir
from test_user_controls import NOTES, STOP_WITHIN_S, Live, wait_for

from relay.store import Store

GOAL = "Create notes.txt saying hello."
OVERLOADED = {"status": 503, "error": {"message": "Overloaded", "type": "overloaded_error"}}
"""A transient error answer (retried after the backoff wait)."""
HOLD = "hold"
"""An answer of the server that holds the request until the test ends (or 60 s)."""
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def tool_answer(provider: str, name: str, arguments: dict[str, Any], n: int) -> dict[str, Any]:
    """The provider's answer with one tool call ``name(arguments)``."""
    if provider == "anthropic":
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": arguments}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }
    call = {"id": f"call_{n}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


class HoldingServer:
    """A loopback model API that answers from ``answers`` in order (a :data:`HOLD` holds the
    request); ``held`` is set when a request is being held, ``requests`` counts them."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.answers: list[Any] = []
        self.requests = 0
        self.held = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                answer = server.next_answer(self.path)
                if answer == HOLD:
                    server.held.set()
                    server.release.wait(60)
                    return  # the connection is closed without an answer
                status = answer.pop("status", 200) if isinstance(answer, dict) else 200
                body = json.dumps(answer).encode()
                with contextlib.suppress(OSError):
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return root if self.provider == "anthropic" else root + "/v1"

    def next_answer(self, path: str) -> Any:
        with self.lock:
            self.requests += 1
            assert path == PATHS[self.provider], path
            if not self.answers:
                return {"error": {"message": "no answer left", "type": "server_error"}}
            return self.answers.pop(0)

    def tools(self, *calls: tuple[str, dict[str, Any]]) -> None:
        """Answer the next requests with these tool calls, one per request."""
        for name, arguments in calls:
            self.answers.append(tool_answer(self.provider, name, arguments, len(self.answers)))

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(params=["openai", "anthropic"])
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    srv = HoldingServer(request.param)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture()
def live(tmp_path: Path) -> Iterator[Live]:
    lv = Live(tmp_path)
    try:
        yield lv
    finally:
        lv.cleanup()


WRITE = ("write_file", {"path": "notes.txt", "content": "hello\n"})
COMPLETE = ("update_goal", {"status": "complete", "summary": "notes.txt says hello"})


def start_held(make_repo: Any, live: Live, server: HoldingServer) -> tuple[Path, Any]:
    """A run whose first step writes notes.txt and whose second model call is held."""
    repo = make_repo(config=NOTES)
    server.tools(WRITE)
    server.answers.append(HOLD)
    model = f"{server.provider}:m"
    url = server.base_url
    run = live.start("run", GOAL, "--repo", repo, "--model", model, "--base-url", url, "--json")
    assert server.held.wait(30), f"the model call was never held:\n{run.stderr[-3000:]}"
    time.sleep(0.2)  # the call is in flight inside the SDK's HTTP read
    assert run.proc.poll() is None, run.stderr
    return repo, run


def signal_run(run: Any, sig: int) -> None:
    if sig == signal.SIGINT:
        os.killpg(run.pid, sig)  # Ctrl+C in a terminal signals the foreground process group
    else:
        os.kill(run.pid, sig)  # a CI runner's `kill PID`


def assert_committed(repo: Path) -> None:
    """A clean tree whose HEAD holds the round's work and relay's own files."""
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    tracked = git(repo, "ls-files", ".relay").split()
    assert ".relay/progress.md" in tracked and ".relay/goal.json" in tracked, tracked


def resume_to_completion(repo: Path, live: Live, server: HoldingServer) -> dict[str, Any]:
    """``relay resume --json`` with a server that now answers ``complete``."""
    server.tools(COMPLETE)
    resumed = live.start("resume", "--repo", repo, "--json")
    code = resumed.wait(60)
    assert code == 0, resumed.stderr[-3000:]
    data = resumed.json()
    assert data["status"] == "complete", data
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    return data


@pytest.mark.parametrize(
    ("sig", "code", "how"),
    [(signal.SIGINT, 130, "Ctrl+C"), (signal.SIGTERM, 143, "SIGTERM")],
    ids=["sigint", "sigterm"],
)
def test_a_signal_interrupts_the_model_call_in_flight(
    make_repo, live, server, sig, code, how
) -> None:
    repo, run = start_held(make_repo, live, server)
    signal_run(run, sig)
    try:
        exit_code, took = run.wait_timed(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run did not stop within 10 s of {how} during a model call")
    assert exit_code == code, run.stderr[-3000:]
    assert took < STOP_WITHIN_S, f"the run took {took:.2f} s to stop"
    data = run.json()
    assert data["status"] == "paused" and data["reason"] == "user", data
    assert how in data["message"] and "relay resume" in data["message"], data["message"]
    assert data["rounds"] == 1, data
    assert_committed(repo)

    calls = read_transcript(repo)
    assert len(calls) == 2, calls
    assert "response" in calls[0]
    last = calls[1]
    assert "response" not in last, last
    assert last["error"]["kind"] == "interrupted", last
    assert how in last["error"]["message"] and "usage" in last["error"]["message"], last
    events = [e for e in data["events"] if e["kind"] == "interrupted"]
    assert events and "model call" in events[0]["detail"], data["events"]
    store = Store(state_dir(repo) / "relay.db")
    goal = store.latest_goal()
    assert goal is not None and goal.status == "paused" and goal.rounds == 1
    (only,) = store.rounds(goal.id)
    assert only.commit_sha == git(repo, "rev-parse", "HEAD").strip()

    done = resume_to_completion(repo, live, server)
    assert done["rounds"] == 2, done
    assert [c["round"] for c in done["commits"]] == [1, 2], done["commits"]
    assert server.requests == 3


@pytest.mark.parametrize("gap_ms", [0, 20, 60])
def test_a_second_ctrl_c_during_the_clean_up_leaves_a_committed_resumable_goal(
    make_repo, live, server, gap_ms
) -> None:
    """The first Ctrl+C abandons the held call; the second comes while the round is being
    closed (or just after the run ended). Either way: a committed tree, a paused goal that
    ``relay resume`` completes, and the JSON object on stdout."""
    repo, run = start_held(make_repo, live, server)
    os.killpg(run.pid, signal.SIGINT)
    time.sleep(gap_ms / 1000)
    if run.proc.poll() is None:
        os.killpg(run.pid, signal.SIGINT)
    try:
        exit_code, took = run.wait_timed(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("the run did not stop within 10 s of two Ctrl+C during a model call")
    assert exit_code == 130, run.stderr[-3000:]
    assert took < STOP_WITHIN_S, f"the run took {took:.2f} s to stop"
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    assert run.stdout.strip(), f"no JSON object on stdout; stderr:\n{run.stderr[-3000:]}"
    data = run.json()
    assert data["status"] == "paused", data
    goal = Store(state_dir(repo) / "relay.db").latest_goal()
    assert goal is not None and goal.status == "paused" and goal.rounds == 1
    done = resume_to_completion(repo, live, server)
    assert done["rounds"] == 2, done


def test_ctrl_c_during_a_retry_wait_pauses_at_once_without_another_call(
    make_repo, live, server
) -> None:
    """A transient error is retried after the backoff (30 s here); a Ctrl+C during that wait
    pauses at once, and no further model call is made."""
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 30}})
    server.tools(WRITE)
    server.answers.append(dict(OVERLOADED))
    model = f"{server.provider}:m"
    url = server.base_url
    run = live.start("run", GOAL, "--repo", repo, "--model", model, "--base-url", url, "--json")

    def waiting() -> bool:
        assert run.proc.poll() is None, run.stderr[-3000:]
        return server.requests == 2 and "api_errors" in run.stderr

    wait_for(waiting, 30, "the failed call's retry wait")
    time.sleep(0.3)
    os.killpg(run.pid, signal.SIGINT)
    try:
        exit_code, took = run.wait_timed(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("the run did not stop within 10 s of Ctrl+C during a retry's wait")
    assert exit_code == 130, run.stderr[-3000:]
    assert took < STOP_WITHIN_S, f"the run took {took:.2f} s to stop"
    assert server.requests == 2, "a model call was made after the Ctrl+C"
    data = run.json()
    assert data["status"] == "paused" and "Ctrl+C" in data["message"], data
    assert_committed(repo)
    calls = read_transcript(repo)
    assert [c.get("error", {}).get("kind") for c in calls] == [None, "overloaded"], calls
    done = resume_to_completion(repo, live, server)
    assert done["rounds"] == 2, done


def test_ctrl_c_twice_just_after_the_loop_ended_still_reports(
    make_repo, write_script, relay_run, monkeypatch
) -> None:
    """Two Ctrl+C just after the loop returned its stop (while the run stops the supplement
    watcher): the user pressing twice is let go, the run's outputs are written (the JSON
    object, the goal's real status) and the run is recorded as ended. It escaped as a
    ``KeyboardInterrupt`` with nothing on stdout (a CI failure of the test above)."""
    from relay.watch import SupplementWatcher

    stop_watcher = SupplementWatcher.stop

    def pressed_twice(self: SupplementWatcher) -> None:
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        stop_watcher(self)

    monkeypatch.setattr(SupplementWatcher, "stop", pressed_twice)
    repo = make_repo(config=NOTES)
    script = write_script(
        [{"tool_calls": [{"name": n, "arguments": a}]} for n, a in (WRITE, COMPLETE)]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert data["status"] == "complete" and code == 0, data
    store = Store(state_dir(repo) / "relay.db")
    goal = store.latest_goal()
    assert goal is not None and goal.status == "complete"
