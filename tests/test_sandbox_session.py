"""The sandbox kept for a run's ``shell`` calls (SPEC §14, issue 12; relay.sandbox.session).

One bubblewrap sandbox serves the calls of a run, its init a server of relay's; every call must
still end as a call in a sandbox of its own did: nothing of the model's left running, nothing
left in the private folders, the mounts those a new sandbox would have. The rules every sandbox
holds (hidden files, read-only paths, network) run against the kept sandbox in test_sandbox.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sandbox_support import (
    KEPT_OWN,
    KEPT_PROTECTED,
    kept_context,
    kept_repo,
    require_bwrap,
    stdout,
)

import relay.sandbox.kept as kept
from relay.audit_commands import AuditShell
from relay.sandbox import Sandbox, SandboxSession, resolve_sandbox
from relay.tools import ToolContext, ToolResult, kill_running, run_shell

OWN, PROTECTED = KEPT_OWN, KEPT_PROTECTED


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    return kept_repo(tmp_path)


def _sandbox(repo: Path, **settings: object) -> Sandbox:
    require_bwrap()
    return resolve_sandbox(
        "required", state_dirs=[repo / ".git" / "relay"], git_dirs=[repo / ".git"], **settings
    )  # type: ignore[arg-type]


@pytest.fixture()
def ctx(repo: Path, tmp_path: Path) -> Iterator[ToolContext]:
    sandbox = _sandbox(repo)
    session = SandboxSession(sandbox, repo, PROTECTED, OWN)
    yield _context(repo, tmp_path, sandbox, session)
    session.close()


_context = kept_context


def starts(ctx: ToolContext) -> int:
    assert ctx.session is not None
    return ctx.session.starts


def run(ctx: ToolContext, command: str, timeout_s: int | None = None) -> ToolResult:
    return run_shell(ctx, command, timeout_s)


def test_consecutive_calls_share_one_sandbox_with_each_call_s_own_output(ctx: ToolContext) -> None:
    for n in range(5):
        result = run(ctx, f"echo out {n}; echo err {n} >&2; exit {n}")
        assert result.exit_code == n
        assert f"out {n}" in result.content and f"err {n}" in result.content
    assert starts(ctx) == 1


def test_no_process_of_a_call_outlives_it(ctx: ToolContext) -> None:
    marker = f"{time.time_ns() % 10**8:08d}"
    result = run(
        ctx,
        f"(sleep 301.{marker} &); setsid nohup sleep 302.{marker} >/dev/null 2>&1 & "
        f"disown; bash -c 'trap \"\" TERM HUP; exec sleep 303.{marker}' & echo started",
    )
    assert "started" in result.content
    inside = run(ctx, "ps -e -o pid=,comm=")
    assert [line.split()[1] for line in stdout(inside).splitlines()] == ["python", "ps"]
    left = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    assert left == ""
    assert starts(ctx) == 1


def test_the_model_cannot_signal_trace_or_read_the_sandbox_s_init(ctx: ToolContext) -> None:
    probe = (
        "import ctypes, os\n"
        "for p in ('/proc/1/environ', '/proc/1/mem', '/proc/1/fd/3', '/proc/1/maps'):\n"
        "    try:\n"
        "        os.close(os.open(p, os.O_RDONLY)); print('READ', p)\n"
        "    except OSError as e:\n"
        "        print('denied', p)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('attach', libc.ptrace(16, 1, 0, 0), 'seize', libc.ptrace(0x4206, 1, 0, 0))\n"
        "for s in (9, 19, 15, 2, 1, 10):\n"
        "    os.kill(1, s)\n"
    )
    result = run(ctx, f'{sys.executable} -I -c "{probe}"')
    assert "READ" not in result.content, result.content
    assert "attach -1 seize -1" in result.content
    after = run(ctx, "echo alive")
    assert "alive" in after.content and starts(ctx) == 1


def test_a_call_that_leaves_files_in_tmp_gets_the_next_call_a_fresh_sandbox(
    ctx: ToolContext,
) -> None:
    run(ctx, "cat /tmp/nothing 2>/dev/null; ls /dev/shm")  # reads only: the sandbox stays
    assert starts(ctx) == 1
    run(ctx, "echo secret > /tmp/left; mkdir -p /dev/shm/d /run/r; echo x > /dev/shm/d/f")
    result = run(ctx, "ls -A /tmp /dev/shm /run; cat /tmp/left /dev/shm/d/f 2>&1")
    assert "secret" not in result.content and "No such file" in result.content
    assert starts(ctx) == 2
    run(ctx, "chmod 000 /dev/shm")  # a mode changed: the next call's sandbox is fresh too
    assert "ok" in run(ctx, "touch /dev/shm/x && echo ok").content


@pytest.mark.parametrize("kind", ["-M 4096", "-Q", "-S 2"])
def test_system_v_ipc_objects_do_not_reach_the_next_call(ctx: ToolContext, kind: str) -> None:
    """Each kind alone (shared memory, a message queue, a semaphore set) ends the sandbox."""
    made = run(ctx, f"ipcmk {kind} >/dev/null && ipcs -m -q -s | grep -c 0x")
    assert made.exit_code == 0 and stdout(made).strip() == "1", made.content
    listed = run(ctx, "ipcs -m -q -s | grep -c 0x; true")
    assert stdout(listed).strip() == "0"
    assert starts(ctx) == 2


def test_the_working_tree_under_tmp_survives_the_end_of_a_sandbox(
    ctx: ToolContext, repo: Path
) -> None:
    assert str(repo).startswith("/tmp/")  # the tree is a mount inside the private /tmp
    run(ctx, "echo kept > notes.txt; echo gone > /tmp/x")
    run(ctx, "true")
    assert (repo / "notes.txt").read_text() == "kept\n"
    assert (repo / "relay.yaml").is_file() and starts(ctx) == 2


def test_relay_s_rewrite_of_its_files_is_seen_without_a_new_sandbox(
    ctx: ToolContext, repo: Path
) -> None:
    assert "round 1" in run(ctx, "cat .relay/progress.md").content
    for name, text in (("progress.md", "round 2\n"), ("goal.json", "{}\n")):
        fresh = repo / ".relay" / f".{name}.tmp"
        fresh.write_text(text)
        os.replace(fresh, repo / ".relay" / name)  # as relay writes them: a new file
    result = run(ctx, "cat .relay/progress.md .relay/goal.json; echo x > .relay/progress.md")
    assert "round 2" in result.content and "{}" in result.content
    assert "Read-only file system" in result.content
    assert (repo / ".relay" / "progress.md").read_text() == "round 2\n"
    assert starts(ctx) == 1


def test_a_protected_file_replaced_on_the_host_is_seen_and_stays_read_only(
    ctx: ToolContext, repo: Path
) -> None:
    run(ctx, "cat relay.yaml")
    fresh = repo / "relay.yaml.new"
    fresh.write_text("mode: session\n")
    os.replace(fresh, repo / "relay.yaml")
    result = run(ctx, "cat relay.yaml; echo 'mode: relay' > relay.yaml")
    assert "mode: session" in result.content and "Read-only file system" in result.content
    assert (repo / "relay.yaml").read_text() == "mode: session\n"
    assert starts(ctx) == 2


def test_a_file_matching_a_protected_glob_after_the_start_is_read_only_once_relay_replans(
    repo: Path, tmp_path: Path
) -> None:
    sandbox = _sandbox(repo)
    session = SandboxSession(sandbox, repo, (*PROTECTED, "*.lock"), OWN)
    ctx = replace(_context(repo, tmp_path, sandbox, session), protected_paths=session.protected)
    try:
        run(ctx, "true")
        (repo / "deps.lock").write_text("pinned\n")  # e.g. the user's, between two rounds
        fresh = repo / ".relay" / ".progress.tmp"
        fresh.write_text("round 2\n")
        os.replace(fresh, repo / ".relay" / "progress.md")  # relay's round end
        result = run(ctx, "echo changed > deps.lock")
        assert "Read-only file system" in result.content
        assert (repo / "deps.lock").read_text() == "pinned\n"
    finally:
        session.close()


def test_a_credential_file_made_after_the_start_is_hidden_from_the_next_call(
    repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "user-home"
    home.mkdir()
    secret = home / ".aws" / "credentials"
    sandbox = _sandbox(repo, hidden_paths=[str(home / ".aws")])
    session = SandboxSession(sandbox, repo, PROTECTED, OWN)
    ctx = _context(repo, tmp_path, sandbox, session)
    try:
        run(ctx, "true")
        secret.parent.mkdir()
        secret.write_text("aws_secret_access_key = hunter2\n")
        result = run(ctx, f"cat {secret}; ls -A {secret.parent}")
        assert "hunter2" not in result.content
        assert starts(ctx) == 2
    finally:
        session.close()


def test_calls_look_at_the_planned_paths_only_after_the_kernel_told_of_a_change(
    ctx: ToolContext, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unchanged sandbox costs no lstat of its planned paths per call; a change made while
    a call ran (here a protected file replaced on the host) is seen by the next one."""
    looks: list[object] = []
    real_identity = kept.identity
    monkeypatch.setattr(kept, "identity", lambda w: looks.append(w) or real_identity(w))
    run(ctx, "true")
    looks.clear()
    for _ in range(3):
        run(ctx, "echo quiet > notes.txt; ls /tmp")
    assert looks == [] and starts(ctx) == 1
    script = f"sleep 0.3; echo changed; cat {repo / 'relay.yaml'}"
    fresh = repo / "relay.yaml.new"
    fresh.write_text("mode: session\n")
    timer = threading.Timer(0.1, os.replace, (fresh, repo / "relay.yaml"))
    timer.start()
    run(ctx, script)
    timer.join()
    result = run(ctx, "cat relay.yaml; echo 'mode: relay' > relay.yaml")
    assert looks and "mode: session" in result.content
    assert "Read-only file system" in result.content and starts(ctx) == 2


