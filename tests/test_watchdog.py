"""The run's watchdog with real processes (SPEC §7.4, §14; issue 27): a stand-in for relay (a
child of the test that records the signals it gets) is continued when stopped, and at the
deadline the commands relay announced are killed with everything below them and relay is sent
the time-up signal; relay's side starts a killed watchdog again and continues a stopped one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relay.watchdog import Watchdog
from relay.watchdog_process import TIME_UP_SIGNAL, process_state

RELAY = (
    "import signal, sys, time\n"
    "out = open(sys.argv[1], 'a', buffering=1)\n"
    "signal.signal(signal.SIGUSR2, lambda *a: out.write('time up\\n'))\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(0.05)\n"
)


@pytest.fixture()
def fake_relay(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A process standing in for relay, and the file where it writes what it was sent."""
    log = tmp_path / "relay.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", RELAY, str(log)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    yield proc, log
    os.kill(proc.pid, signal.SIGCONT)
    proc.kill()
    proc.wait()


def _spec(pid: int, deadline: float | None, tmp_path: Path) -> dict[str, Any]:
    state = process_state(pid)
    assert state is not None
    return {
        "relay_pid": pid,
        "relay_start": state[1],
        "deadline": deadline,
        "signal": True,
        "store": str(tmp_path / "no-store.db"),
        "goal_id": "g",
        "run_id": "r",
        "package_parent": str(Path(__file__).resolve().parents[1]),
    }


def _until(check: Any, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return bool(check())


def _state(pid: int) -> str:
    found = process_state(pid)
    return found[0] if found is not None else "gone"


def test_a_stopped_relay_is_continued(fake_relay, tmp_path: Path) -> None:
    relay, _ = fake_relay
    dog = Watchdog(_spec(relay.pid, None, tmp_path))
    assert dog.start()
    try:
        os.kill(relay.pid, signal.SIGSTOP)
        assert _until(lambda: "was stopped (SIGSTOP)" in " ".join(dog._notes), 3)
        assert _state(relay.pid) != "T"
    finally:
        dog.stop()
    assert dog.proc is not None and dog.proc.returncode == 0  # left at relay's "end"


def test_at_the_deadline_the_commands_die_and_relay_is_told(fake_relay, tmp_path: Path) -> None:
    relay, log = fake_relay
    marker = f"5{time.time_ns() % 10**7}"
    command = subprocess.Popen(
        ["/bin/sh", "-c", f"setsid sleep {marker}1 & sleep {marker}2"], start_new_session=True
    )
    dog = Watchdog(_spec(relay.pid, time.monotonic() + 0.5, tmp_path))
    assert dog.start()
    try:
        dog._observe(command.pid, True)  # as relay.tools.running tells it
        assert _until(lambda: command.poll() is not None, 5)
        assert _until(lambda: log.exists() and "time up" in log.read_text(), 2)
        left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
        assert left.stdout.split() == []
    finally:
        dog.stop()
        if command.poll() is None:
            command.kill()
        command.wait()
    assert command.returncode == -signal.SIGKILL
    assert TIME_UP_SIGNAL == signal.SIGUSR2
    assert any("time budget used up" in n for n in dog.take_notes())


def test_a_command_that_ended_is_not_killed_after_its_pid_is_reused(
    fake_relay, tmp_path: Path
) -> None:
    """The watchdog kills a command only while its PID has the start time relay told it."""
    relay, _ = fake_relay
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        dog = Watchdog(_spec(relay.pid, time.monotonic() + 0.2, tmp_path))
        dog._commands[bystander.pid] = 1  # another start time: not the process relay ran
        assert dog.start()
        time.sleep(0.8)
        dog.stop()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_relay_starts_a_killed_watchdog_again_and_continues_a_stopped_one(
    fake_relay, tmp_path: Path
) -> None:
    relay, _ = fake_relay
    dog = Watchdog(_spec(relay.pid, None, tmp_path))
    assert dog.start()
    try:
        first = dog.proc
        assert first is not None
        os.kill(first.pid, signal.SIGKILL)
        assert _until(lambda: dog.proc is not first and dog.proc is not None, 3)
        second = dog.proc
        assert second is not None and _state(second.pid) not in {"gone", "T"}
        assert dog.restarts == 1
        os.kill(second.pid, signal.SIGSTOP)
        assert _until(lambda: "relay continued it" in " ".join(dog._notes), 3)
        assert _state(second.pid) not in {"T", "gone"}
        os.kill(relay.pid, signal.SIGSTOP)  # the new watchdog watches relay too
        assert _until(lambda: "was stopped (SIGSTOP)" in " ".join(dog._notes), 3)
        assert _state(relay.pid) != "T"
    finally:
        dog.stop()
    notes = " | ".join(dog.take_notes())
    assert "relay started a new one" in notes and "relay continued it" in notes
