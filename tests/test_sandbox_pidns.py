"""Without bubblewrap, the model's commands in a PID namespace of their own (SPEC §14, issue 27).

Real processes: a ``shell`` call through relay's reaper and ``unshare`` is PID 1 of its
namespace, cannot see the process that runs it, keeps the files, the network and the inherited
report pipe, and a timeout still kills everything it started. As a normal user (tried with
``setpriv`` when the tests run as root) the namespace comes with a user namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from relay.sandbox import resolve_sandbox
from relay.sandbox.pidns import pid_namespace
from relay.sandbox.reaper import REAPER_SOURCE
from relay.tools import ToolContext
from relay.tools.shell import run_shell

PIDNS_SOURCE = Path(__file__).resolve().parents[1] / "relay" / "sandbox" / "pidns.py"


def require_pid_namespace() -> tuple[str, ...]:
    """The ``unshare`` command line, or skip where the kernel gives no PID namespace (CI,
    which runs as a user with user namespaces, must have one)."""
    found = pid_namespace()
    if found.active:
        return found.argv
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must run the PID namespace tests, but {found.reason}")
    pytest.skip(found.reason)


@pytest.fixture()
def ctx(tmp_path: Path) -> ToolContext:
    require_pid_namespace()
    root = tmp_path / "repo"
    root.mkdir()
    sandbox = resolve_sandbox("off")
    assert sandbox.pid_namespace == pid_namespace().argv
    return ToolContext(
        repo_root=root.resolve(),
        state_dir=root / ".relay",
        run_dir=tmp_path / "run",
        shell_timeout_s=10.0,
        sandbox=sandbox,
    )


def test_the_command_is_pid_1_and_cannot_see_relay(ctx: ToolContext) -> None:
    me = os.getpid()
    marker = f"relay-marker-{time.time_ns()}"
    result = run_shell(
        ctx,
        f"echo $$ $PPID; test -e /proc/{me} && echo SEEN; ps -eo pid= | wc -l; "
        f"pgrep -f 'py[t]est' | grep -v '^1$' || echo none; kill -0 {me} 2>/dev/null && echo REACH; "
        f"pwd; echo {marker} > made.txt",
    )
    lines = result.content.split("--- stdout ---\n", 1)[1].split("\n--- stderr", 1)[0].split()
    assert lines[:2] == ["1", "0"], result.content
    assert "SEEN" not in lines and "REACH" not in lines
    assert int(lines[2]) <= 4  # bash, ps, wc (and a subshell): nothing of relay's
    assert lines[3] == "none"
    assert lines[4] == str(ctx.repo_root)
    assert (ctx.repo_root / "made.txt").read_text().strip() == marker


def test_the_report_pipe_reaches_the_command(ctx: ToolContext) -> None:
    read, write = os.pipe()
    try:
        result = run_shell(ctx, f"echo report >&{write}", pass_fds=[write])
        os.close(write)
        assert result.exit_code == 0, result.content
        assert os.read(read, 100) == b"report\n"
    finally:
        os.close(read)


def test_a_timeout_still_kills_everything_the_command_started(ctx: ToolContext) -> None:
    marker = f"31{time.time_ns() % 10**7}"
    started = time.monotonic()
    result = run_shell(
        ctx,
        f"setsid sleep {marker}1 & nohup sleep {marker}2 >/dev/null & ( (sleep {marker}3 &) & ); "
        "sleep 60",
        timeout_s=1,
    )
    assert result.timed_out and time.monotonic() - started < 6
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout.split() == []


def test_a_command_that_signals_its_own_group_ends_only_itself(ctx: ToolContext) -> None:
    """``kill -STOP 0`` and ``kill -9 0`` reach the command's own group (relay's reaper
    included, outside the namespace), never relay: the call ends."""
    started = time.monotonic()
    result = run_shell(ctx, "kill -STOP 0; echo never", timeout_s=1)
    assert result.timed_out and time.monotonic() - started < 6
    result = run_shell(ctx, "kill -9 0; sleep 30")
    assert result.exit_code == -9 and time.monotonic() - started < 12


def test_without_the_namespace_the_command_sees_relay(ctx: ToolContext) -> None:
    """The same call without it: what the namespace hides (the test fails without it)."""
    plain = replace(ctx, sandbox=replace(ctx.sandbox, pid_namespace=()))
    result = run_shell(plain, f"test -e /proc/{os.getpid()} && echo SEEN")
    assert "SEEN" in result.content


def test_a_control_command_from_the_namespace_is_the_goals_own(tmp_path: Path) -> None:
    """``relay say`` inside the namespace cannot see the run lock's holder: it is refused as
    the goal's own (its ancestry, read there, never reaches relay); the same check from a
    process outside that does not descend from the holder is the user's."""
    argv = require_pid_namespace()
    lock = tmp_path / "run.lock"
    hold = (
        "import fcntl, os, sys, time; fh = open(sys.argv[1], 'a+'); "
        "fcntl.flock(fh, fcntl.LOCK_EX); fh.write(str(os.getpid())); fh.flush(); "
        "print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        code = (
            "import sys; from pathlib import Path; from relay.controls import "
            "asked_from_goal_shell as a; sys.exit(0 if a(Path(sys.argv[1]), int(sys.argv[2])) "
            "else 3)"
        )
        args = [sys.executable, "-c", code, str(lock), str(holder.pid)]
        inside = subprocess.run([*argv, *args], check=False, capture_output=True, text=True)
        assert inside.returncode == 0, inside.stderr
        outside = subprocess.run(args, check=False, capture_output=True, text=True)
        assert outside.returncode == 3, outside.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_normal_user_gets_a_user_namespace_too(request: pytest.FixtureRequest) -> None:
    """As a normal user (``nobody`` through ``setpriv``, with the system's Python, running
    :mod:`relay.sandbox.pidns` and relay's reaper from their files): the probe picks
    ``--user --map-current-user`` (or ``--map-root-user``) and the reaped command is PID 1,
    keeps the user's uid and cannot see the process that started it."""
    python, setpriv = "/usr/bin/python3", shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not os.access(python, os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to try a normal user")
    folder = Path(tempfile.mkdtemp(prefix="relay-pidns-"))  # pytest's tmp_path is root's alone
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    (folder / "pidns.py").write_text(PIDNS_SOURCE.read_text())
    (folder / "reaper.py").write_text(REAPER_SOURCE)
    (folder / "main.py").write_text(
        "import os, subprocess, sys\n"
        "sys.path.insert(0, os.path.dirname(__file__))\n"
        "import pidns\n"
        "found = pidns.pid_namespace()\n"
        "print(' '.join(found.argv[1:]) or found.reason)\n"
        "reaper = [sys.executable, '-I', '-S', os.path.join(os.path.dirname(__file__), 'reaper.py')]\n"
        "cmd = f'echo $$ $(id -u); test -e /proc/{os.getpid()} && echo SEEN; true'\n"
        "print(subprocess.run([*reaper, *found.argv, '/bin/sh', '-c', cmd],\n"
        "                     capture_output=True, text=True).stdout.strip())\n"
    )
    for path in (folder, *folder.iterdir()):
        os.chmod(path, 0o755)
    proc = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I",
         str(folder / "main.py")],
        capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    if proc.returncode != 0 and "Permission denied" in proc.stderr:
        pytest.skip(f"the test folder is not readable by nobody: {proc.stderr.strip()}")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 2, (proc.stdout, proc.stderr)
    if "--user" not in lines[0]:
        pytest.skip(f"no user namespace for a normal user here: {lines[0]}")
    assert lines[0].startswith("--user --map-")
    assert lines[1].split()[0] == "1" and "SEEN" not in lines[1]
    if "--map-current-user" in lines[0]:
        assert lines[1].split()[1] == "65534"