def test_a_timeout_ends_the_whole_sandbox_and_the_next_call_gets_a_new_one(
    ctx: ToolContext,
) -> None:
    marker = f"{time.time_ns() % 10**8:08d}"
    started = time.monotonic()
    result = run(ctx, f"(sleep 304.{marker} &); trap '' TERM; sleep 305.{marker}", timeout_s=1)
    assert result.timed_out and time.monotonic() - started < 6
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout == b""
    assert "again" in run(ctx, "echo again").content
    assert starts(ctx) == 2


def test_a_stop_ends_the_call_and_the_next_call_runs(ctx: ToolContext) -> None:
    run(ctx, "true")
    results: list[ToolResult] = []
    worker = threading.Thread(target=lambda: results.append(run(ctx, "sleep 306")))
    worker.start()
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", "sleep 306"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    kill_running()
    worker.join(timeout=10)
    assert results and "stopped by relay" in results[0].content
    assert "next" in run(ctx, "echo next").content


def test_a_request_too_large_for_the_kept_sandbox_runs_in_one_of_its_own(
    ctx: ToolContext,
) -> None:
    big = {f"BIG_{n}": "x" * 100_000 for n in range(3)}
    result = run_shell(ctx, 'echo "${#BIG_0} ${#BIG_2}"', env=big)
    assert "100000 100000" in result.content
    assert starts(ctx) == 0


