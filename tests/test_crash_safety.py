"""Crash safety with real processes (SPEC §10, §11): a run killed with SIGKILL at any point is
continued by the next `relay run`/`relay resume`; the interrupted round's changes are committed
as `relay: round N (interrupted)`, nothing written before is lost, and the goal completes. A
corrupt state database is an error naming the file, never a silent fresh start."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import call, complete, git, read_transcript, respond, state_dir
from test_user_controls import (
    NOTES,
    WRITE_NOTES,
    Live,
    gone,
    handoff,
    kinds,
    pgrep,
    shell,
    wait_for,
)

WRITE_A = call("write_file", path="a.txt", content="first round\n")
BOTH = {
    "deliverables": [
        {"file": "notes.txt", "contains": "hello"},
        {"file": "a.txt", "contains": "first round"},
    ]
}


@pytest.fixture()
def live(tmp_path: Path) -> Iterator[Live]:
    lv = Live(tmp_path)
    try:
        yield lv
    finally:
        lv.cleanup()


def subjects(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%s").splitlines()


def kill9(run_pid: int, marker: str | None = None) -> None:
    """SIGKILL the run (like `kill -9`). Its tool's process group lives in its own session and
    survives the run; kill it too (by PID), as the machine's reboot or the user would."""
    os.kill(run_pid, signal.SIGKILL)
    if marker:
        for pid in pgrep(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert gone(pgrep(marker), 5)


def resume(lv: Live, repo: Path, script: Path, how: str) -> dict:
    """Continue the goal with ``relay resume`` or ``relay run`` (no goal); must complete."""
    if how == "resume":
        run = lv.start("resume", "--repo", repo, "--model", f"scripted:{script}", "--json")
    else:
        run = lv.run(repo, script, None)
    code = run.wait()
    assert code == 0, f"relay {how}: exit {code}\n{run.stderr}\n{run.stdout[-3000:]}"
    data = run.json()
    assert data["status"] == "complete"
    return data


def test_kill9_during_a_shell_call_after_a_write(make_repo, write_script, live) -> None:
    repo = make_repo(config=BOTH)
    slow = live.slow()
    script = write_script(
        [
            respond(WRITE_A, handoff("a.txt written")),  # round 1, committed
            respond(WRITE_NOTES),  # round 2, step 1
            respond(shell(slow)),  # round 2, step 2: killed here
        ]
    )
    run = live.run(repo, script)
    live.wait_started(run, slow)
    kill9(run.pid, slow)
    assert run.wait(timeout=10) == -signal.SIGKILL
    assert (repo / "notes.txt").read_text() == "hello\n"

    status = live.status(repo)  # readable after the crash
    assert status["status"] == "active"
    goal_id = status["goal_id"]

    data = resume(live, repo, write_script([complete()]), "run")
    assert data["goal_id"] == goal_id
    assert "recovered" in kinds(data)
    log = subjects(repo)
    assert "relay: round 2 (interrupted)" in log, log
    assert any(s.startswith("relay: round 1: a.txt written") for s in log), log
    interrupted = git(repo, "log", "--format=%H", "--grep", r"round 2 (interrupted)", "-F")
    changed = git(repo, "show", "--name-only", "--format=", interrupted.split()[0]).split()
    assert "notes.txt" in changed
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    assert git(repo, "show", "HEAD:a.txt") == "first round\n"
    assert git(repo, "status", "--porcelain") == ""
    assert data["audit"]["passed"] is True


def test_kill9_right_after_a_round_commit(make_repo, write_script, live) -> None:
    repo = make_repo(config=BOTH)
    slow = live.slow()
    script = write_script(
        [
            respond(WRITE_A, WRITE_NOTES, handoff("both written")),  # round 1
            respond(shell(slow)),  # round 2
        ]
    )
    run = live.run(repo, script)
    wait_for(
        lambda: any(s.startswith("relay: round 1:") for s in subjects(repo)),
        20,
        "the commit of round 1",
    )
    kill9(run.pid)
    assert run.wait(timeout=10) == -signal.SIGKILL
    for pid in pgrep(slow):  # if round 2 got as far as its shell call
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    round1 = git(repo, "log", "--format=%H", "--grep", "relay: round 1:", "-F").split()[0]

    data = resume(live, repo, write_script([complete()]), "resume")
    log = subjects(repo)
    assert not any("(interrupted)" in s for s in log), log  # nothing was left to commit
    git(repo, "merge-base", "--is-ancestor", round1, "HEAD")  # still in the history
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    assert git(repo, "show", "HEAD:a.txt") == "first round\n"
    assert git(repo, "status", "--porcelain") == ""
    assert data["audit"]["passed"] is True


def test_kill9_during_the_audit_command(make_repo, write_script, live, tmp_path) -> None:
    gate = live.gates / "audit-is-fast-now"  # visible inside the sandbox
    slow = live.slow()
    config = {
        "deliverables": [
            {"file": "notes.txt", "contains": "hello"},
            # slow (sleep 30) until the gate file exists, then instant
            {"command": f"test -f '{gate}' || {slow}", "timeout_s": 120},
        ]
    }
    repo = make_repo(config=config)
    run = live.run(repo, write_script([respond(WRITE_NOTES), complete()]))
    live.wait_started(run, slow)
    assert len(read_transcript(repo)) == 2  # the audit runs inside update_goal
    kill9(run.pid, slow)
    assert run.wait(timeout=10) == -signal.SIGKILL
    gate.touch()

    data = resume(live, repo, write_script([complete()]), "run")
    log = subjects(repo)
    assert "relay: round 1 (interrupted)" in log, log
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    assert data["audit"]["passed"] is True
    assert all(c["passed"] for c in data["audit"]["checks"])
    assert git(repo, "status", "--porcelain") == ""


def test_a_corrupt_state_database_is_an_error_naming_the_file(
    make_repo, write_script, live
) -> None:
    repo = make_repo(config=NOTES)
    question = respond(call("update_goal", status="needs_user_input", summary="?", question="Q?"))
    first = live.run(repo, write_script([question]))
    assert first.wait() == 2, first.stderr
    db = state_dir(repo) / "relay.db"
    assert db.is_file()
    for extra in (db.with_name("relay.db-wal"), db.with_name("relay.db-shm")):
        extra.unlink(missing_ok=True)
    garbage = b"this is not a database, just garbage\n" * 200
    db.write_bytes(garbage)
    branches = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    head = git(repo, "rev-parse", "HEAD")

    script = write_script([respond(WRITE_NOTES), complete()])
    attempts = {
        "run": [*("run", "--repo", repo, "--model", f"scripted:{script}", "--json")],
        "run GOAL": [*("run", "A new goal.", "--repo", repo, "--model", f"scripted:{script}")],
        "resume": [*("resume", "--repo", repo, "--model", f"scripted:{script}")],
        "status": ["status", "--repo", repo, "--json"],
    }
    for name, args in attempts.items():
        proc = live.relay(*args)
        assert proc.returncode == 1, f"relay {name}: exit {proc.returncode}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        message = " ".join(proc.stderr.split())
        assert str(db) in message or "relay.db" in message, f"relay {name}: {proc.stderr}"
    assert db.read_bytes() == garbage  # never replaced by a fresh database
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)") == branches
    assert git(repo, "rev-parse", "HEAD") == head
    assert len(read_transcript(repo)) == 1
