"""``relay batch`` shows each goal as it ends (issue 17, item 4): with ``--json`` a goal's line
is on stdout while another goal still runs; on a terminal, a progress bar of the goals and a
line per finished goal on stderr, while another still runs; the table at the end."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from conftest import call, complete, respond

WAIT_S = 60.0


def _two_goals(make_repo, write_script, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A repository (no sandbox: the shell command sees the test's files) and a batch of a
    quick goal and a slow one that waits until the returned ``go`` file exists."""
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    go = tmp_path / "go"
    quick = write_script([respond(call("write_file", path="q.txt", content="q")), complete()])
    slow = write_script(
        [
            respond(
                call("shell", command=f"while [ ! -e {go} ]; do sleep 0.05; done"),
                call("write_file", path="s.txt", content="s"),
            ),
            complete(),
        ]
    )
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        yaml.safe_dump(
            [
                {"goal": "Write q.txt.", "name": "quick", "model": f"scripted:{quick}"},
                {"goal": "Wait.", "name": "slow", "model": f"scripted:{slow}"},
            ]
        )
    )
    return repo, batch, go


def _read_until(fd: int, wanted: bytes, proc: subprocess.Popen) -> bytes:
    """Bytes read from ``fd`` until they hold ``wanted`` (fails after ``WAIT_S``)."""
    seen = b""
    deadline = time.monotonic() + WAIT_S
    while wanted not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            seen += os.read(fd, 65536)
    return seen


def _stop(proc: subprocess.Popen, go: Path) -> None:
    """After a failure: let the slow goal end, kill the batch and its pool processes."""
    if proc.poll() is None:
        go.touch()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def test_json_lines_come_as_goals_end_while_others_still_run(make_repo, write_script, tmp_path):
    repo, batch, go = _two_goals(make_repo, write_script, tmp_path)
    argv = [sys.executable, "-m", "relay.cli", "batch", str(batch), "--repo", str(repo), "--json"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        first = _read_until(proc.stdout.fileno(), b"\n", proc).split(b"\n")[0]
        row = json.loads(first)
        assert (row["name"], row["status"]) == ("quick", "complete"), row
        assert proc.poll() is None, "the slow goal still runs"
        go.touch()
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        _stop(proc, go)
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    assert [line.get("name") for line in lines[:1]] == ["slow"]
    assert [g["status"] for g in lines[-1]["goals"]] == ["complete", "complete"], lines[-1]
    assert proc.returncode == 0, err.decode()


def test_a_terminal_shows_a_progress_bar_and_each_goal_as_it_ends(
    make_repo, write_script, tmp_path
):
    repo, batch, go = _two_goals(make_repo, write_script, tmp_path)
    controller, terminal = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    argv = [sys.executable, "-m", "relay.cli", "batch", str(batch), "--repo", str(repo)]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=terminal, env=env, start_new_session=True
    )
    os.close(terminal)
    try:
        shown = _read_until(controller, b"quick", proc)
        shown += _read_until(controller, b"1/2", proc)
        assert proc.poll() is None, "the slow goal still runs"
        assert b"goals" in shown and b"complete" in shown, shown
        go.touch()
        out, _ = proc.communicate(timeout=WAIT_S)
    finally:
        _stop(proc, go)
        os.close(controller)
    assert proc.returncode == 0
    table = out.decode()
    assert "relay batch: goals.yaml" in table and "quick" in table and "slow" in table
