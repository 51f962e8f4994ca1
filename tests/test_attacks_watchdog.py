"""Attack: a model's command stops relay (``kill -STOP``), kills it, or goes for its watchdog, so
that the time budget never fires and the run never stops (SPEC §7.4, §14; issue 27).

relay runs as a process of its own here (``python -m relay.cli``): it is the process the
command stops. Each test gives the run a time budget of a few seconds and allows a small
margin; a run that outlives it is continued and killed by the test, which then fails.

* In a PID namespace of its own (bubblewrap, or ``unshare`` with the sandbox off) the command
  finds neither relay nor the watchdog by ``$PPID``, ``pgrep`` or ``/proc``; its ``sleep`` is
  killed by the watchdog at the deadline.
* Without the namespace (``sandbox.pid_namespace: off``) it finds and stops relay; the watchdog
  continues relay, kills the command at the deadline and tells relay, which ends the goal
  ``budget_limited`` (``time_budget``). A killed watchdog is started again by relay; a killed
  relay is recorded as killed by the watchdog, and ``relay resume`` continues the goal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, load_json, respond
from sandbox_support import require_bwrap
from test_sandbox_pidns import require_pid_namespace

BUDGET_S = 3
MARGIN_S = 8.0
"""Seconds a run may take beyond its time budget: relay's start, the wrap-up step, its end."""

BY_PPID = "pids=$(awk '{print $4}' /proc/$PPID/stat 2>/dev/null)"
"""relay is the parent of the command's parent (relay's reaper), found through /proc."""
BY_PGREP = "pids=$(pgrep -f 'relay[.]cli run.*{repo}')"
"""relay found by its command line (``[.]``: not the command's own line; ``{repo}``: this
test's relay alone, never another run on the machine)."""


def _attack(find: str, repo: Path, then: str = "sleep 60") -> str:
    """A command that finds relay (``find`` sets ``$pids``), stops it and then ``then``."""
    find = find.replace("{repo}", str(repo))
    return f"{find}; echo found:$pids; for p in $pids; do kill -STOP $p; done; {then}"


def _script(first: str, *, repeat: bool = False) -> dict[str, Any]:
    """The attack, the wrap-up step's answer, then a write and ``complete`` (for a resume)."""
    attack = respond(call("shell", command=first, timeout_s=120))
    if repeat:
        return {"responses": [attack], "when_exhausted": "repeat_last"}
    return {
        "responses": [
            attack,
            respond(text="Out of time: the work goes on after a resume."),
            respond(call("write_file", path="a.txt", content="a")),
            complete(),
        ]
    }


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(word) for word in fh.read().split()]
    except OSError:
        return []


def relay(
    *args: str | Path, env: dict[str, str] | None = None, limit: float = BUDGET_S + MARGIN_S
) -> tuple[int, dict[str, Any], float]:
    """``python -m relay.cli ARGS`` → ``(exit code, its JSON, seconds)``; a run still going
    after ``limit`` seconds is continued and killed (with its children), and the test fails."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        for pid in (proc.pid, *_children(proc.pid)):
            os.kill(pid, signal.SIGCONT)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"relay did not stop within {limit:.0f} s (frozen?); stderr: {err[-2000:]}")
    assert "Traceback" not in err, err
    data = load_json(out) if out.strip() else {}
    return proc.returncode, data, time.monotonic() - started


def _run(repo: Path, script: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    return relay(
        "run", "Write a.txt.", "--repo", repo, "--model", f"scripted:{script}", "--json",
        "--time-budget", str(BUDGET_S), *extra, env=env,
    )  # fmt: skip


def _found(repo: Path) -> str:
    """What the attack's ``echo found:$pids`` printed (its first tool result)."""
    from conftest import read_transcript

    for row in read_transcript(repo):
        for message in row["request"]["messages"]:
            content = str(message.get("content") or "")
            if message.get("role") == "tool" and "found:" in content:
                return content.split("found:", 1)[1].split("\n", 1)[0].strip()
    return "<no result>"


def _assert_time_budget(code: int, data: dict[str, Any], seconds: float) -> None:
    assert (code, data.get("status"), data.get("reason")) == (5, "budget_limited", "time_budget"), (
        data
    )
    assert seconds < BUDGET_S + MARGIN_S


NO_PIDNS = {"RELAY_SANDBOX__PID_NAMESPACE": "off"}
"""The environment of a run whose commands run without a PID namespace."""


