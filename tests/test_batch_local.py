"""``relay batch`` on the local pool (issue 17, items 3 and 4): a pool process killed mid-goal
is a ``lost`` row in the table (no traceback) and nothing the goal started survives it; Ctrl+C
pauses every running goal, which pushes its state into the repository."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import call, complete, git, respond

WAIT_S = 60.0


def _start(batch: Path, repo: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "relay.cli", "batch", str(batch), "--repo", str(repo), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(paths: list[Path], proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(p.exists() and p.read_text().strip() for p in paths):
        assert time.monotonic() < deadline, f"no {paths}"
        assert proc is None or proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def _parent(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no parent of {pid}")


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (its pool processes)."""
    found = []
    for entry in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (entry / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _shell_of(pidfile: Path) -> int:
    """The host PID of the goal's shell that wrote its ``$$`` into ``pidfile``. In a PID
    namespace of its own (relay.sandbox.pidns) ``$$`` is 1: the shell is then the child of the
    ``unshare`` whose command line names ``pidfile``."""
    written = int(pidfile.read_text())
    if written != 1:
        return written
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv[0].endswith(b"unshare") and str(pidfile).encode() in b" ".join(argv):
                children = Path(f"/proc/{entry.name}/task/{entry.name}/children").read_text()
                return int(children.split()[0])
    raise AssertionError(f"no shell writing {pidfile}")


def _waiting_goal(tmp_path: Path, write_script, name: str) -> dict:
    pidfile = tmp_path / f"{name}.pid"
    script = write_script(
        [
            respond(call("write_file", path=f"{name}.txt", content=name)),
            respond(call("shell", command=f"echo $$ > {pidfile}; sleep 60")),
            complete(),
        ]
    )
    return {"goal": f"Write {name}.txt.", "name": name, "model": f"scripted:{script}"}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_killed_pool_process_is_a_lost_row_and_nothing_it_started_survives(
    make_repo, tmp_path, write_script, sig
):
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump([_waiting_goal(tmp_path, write_script, "doomed")]))
    proc = _start(batch, repo, "--workers", "1")
    pidfile = tmp_path / "doomed.pid"
    _wait_for([pidfile], proc)
    shell = _shell_of(pidfile)
    pid = shell
    while _parent(pid) != proc.pid:  # up to the pool process that runs the goal
        pid = _parent(pid)
    os.kill(pid, sig)
    out, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "lost (broken_pool)" in out and "doomed" in out, out  # the table
    deadline = time.monotonic() + 10
    while _alive(shell) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shell), "the goal's shell command outlived its relay"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["ctrl_c", "sighup"])
def test_ctrl_c_pauses_every_running_goal_which_pushes_its_state(
    make_repo, tmp_path, write_script, sig
):
    """Ctrl+C, or SIGHUP to the batch and its pool processes (a closed terminal)."""
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    batch = tmp_path / "goals.yaml"
    names = ("left", "right")
    batch.write_text(yaml.safe_dump([_waiting_goal(tmp_path, write_script, n) for n in names]))
    proc = _start(batch, repo, "--workers", "2", "--json")
    _wait_for([tmp_path / f"{n}.pid" for n in names], proc)
    started = time.monotonic()
    proc.send_signal(sig)
    if sig == signal.SIGHUP:  # the pool processes get it too
        for pid in _children(proc.pid):
            os.kill(pid, sig)
    out, err = proc.communicate(timeout=WAIT_S)
    assert time.monotonic() - started < 30 and "Traceback" not in err, err
    final = json.loads(out.splitlines()[-1])
    assert proc.returncode == final["exit_code"] == 130
    for row in final["goals"]:
        assert (row["status"], row["pushed"]) == ("paused", True), row
        state = json.loads(git(repo, "show", f"{row['branch']}:.relay/goal.json"))
        assert state["goal"]["status"] == "paused"
        assert git(repo, "show", f"{row['branch']}:{row['name']}.txt") == row["name"]


def test_a_batch_run_again_reports_finished_goals_without_running_them(
    make_repo, tmp_path, write_script, run_relay
):
    """A retried task after its worker pushed ``complete`` but died before it answered: the
    branch carries the goal complete, so nothing runs again and no commit is added."""
    repo = make_repo()
    script = write_script([respond(call("write_file", path="d.txt", content="d")), complete()])
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        yaml.safe_dump([{"goal": "Write d.txt.", "name": "d", "model": f"scripted:{script}"}])
    )
    code, out, _ = run_relay(["batch", batch, "--repo", repo, "--json"])
    assert code == 0
    head = git(repo, "rev-parse", "relay/batch-d").strip()
    code, out, _ = run_relay(["batch", batch, "--repo", repo, "--json"])
    [row] = json.loads(out.splitlines()[-1])["goals"]
    assert (code, row["status"], row["pushed"], row["head"]) == (0, "complete", True, head)
    assert "already" in row["message"] and row["result"] is None
    assert git(repo, "rev-parse", "relay/batch-d").strip() == head


