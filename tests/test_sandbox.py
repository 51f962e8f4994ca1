"""The sandbox of the model's commands (SPEC §14), tried as an attacker would, one call at a time.

Each test runs a hostile ``shell`` command through relay's real tool executor inside the
bubblewrap sandbox that ``sandbox.mode: auto`` picks on this machine, and checks what the user
cares about on the host afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import git
from sandbox_support import require_bwrap

from relay.models.base import ToolCall
from relay.sandbox import (
    Sandbox,
    SandboxSession,
    SandboxUnavailable,
    allowed_env,
    resolve_sandbox,
)
from relay.sandbox.mounts import plan_mounts, protected_targets
from relay.tools import ToolContext, ToolResult, execute

SECRET = "sk-test-0123456789abcdef-secret"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "relay.yaml").write_text("mode: relay\n")
    (root / "src.py").write_text("x = 1\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial")
    return root.resolve()


@pytest.fixture()
def state(repo: Path) -> Path:
    folder = repo / ".git" / "relay"
    folder.mkdir()
    (folder / "relay.db").write_text("the store")
    return folder


@pytest.fixture(params=["own", "kept"])
def ctx(
    repo: Path, state: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ToolContext]:
    """A call's context: each call in a sandbox of its own, or in the run's kept sandbox
    (:mod:`relay.sandbox.session`), which must hold every rule the same."""
    require_bwrap()
    sandbox = resolve_sandbox(
        "required", state_dirs=[state], git_dirs=[repo / ".git"], writable_paths=()
    )
    assert sandbox.active
    protected = ("relay.yaml", ".relay/progress.md", "tests/**")
    session = None
    if request.param == "kept":
        session = SandboxSession(sandbox, repo, protected, (".relay/progress.md",))
    yield ToolContext(
        repo_root=repo,
        state_dir=state,
        run_dir=tmp_path / f"run-{tmp_path.name}",
        protected_paths=protected,
        shell_timeout_s=20.0,
        sandbox=sandbox,
        session=session,
    )
    if session is not None:
        session.close()


def shell(ctx: ToolContext, command: str) -> ToolResult:
    return execute(ToolCall(id="s", name="shell", arguments={"command": command}), ctx)


def test_relay_processes_and_their_environment_are_invisible(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    result = shell(
        ctx,
        "cat /proc/$PPID/environ 2>/dev/null; for p in /proc/[0-9]*; do cat $p/environ; "
        "cat $p/cmdline; done 2>/dev/null | tr '\\0' '\\n'; ls /proc | grep -c '^[0-9]'",
    )
    assert SECRET not in result.content
    count = int(result.content.strip().splitlines()[-1])
    assert count <= 6  # the sandbox's init, bash, cat/ls/grep: no process of the host


def test_git_dir_is_read_only_so_git_config_cannot_be_changed(ctx: ToolContext, repo: Path) -> None:
    before = (repo / ".git" / "config").read_bytes()
    result = shell(
        ctx,
        "git config core.fsmonitor 'touch pwned'; echo x >> .git/config; "
        "ln .git/config hard; rm -rf .git/hooks; mv .git away; git reset --hard HEAD~0",
    )
    assert (repo / ".git" / "config").read_bytes() == before
    assert not (repo / "hard").exists() and (repo / ".git" / "hooks").is_dir()
    assert (repo / ".git").is_dir() and not (repo / "away").exists()
    assert "Read-only file system" in result.content


def test_relay_state_is_hidden(ctx: ToolContext, state: Path) -> None:
    result = shell(
        ctx,
        f"ls -A {state}; cat {state}/relay.db; echo forged > {state}/relay.db; echo done",
    )
    assert "the store" not in result.content
    assert (state / "relay.db").read_text() == "the store"


def test_protected_paths_are_read_only(ctx: ToolContext, repo: Path) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    result = shell(
        ctx,
        "echo 'mode: session' > relay.yaml; rm -f relay.yaml; mv relay.yaml r2; "
        "sed -i s/True/False/ tests/test_a.py; rm tests/test_a.py; echo ok > src.py",
    )
    assert (repo / "relay.yaml").read_text() == "mode: relay\n"
    assert "True" in (repo / "tests" / "test_a.py").read_text()
    assert (repo / "src.py").read_text() == "ok\n"  # the rest of the tree is writable
    assert result.exit_code == 0


def test_outside_the_tree_is_read_only_and_tmp_is_private(ctx: ToolContext, tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    result = shell(
        ctx,
        f"echo x > {home}/planted; echo y > /tmp/planted-{os.getpid()}; "
        f"cat /tmp/planted-{os.getpid()}",
    )
    assert not (home / "planted").exists()
    assert not Path(f"/tmp/planted-{os.getpid()}").exists()
    assert "y" in result.content  # /tmp works inside


def test_writable_paths_are_writable(ctx: ToolContext, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    sandbox = replace(ctx.sandbox, writable=(cache,))
    shell(replace(ctx, sandbox=sandbox), f"echo cached > {cache}/entry")
    assert (cache / "entry").read_text() == "cached\n"


def test_credential_files_are_hidden(
    ctx: ToolContext, repo: Path, state: Path, tmp_path: Path
) -> None:
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / ".bashrc").write_text(f"export OPENAI_API_KEY={SECRET}\n")
    sandbox = resolve_sandbox("required", state_dirs=[state], git_dirs=[repo / ".git"])
    result = shell(
        replace(ctx, sandbox=sandbox),
        f"cat {home}/.ssh/id_ed25519; cat {home}/.bashrc; ls -A {home}/.ssh",
    )
    assert "PRIVATE KEY" not in result.content and SECRET not in result.content


def test_no_process_outlives_the_call(ctx: ToolContext) -> None:
    marker = f"{time.time_ns() % 10**9}"
    result = shell(
        ctx,
        f"nohup sleep 1{marker} >/dev/null 2>&1 & setsid sleep 2{marker} >/dev/null 2>&1 & "
        f"( ( sleep 3{marker} & ) & ) ; echo started",
    )
    assert result.exit_code == 0
    time.sleep(0.3)
    left = subprocess.run(["pgrep", "-f", f"sleep [123]{marker}"], capture_output=True)
    assert left.stdout == b""


def test_a_stop_while_the_sandbox_starts_leaves_no_process(ctx: ToolContext) -> None:
    """A Ctrl+C or a timeout that stops a call while bubblewrap is still setting up (its
    PID-namespace init not yet bound to die with it) must not leave the command running,
    orphaned, after the call; nor hold the call up until the pipes are abandoned."""
    import threading

    from relay.tools import kill_running, run_shell

    for trial in range(12):
        marker = f"sleep 40.{time.time_ns() % 10**8:08d}"
        results: list[ToolResult] = []
        worker = threading.Thread(
            target=lambda m=marker, out=results: out.append(run_shell(ctx, m))
        )
        worker.start()
        deadline = time.monotonic() + 10
        while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, "the call did not start"
            time.sleep(0.001)
        started = time.monotonic()
        kill_running()  # as the sandbox starts: its command line already names the marker
        worker.join(timeout=10)
        took = time.monotonic() - started
        time.sleep(0.2)
        left = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
        assert left == "", f"trial {trial}: survived the stop: {left}"
        assert took < 1.5, f"trial {trial}: the stopped call took {took:.2f} s"
        assert results and "stopped by relay" in results[0].content


def test_nothing_survives_kill_9_of_relay(ctx: ToolContext, tmp_path: Path) -> None:
    marker = f"{time.time_ns() % 10**9}"
    script = tmp_path / "victim.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path[:0] = {sys.path!r}
            from pathlib import Path
            from relay.sandbox import resolve_sandbox
            from relay.tools import ToolContext, run_shell
            ctx = ToolContext(repo_root=Path({str(ctx.repo_root)!r}), state_dir=Path("/x"),
                              run_dir=Path({str(tmp_path)!r}),
                              sandbox=resolve_sandbox("required"))
            run_shell(ctx, "setsid sleep 4{marker} & nohup sleep 5{marker} & sleep 6{marker}")
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-f", f"sleep [456]{marker}"], capture_output=True)
        if len(found.stdout.split()) >= 3:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", f"sleep [456]{marker}"], capture_output=True)
    assert left.stdout == b""


@pytest.mark.parametrize("network", ["deny", "allow"])
def test_network_setting(ctx: ToolContext, network: str) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        sandbox = replace(ctx.sandbox, network=network)
        code = (
            "import socket; s=socket.socket(); s.settimeout(3); "
            f"s.connect(('127.0.0.1', {port})); print('connected')"
        )
        result = shell(replace(ctx, sandbox=sandbox), f'{sys.executable} -c "{code}"')
    finally:
        server.close()
    assert ("connected" in result.content) == (network == "allow"), result.content


def test_the_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MYAPP_SETTING", "1")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = allowed_env(add={"CI": "1", "ANTHROPIC_API_KEY": SECRET})
    assert "OPENAI_API_KEY" not in env and "ANTHROPIC_API_KEY" not in env
    assert "MYAPP_SETTING" not in env and env["LC_ALL"] == "C.UTF-8" and env["CI"] == "1"
    assert allowed_env(extra_names=["MYAPP_*"])["MYAPP_SETTING"] == "1"


def test_required_without_bubblewrap_is_refused_with_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("relay.sandbox.launcher.shutil.which", lambda name: None)
    with pytest.raises(SandboxUnavailable) as refused:
        resolve_sandbox("required")
    assert "apt-get install bubblewrap" in str(refused.value)
    off = resolve_sandbox("auto")
    assert off.mode == "off" and "not installed" in off.reason
    assert off.warning() and "not installed" in (off.warning() or "")
    assert resolve_sandbox("off").mode == "off"


def test_mount_plan_deeper_rules_win(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".git" / "relay").mkdir(parents=True)
    (root / "relay.yaml").write_text("x")
    mounts = plan_mounts(
        root=root,
        git_dirs=[root / ".git"],
        protected=protected_targets(root, ["relay.yaml", "missing.txt", "*.yaml"]),
        hidden=[root / ".git" / "relay", tmp_path / "absent"],
    )
    assert [(m.kind, m.path.relative_to(tmp_path).as_posix()) for m in mounts] == [
        ("bind", "repo"),
        ("ro-bind", "repo/.git"),
        ("ro-bind", "repo/relay.yaml"),
        ("hide", "repo/.git/relay"),
    ]


def test_off_mode_runs_unconfined_but_still_reaps(tmp_path: Path, repo: Path) -> None:
    ctx = ToolContext(repo_root=repo, state_dir=tmp_path / "s", run_dir=tmp_path, sandbox=Sandbox())
    marker = f"{time.time_ns() % 10**9}"
    shell(ctx, f"setsid sleep 7{marker} >/dev/null 2>&1 & echo x > {tmp_path}/outside")
    assert (tmp_path / "outside").exists()  # no confinement without the sandbox
    time.sleep(0.3)
    assert subprocess.run(["pgrep", "-f", f"sleep 7{marker}"], capture_output=True).stdout == b""


def test_a_read_only_failure_tells_the_model_the_rule(ctx: ToolContext) -> None:
    result = shell(ctx, "git mv src.py moved.py")
    assert result.is_error and "use plain mv/rm instead of git mv" in result.content
    assert "[relay]" not in shell(ctx, "mv src.py moved.py").content


def test_a_virtual_environment_in_the_tree_is_read_only(ctx: ToolContext, repo: Path) -> None:
    """The model cannot edit the installed test runner of an in-tree venv (SPEC §14)."""
    runner = repo / ".venv" / "lib" / "python3" / "site-packages" / "_pytest" / "runner.py"
    runner.parent.mkdir(parents=True)
    runner.write_text("ORIGINAL = True\n")
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    shell(ctx, f"echo 'ORIGINAL = False' > {runner}; echo x > .venv/bin-new")
    assert runner.read_text() == "ORIGINAL = True\n"
    assert not (repo / ".venv" / "bin-new").exists()
    writable = replace(ctx, sandbox=replace(ctx.sandbox, writable=(repo / ".venv",)))
    shell(writable, f"echo 'ORIGINAL = False' > {runner}")
    assert runner.read_text() == "ORIGINAL = False\n"


def test_tools_installed_under_tmp_stay_visible(
    tmp_path: Path, repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtual environment or tool folder on PATH under the private /tmp (a CI checkout in
    /tmp, say) is shown read-only inside, so that the commands still find it."""
    require_bwrap()
    tool_dir = tmp_path / "venv" / "bin"
    tool_dir.mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    tool = tool_dir / "mytool"
    tool.write_text("#!/bin/sh\necho tool-ran\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool_dir}{os.pathsep}{os.environ['PATH']}")
    sandbox = resolve_sandbox("required", state_dirs=[state], git_dirs=[repo / ".git"])
    ctx = ToolContext(
        repo_root=repo, state_dir=state, run_dir=tmp_path / f"run-{tmp_path.name}", sandbox=sandbox
    )
    result = shell(ctx, f"mytool; echo x > {tool_dir}/planted")
    assert "tool-ran" in result.content
    assert not (tool_dir / "planted").exists()