def test_a_kept_sandbox_that_cannot_start_leaves_each_call_its_own(
    repo: Path, tmp_path: Path
) -> None:
    sandbox = _sandbox(repo)
    fake = tmp_path / "bwrap-without-pid-1"
    fake.write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --as-pid-1 ] && exit 1; done\n'
        f'exec {sandbox.bwrap} "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    broken = replace(sandbox, bwrap=str(fake))
    session = SandboxSession(broken, repo, PROTECTED, OWN)
    ctx = _context(repo, tmp_path, broken, session)
    try:
        for n in range(4):
            assert f"call {n}" in run(ctx, f"echo call {n}").content
        assert session.starts == 2  # tried twice, then each call in a sandbox of its own
    finally:
        session.close()


def test_the_audit_never_runs_in_the_kept_sandbox(ctx: ToolContext, tmp_path: Path) -> None:
    shell = AuditShell(ctx, 4000)
    assert shell.ctx.session is None
    assert shell.in_folder(tmp_path).ctx.session is None
    other = replace(ctx, repo_root=tmp_path)
    assert ctx.session is not None and not ctx.session.serves(other.repo_root, ctx.sandbox)


def test_without_bubblewrap_nothing_is_kept(repo: Path, tmp_path: Path) -> None:
    session = SandboxSession(Sandbox(), repo, PROTECTED, OWN)
    ctx = _context(repo, tmp_path, Sandbox(), session)
    assert "off" in run(ctx, "echo $RELAY_SANDBOX").content
    assert session.starts == 0


def test_closing_the_session_ends_its_sandbox(ctx: ToolContext) -> None:
    run(ctx, "true")
    assert ctx.session is not None
    kept = ctx.session._kept
    assert kept is not None and kept.monitor.poll() is None
    ctx.session.close()
    assert kept.monitor.poll() is not None


def test_the_sandbox_after_a_used_one_is_started_at_once_and_is_ready_for_the_next_call(
    ctx: ToolContext,
) -> None:
    run(ctx, "true")
    run(ctx, "mktemp")  # leaves a file in /tmp: this sandbox ends after the call
    assert starts(ctx) == 2  # its successor started right away, not at the next call
    time.sleep(0.5)  # the model's turn: the new sandbox boots meanwhile
    started = time.monotonic()
    assert "ready" in run(ctx, "echo ready").content
    assert time.monotonic() - started < 0.5 and starts(ctx) == 2


def test_a_call_runs_when_relay_holds_more_than_a_thousand_descriptors(
    ctx: ToolContext,
) -> None:
    """select() cannot watch a descriptor above 1023; a busy relay (many goals, many files)
    holds that many: the kept sandbox's socket must still work."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        result = run(ctx, "echo ok")
        assert "ok" in result.content and result.exit_code == 0
        assert starts(ctx) == 1
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
