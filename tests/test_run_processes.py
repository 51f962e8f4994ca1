"""A stopped run leaves no command of its own running (SPEC §10): after a second Ctrl+C relay
kills what is left of the run's commands before it commits the tree, so nothing writes into the
tree after that commit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from relay.sandbox import stop_run_processes


def _writer(tmp_path: Path, run_id: str) -> Path:
    """A detached process (not relay's child) of run ``run_id`` that keeps writing a file."""
    out = tmp_path / "out.txt"
    script = (
        "import os, time\n"
        "if os.fork(): os._exit(0)\n"
        "os.setsid()\n"
        f"while True:\n    open({str(out)!r}, 'a').write('x')\n    time.sleep(0.005)\n"
    )
    env = {**os.environ, "RELAY_RUN": run_id}
    subprocess.run([sys.executable, "-c", script], env=env, check=True)
    deadline = time.monotonic() + 5
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return out


def test_the_runs_leftover_processes_are_killed_before_relay_settles(tmp_path: Path) -> None:
    out = _writer(tmp_path, "run-under-test")
    other = (
        _writer(tmp_path / "other", "another-run") if (tmp_path / "other").mkdir() is None else None
    )
    assert stop_run_processes("run-under-test") == 1
    size = out.stat().st_size
    time.sleep(0.1)
    assert out.stat().st_size == size  # nothing writes any more
    grown = other.stat().st_size
    time.sleep(0.1)
    assert other.stat().st_size > grown  # another run's command is left alone
    assert stop_run_processes("another-run") == 1
