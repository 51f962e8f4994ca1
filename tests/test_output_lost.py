"""A run whose terminal hangs up (SIGHUP) or whose output pipe closes (``relay run … 2>&1 |
head -1``) ends as an interrupt does (issue 28, item 6; SPEC §10): the tool call stopped, the
round's work committed, the goal paused with a message in its state and log, and ``relay
resume`` continues it. Real ``relay`` processes, as in ``test_user_controls.py``.
"""

from __future__ import annotations

import signal
import subprocess

import pytest
from conftest import complete, git, respond
from test_user_controls import GOAL, NOTES, RELAY, WRITE_NOTES, Live, gone, live, pgrep, shell

__all__ = ["live"]  # the fixture


def _resume_completes(live: Live, repo, write_script, goal_id: str, *first: dict) -> None:
    """``relay resume`` finishes the paused goal with the responses ``first`` and a claim."""
    script = write_script([*first, complete()])
    resumed = live.start("resume", "--repo", repo, "--model", f"scripted:{script}", "--json")
    assert resumed.wait() == 0, resumed.stderr
    data = resumed.json()
    assert data["status"] == "complete" and data["goal_id"] == goal_id
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"


def test_sighup_pauses_commits_and_resumes(make_repo, write_script, live) -> None:
    repo = make_repo(config=NOTES)
    slow = live.slow()
    script = write_script([respond(WRITE_NOTES, shell(slow)), complete()])
    run = live.run(repo, script, GOAL, "--sandbox", "off")
    pids = live.wait_started(run, slow)
    run.proc.send_signal(signal.SIGHUP)  # the terminal closed
    code, _took = run.wait_timed()
    assert code == 129, run.stderr
    assert gone(pids), f"the shell call's processes survived: {pgrep(slow)}"
    data = run.json()
    assert data["status"] == "paused"
    status = live.status(repo)
    assert status["status"] == "paused" and "SIGHUP" in status["message"], status
    assert git(repo, "status", "--porcelain") == ""  # the round's work is committed
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    log = live.relay("log", "--repo", repo)
    assert "SIGHUP" in log.stdout, log.stdout
    _resume_completes(live, repo, write_script, data["goal_id"])


@pytest.mark.parametrize("after", ["", "write_file"], ids=["first-line", "mid-round"])
def test_a_closed_stderr_pipe_pauses_commits_and_resumes(
    make_repo, write_script, live, after
) -> None:
    """``after``: the pipe closes after the first line (``| head -1``: the run pauses before
    its first model call), or mid-round after the line of the ``write_file`` call (the round's
    work is committed)."""
    repo = make_repo(config=NOTES)
    command, gate = live.gate()
    script = write_script(
        [respond(WRITE_NOTES, shell(command)), respond(shell("true")), complete()]
    )
    out = live.tmp / "piped.out"
    argv = [RELAY, "run", GOAL, "--repo", str(repo), "--model", f"scripted:{script}", "--json"]
    with out.open("wb") as fo:
        proc = subprocess.Popen(
            [*argv, "--sandbox", "off"],
            stdout=fo,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        assert proc.stderr is not None
        while after not in proc.stderr.readline().decode():  # `| head -1` or later
            pass
        proc.stderr.close()
        gate.touch()  # the tool call ends; what relay prints next meets the closed pipe
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 141, out.read_text()
    text = out.read_text(encoding="utf-8")
    assert '"status": "paused"' in text, text
    status = live.status(repo)
    assert status["status"] == "paused", status
    assert "output" in status["message"] and "closed" in status["message"], status
    assert git(repo, "status", "--porcelain") == ""
    if after:
        assert git(repo, "show", "HEAD:notes.txt") == "hello\n"  # the round's work committed
        _resume_completes(live, repo, write_script, status["goal_id"])
    else:
        _resume_completes(live, repo, write_script, status["goal_id"], respond(WRITE_NOTES))
