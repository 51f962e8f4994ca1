"""Attack: a hostile model against the sandbox kept for a run's ``shell`` calls (SPEC §14).

Every call in the kept sandbox must end as a call in a sandbox of its own did: nothing a call
changes reaches a later call, and nothing the model sends makes relay hang. These run as the
model would, through ``run_shell`` with a :class:`relay.sandbox.SandboxSession`, and through
``relay run`` with the scripted model.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import call, complete, respond
from sandbox_support import (
    KEPT_OWN,
    KEPT_PROTECTED,
    kept_context,
    kept_repo,
    require_bwrap,
    stdout,
)

from relay.sandbox import SandboxSession, resolve_sandbox
from relay.tools import ToolContext, ToolResult, run_shell


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    return kept_repo(tmp_path)


@pytest.fixture()
def ctx(repo: Path, tmp_path: Path) -> Iterator[ToolContext]:
    require_bwrap()
    sandbox = resolve_sandbox(
        "required", state_dirs=[repo / ".git" / "relay"], git_dirs=[repo / ".git"]
    )
    session = SandboxSession(sandbox, repo, KEPT_PROTECTED, KEPT_OWN)
    yield kept_context(repo, tmp_path, sandbox, session)
    session.close()


def test_a_command_too_large_for_the_server_s_socket_runs_and_relay_does_not_hang(
    ctx: ToolContext,
) -> None:
    """A request between the socket's send buffer (about 208 KiB) and MAX_REQUEST (256 KiB)
    failed to send; relay took that for a server that had ended and started new sandboxes
    forever (more than a hundred in eight seconds), never returning to the run. 40,000
    accented letters are 80 KB for bash but 240 KB of JSON (each is written ``\\u00e9``)."""
    run_shell(ctx, "true")
    command = ": " + "\u00e9" * 40_000 + "; echo large-ran"
    results: list[ToolResult] = []
    worker = threading.Thread(target=lambda: results.append(run_shell(ctx, command)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert ctx.session is not None
    assert results, f"relay hung; it started {ctx.session.starts} sandboxes"
    assert "large-ran" in results[0].content
    assert ctx.session.starts <= 2


def test_a_run_whose_model_sends_a_large_command_ends(make_repo, write_script, run_relay) -> None:
    require_bwrap()
    command = ": " + "\u00e9" * 40_000 + "; echo large > large.txt"
    script = write_script(
        [
            respond(call("shell", command="true")),
            respond(call("shell", command=command)),
            complete(),
        ]
    )
    repo = make_repo()
    args = ["run", "Write large.txt.", "--repo", repo, "--model", f"scripted:{script}"]
    try:
        code, _out, err = run_relay([*args, "--json"], subprocess=True, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("relay run hung on a large shell command")
    assert code == 0, err[-2000:]
    assert (repo / "large.txt").read_text() == "large\n"


INHERITED = "ulimit -f; ulimit -n; nice; taskset -p $$ | cut -d: -f2; cat /proc/self/oom_score_adj"
"""What a command inherits from the process that started it: limits, nice, CPU affinity."""


def test_what_a_call_sets_on_the_sandbox_s_init_does_not_reach_the_next_call(
    ctx: ToolContext,
) -> None:
    """prlimit, renice, taskset and oom_score_adj reach the init without tracing it, and
    every command the init starts inherits them: a file size limit of 1000 bytes made the
    next call's writes fail."""
    before = stdout(run_shell(ctx, INHERITED))
    changed = run_shell(
        ctx,
        "prlimit --pid 1 --fsize=1000:1000 --nofile=64:64 && renice -n 15 -p 1 >/dev/null "
        "&& taskset -p 1 1 >/dev/null && echo 900 > /proc/1/oom_score_adj && echo changed",
    )
    assert "changed" in changed.content, changed.content
    assert stdout(run_shell(ctx, INHERITED)) == before
    written = run_shell(ctx, "head -c 5000 /dev/zero > big && wc -c < big")
    assert stdout(written).strip() == "5000", written.content


KEYS = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {{"x86_64": (248, 250), "aarch64": (217, 219)}}[__import__("os").uname().machine]
RINGS = {{"user": -4, "user-session": -5, "session": -3}}
name = "{name}"
for ring, spec in RINGS.items():
    if sys.argv[1] == "put":
        data = ring.encode()
        made = libc.syscall(ADD_KEY, b"user", (name + ring).encode(), data, len(data), spec)
        print("added" if made > 0 else "refused", ring)
    else:
        found = libc.syscall(KEYCTL, 10, spec, b"user", (name + ring).encode(), 0)
        print("FOUND" if found > 0 else "absent", ring)
persistent = libc.syscall(KEYCTL, 22, -1, -3)
if persistent > 0:
    if sys.argv[1] == "put":
        libc.syscall(ADD_KEY, b"user", (name + "p").encode(), b"p", 1, persistent)
    else:
        found = libc.syscall(KEYCTL, 10, persistent, b"user", (name + "p").encode(), 0)
        print("FOUND" if found > 0 else "absent", "persistent")
"""


def _forget_keys(name: str) -> None:
    """Remove keys named ``name…`` that a call could add to this user's keyrings."""
    if os.uname().machine not in {"x86_64", "aarch64"}:
        return
    keyctl = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    rings = [-4, -5, -3, libc.syscall(keyctl, 22, -1, -3)]
    for ring in rings:
        for suffix in ("user", "user-session", "session", "p"):
            key = libc.syscall(keyctl, 10, ring, b"user", (name + suffix).encode(), 0)
            if key > 0:
                libc.syscall(keyctl, 9, key, ring)  # KEYCTL_UNLINK
                libc.syscall(keyctl, 21, key)  # KEYCTL_INVALIDATE


def test_a_key_added_to_a_keyring_does_not_reach_the_next_call(
    ctx: ToolContext, repo: Path
) -> None:
    """The user, user session and persistent keyrings outlive every process of the sandbox
    (as root they are the host's root's): a key one call adds was found by the next."""
    name = f"relay-attack-{time.time_ns()}-"
    (repo / "keys.py").write_text(KEYS.format(name=name))
    try:
        run_shell(ctx, f"{sys.executable} -I keys.py put")
        seen = run_shell(ctx, f"{sys.executable} -I keys.py get")
        assert "FOUND" not in seen.content, seen.content
    finally:
        _forget_keys(name)


@pytest.mark.skipif(os.geteuid() != 0, reason="the host's device nodes belong to root")
@pytest.mark.xfail(
    strict=True,
    reason="not fixed: bubblewrap's --dev binds the host's device nodes writable, and a "
    "command running as root (without capabilities) owns them, so chmod changes the host's "
    "/dev/null for every later call and the whole machine, in every sandbox mode; "
    "--remount-ro makes them nodev (unusable). Needs the sandbox to run as another user",
)
def test_a_call_as_root_cannot_change_the_host_s_device_nodes(ctx: ToolContext) -> None:
    """``chmod 666 /dev/full`` keeps the mode (nothing breaks) but shows the write: the host's
    node's change time moves. ``chmod 600 /dev/null`` would lock every other user out."""
    before = os.stat("/dev/full").st_ctime_ns
    result = run_shell(ctx, "chmod 666 /dev/full && echo changed")
    assert os.stat("/dev/full").st_ctime_ns == before, result.content
