"""Attack: the model starts processes that outlive its round and relay (SPEC §14).

``nohup``, ``setsid``, double forks and a burst of background jobs: none of them may run after
the call that started them, after the round, or after relay itself exited (also when relay is
killed with ``kill -9`` in the middle of a call).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import call, complete, respond
from sandbox_support import require_bwrap


def _left(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return found.stdout.split()


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_detached_processes_do_not_outlive_the_round(make_repo, write_script, relay_run, mode):
    if mode == "auto":
        require_bwrap()
    marker = f"77{time.time_ns() % 10**7}"
    spawn = (
        f"for i in $(seq 50); do nohup sleep {marker}$i >/dev/null 2>&1 & done; "
        f"setsid sleep {marker}1 >/dev/null 2>&1 & ( ( sleep {marker}2 & ) & ); echo spawned"
    )
    script = write_script(
        [
            respond(call("shell", command=spawn), call("handoff", note="spawned")),
            respond(call("write_file", path="a.txt", content="a")),
            complete(),
        ]
    )
    code, data, _ = relay_run(repo := make_repo(), script, "Write a.txt.", "--sandbox", mode)
    assert code == 0, data
    time.sleep(0.3)
    assert _left(f"sleep {marker}") == []
    assert (repo / "a.txt").exists()


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_nothing_survives_kill_9_of_relay(make_repo, write_script, tmp_path, mode):
    if mode == "auto":
        require_bwrap()
    marker = f"88{time.time_ns() % 10**7}"
    script = write_script(
        [
            respond(
                call(
                    "shell",
                    command=f"setsid sleep {marker}1 & nohup sleep {marker}2 & sleep {marker}3",
                )
            )
        ]
    )
    repo = make_repo()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay.cli",
            "run",
            "Wait.",
            "--repo",
            str(repo),
            "--model",
            f"scripted:{script}",
            "--sandbox",
            mode,
            "--json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(_left(f"sleep {marker}")) < 3:
        time.sleep(0.05)
    assert len(_left(f"sleep {marker}")) >= 3
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _left(f"sleep {marker}"):
        time.sleep(0.05)
    assert _left(f"sleep {marker}") == []