@pytest.mark.parametrize("find", [BY_PPID, BY_PGREP], ids=["ppid", "pgrep"])
def test_stopping_relay_without_a_namespace_is_undone_by_the_watchdog(
    make_repo, write_script, find
):
    """The command finds relay, stops it and sleeps: the watchdog continues relay, kills the
    command at the deadline, and the goal ends at its time budget; ``relay resume`` with a
    larger budget continues it to the end."""
    repo = make_repo()
    script = write_script(_script(_attack(find, repo)))
    code, data, seconds = _run(repo, script, "--sandbox", "off", env=NO_PIDNS)
    _assert_time_budget(code, data, seconds)
    assert _found(repo).isdigit()  # the command saw relay: the watchdog, not hiding, saved it
    notes = [e["detail"] for e in data["events"] if e["kind"] == "watchdog"]
    assert any("was stopped (SIGSTOP)" in n for n in notes), notes
    assert any("time budget used up" in n for n in notes), notes
    code, data, _ = relay(
        "resume", "--repo", repo, "--json", "--time-budget", "120", "--sandbox", "off",
        env=NO_PIDNS, limit=60,
    )  # fmt: skip
    assert (code, data["status"]) == (0, "complete"), data
    assert (repo / "a.txt").read_text() == "a"


def test_a_command_that_stops_relay_again_and_again_and_exits(make_repo, write_script):
    """Every step stops relay and exits at once: relay is continued each time, and the goal
    still ends at its time budget."""
    repo = make_repo()
    script = write_script(_script(_attack(BY_PPID, repo, then="exit 0"), repeat=True))
    env = {**NO_PIDNS, "RELAY_GUARD__ENABLED": "false"}  # the same call again and again
    code, data, seconds = _run(repo, script, "--sandbox", "off", env=env)
    _assert_time_budget(code, data, seconds)


def test_a_killed_watchdog_is_started_again(make_repo, write_script):
    """Without the namespace the command kills the watchdog first, then stops relay: relay
    has started a new watchdog meanwhile, which continues it."""
    repo = make_repo()
    first = f"pkill -9 -f 'watchdog_proces[s].py.*{repo}'; sleep 1; {_attack(BY_PPID, repo)}"
    code, data, seconds = _run(repo, write_script(_script(first)), "--sandbox", "off", env=NO_PIDNS)
    _assert_time_budget(code, data, seconds)
    notes = [e["detail"] for e in data["events"] if e["kind"] == "watchdog"]
    assert any("relay started a new one" in n for n in notes), notes


@pytest.mark.parametrize("mode", ["off", "auto"])
@pytest.mark.parametrize("find", [BY_PPID, BY_PGREP], ids=["ppid", "pgrep"])
def test_in_a_pid_namespace_the_command_finds_neither_relay_nor_the_watchdog(
    make_repo, write_script, mode, find
):
    """With the sandbox off and a PID namespace, and in bubblewrap: the command finds no
    process to stop, not even when it stops everything whose command line names relay; its
    ``sleep`` is killed at the deadline (relay alone would let it run for the call's timeout)."""
    if mode == "auto":
        require_bwrap()
    else:
        require_pid_namespace()
    repo = make_repo()
    first = _attack(find, repo, then=f"pkill -STOP -f '(relay[.]cli|watchdog_proces[s]).*{repo}'")
    first += "; sleep 60"
    code, data, seconds = _run(repo, write_script(_script(first)), "--sandbox", mode)
    _assert_time_budget(code, data, seconds)
    assert _found(repo) in {"", "0"}  # nothing, or bubblewrap's init's parent (none)
    code, data, _ = relay(
        "resume", "--repo", repo, "--json", "--time-budget", "120", "--sandbox", mode, limit=60
    )
    assert (code, data["status"]) == (0, "complete"), data


def test_a_command_that_kills_relay_leaves_an_honest_status(make_repo, write_script, tmp_path):
    """``kill -9`` of relay from its own command (no namespace): the watchdog stops the
    command and records the run as killed, ``relay status`` shows it, and ``relay resume``
    finishes the goal (the step in flight is made again: the command kills only once)."""
    repo = make_repo()
    flag, marker = tmp_path / "killed-once", f"4{time.time_ns() % 10**7}"
    first = f"[ -e {flag} ] || {{ touch {flag}; {BY_PPID}; kill -9 $pids; sleep {marker}; }}"
    code, _, seconds = _run(repo, write_script(_script(first)), "--sandbox", "off", env=NO_PIDNS)
    assert code == -signal.SIGKILL and seconds < BUDGET_S + MARGIN_S
    deadline = time.monotonic() + 5
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        _, status, _ = relay("status", "--repo", repo, "--json", limit=30)
        if any(e["kind"] == "run_killed" for e in status.get("events", [])):
            break
        time.sleep(0.2)
    assert status["status"] == "active", status
    assert any(e["kind"] == "run_killed" for e in status["events"]), status["events"]
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout.split() == []
    code, data, _ = relay(
        "resume", "--repo", repo, "--json", "--time-budget", "120", "--sandbox", "off",
        env=NO_PIDNS, limit=60,
    )  # fmt: skip
    assert (code, data["status"]) == (0, "complete"), data