def test_timeout_pauses_the_running_goals_which_push(make_repo, tmp_path, write_script):
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump([_waiting_goal(tmp_path, write_script, "slow")]))
    started = time.monotonic()
    proc = _start(batch, repo, "--timeout", "3", "--json")
    out, err = proc.communicate(timeout=WAIT_S)
    assert time.monotonic() - started < 30 and "Traceback" not in err, err
    [row] = json.loads(out.splitlines()[-1])["goals"]
    assert (row["status"], row["reason"], row["pushed"]) == ("paused", "user", True), row
    assert proc.returncode == 130


def test_a_second_signal_stops_waiting_for_a_goal_that_does_not_pause(
    make_repo, tmp_path, write_script
):
    """docs/batch.md: the first Ctrl+C or SIGTERM cancels the batch, a second one stops
    waiting. A goal stuck before its relay starts (a clone that hangs: a ``git`` on PATH that
    sleeps on ``clone``) cannot pause; after the second SIGTERM the batch still ends at once
    with its JSON (a ``lost`` row, ``cancelled``), and nothing of the attempt survives: not the
    hung clone, not its temporary folder."""
    repo = make_repo()
    bin_dir, marker, scratch = tmp_path / "bin", tmp_path / "clone-started", tmp_path / "tmp"
    bin_dir.mkdir()
    scratch.mkdir()
    fake = bin_dir / "git"
    fake.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do [ "$a" = clone ] && echo $$ > {marker} && exec sleep 300; done\n'
        f'exec {shutil.which("git")} "$@"\n'
    )
    fake.chmod(0o755)
    batch = tmp_path / "goals.yaml"
    goal = {"goal": "Stuck.", "name": "stuck", "model": f"scripted:{write_script([complete()])}"}
    batch.write_text(yaml.safe_dump([goal]))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(scratch)}
    argv = [sys.executable, "-m", "relay.cli", "batch", str(batch), "--repo", str(repo), "--json"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for([marker], proc)
        proc.send_signal(signal.SIGTERM)
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - started
    finally:  # the batch and its pool processes (the hung clone too), whatever happened
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert took < 15 and "Traceback" not in err, err
    [row] = json.loads(out.splitlines()[-1])["goals"]
    assert (row["status"], row["reason"]) == ("lost", "cancelled"), row
    assert proc.returncode == 130
    clone = int(marker.read_text())
    deadline = time.monotonic() + 10
    while _alive(clone) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(clone), "the hung clone outlived the batch"
    assert not list(scratch.glob("relay-goal-*")), "the attempt's folder was left behind"


def _slow_clean_up(folder: str) -> None:
    """A pool task that waits for a signal, then cleans up until the test lets it finish."""
    base = Path(folder)
    try:
        (base / "started").write_text(str(os.getpid()))
        time.sleep(WAIT_S)
    finally:
        (base / "cleaning").write_text("yes")
        while not (base / "release").exists():
            time.sleep(0.01)
        (base / "cleaned").touch()


def test_a_later_sigterm_does_not_cut_short_a_pool_process_clean_up(tmp_path):
    """The batch's SIGTERM ends a pool process's task through its clean-up; another SIGTERM
    during it (Python's pool sends one to every process when an idle one ends on the batch's)
    is ignored, so the attempt's folder is still removed."""
    from relay.batch.engines import LocalEngine

    engine = LocalEngine(1)
    try:
        future = engine.executor.submit(_slow_clean_up, str(tmp_path))
        _wait_for([tmp_path / "started"])
        pid = int((tmp_path / "started").read_text())
        os.kill(pid, signal.SIGTERM)
        _wait_for([tmp_path / "cleaning"])
        os.kill(pid, signal.SIGTERM)
        (tmp_path / "release").touch()
        assert isinstance(future.exception(timeout=WAIT_S), SystemExit)
        assert (tmp_path / "cleaned").exists(), "the second SIGTERM cut the clean-up short"
    finally:
        engine.close()


def test_the_folder_of_an_attempt_whose_pool_process_was_killed_is_removed(tmp_path, monkeypatch):
    """A pool process killed before its clean-up (SIGKILL after the grace) leaves its
    attempt's folder: the engine removes it when it closes."""
    import tempfile

    from relay.batch.engines import LocalEngine
    from relay.batch.task import GoalTask

    bin_dir, marker, scratch = tmp_path / "bin", tmp_path / "clone-started", tmp_path / "tmp"
    bin_dir.mkdir()
    scratch.mkdir()
    fake = bin_dir / "git"
    fake.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 300\n")  # every git hangs
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    task = GoalTask("stuck", "relay/batch-stuck", str(tmp_path / "nowhere"), "0" * 40, "Stuck.")
    engine = LocalEngine(1)
    clone = None
    try:
        future = engine.submit(task)
        _wait_for([marker])
        clone = int(marker.read_text())
        assert list(scratch.glob("relay-goal-*")), "the attempt has no folder"
        os.kill(_parent(clone), signal.SIGKILL)
        concurrent.futures.wait([future], timeout=WAIT_S)
    finally:
        engine.close()
        if clone is not None:  # the hung clone outlives a SIGKILLed pool process
            with contextlib.suppress(ProcessLookupError):
                os.kill(clone, signal.SIGKILL)
    assert not list(scratch.glob("relay-goal-*")), "the attempt's folder was left behind"
