"""The shell tool with real processes (SPEC §5): output bounds, timeouts, environment."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

from relay.models.base import ToolCall
from relay.sandbox import Sandbox
from relay.tools import ToolContext, ToolResult, execute, kill_running, scrubbed_env


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root.resolve()


@pytest.fixture()
def ctx(repo: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(
        repo_root=repo,
        state_dir=repo / ".relay" / "state",
        run_dir=tmp_path / f"run-{tmp_path.name}",
        output_limit_bytes=4096,
        shell_timeout_s=10.0,
        max_shell_timeout_s=30.0,
    )


def shell(ctx: ToolContext, command: str, **extra: object) -> ToolResult:
    return execute(ToolCall(id="s1", name="shell", arguments={"command": command, **extra}), ctx)


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie waiting for its reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, seconds: float = 3.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def test_success_shows_exit_code_and_separate_streams(ctx: ToolContext) -> None:
    result = shell(ctx, "echo out; echo err >&2")
    assert not result.is_error and result.exit_code == 0
    assert result.content == "exit code: 0\n--- stdout ---\nout\n--- stderr ---\nerr"
    assert result.full_output_path is None


def test_empty_sections_are_omitted(ctx: ToolContext) -> None:
    assert shell(ctx, "echo only").content == "exit code: 0\n--- stdout ---\nonly"
    assert shell(ctx, "true").content == "exit code: 0\n(no output)"


def test_runs_in_the_repo_root(ctx: ToolContext, repo: Path) -> None:
    assert shell(ctx, "pwd").content.splitlines()[-1] == str(repo)


def test_non_zero_exit_is_an_error_with_the_code(ctx: ToolContext) -> None:
    result = shell(ctx, "echo failing >&2; exit 3")
    assert result.is_error and result.exit_code == 3
    assert result.content.startswith("exit code: 3")
    assert "failing" in result.content


def test_killed_by_signal_is_reported(ctx: ToolContext) -> None:
    result = shell(ctx, "kill -9 $$")
    assert result.is_error and result.exit_code == -9
    assert "signal 9" in result.content and "SIGKILL" in result.content


def test_stdin_is_closed(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = shell(ctx, "cat; read line; echo after-read $?", timeout_s=5)
    assert time.monotonic() - started < 3
    assert not result.timed_out and "after-read 1" in result.content


def test_non_utf8_output_is_replaced(ctx: ToolContext) -> None:
    result = shell(ctx, r"printf 'a\xffb\n'")
    assert "a\ufffdb" in result.content


def test_huge_output_is_cut_with_marker_and_kept_whole_on_disk_up_to_the_cap(
    ctx: ToolContext, tmp_path: Path
) -> None:
    total = 3_000_000  # within the kept file's first half: kept whole (tests/test_shell_kept.py)
    tracemalloc.start()
    try:
        result = shell(ctx, f"yes | head -c {total}; echo done >&2")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # memory stays bounded: head and tail only
    assert not result.is_error and result.exit_code == 0
    assert len(result.content.encode()) <= ctx.output_limit_bytes + 400
    assert "bytes cut; full output in" in result.content
    assert result.content.startswith("exit code: 0\n--- stdout ---\ny\ny\n")
    assert result.content.endswith("--- stderr ---\ndone")
    assert result.full_output_path is not None
    full = Path(result.full_output_path)
    assert full.parent == tmp_path / f"run-{tmp_path.name}" / "outputs"
    assert str(full) in result.content
    assert full.stat().st_size == total + len("done\n")
    cut = int(result.content.split("[... ")[1].split(" bytes cut")[0])
    shown = result.content.split("--- stdout ---\n")[1].split("\n--- stderr ---")[0]
    head, rest = shown.split("\n[... ", 1)
    tail = rest.split(" ...]\n", 1)[1] + "\n"  # the section's final newline is dropped
    assert len(head) + cut + len(tail) == total


def test_unwritable_run_dir_still_runs_the_command(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the run folder should be")
    ctx = ToolContext(
        repo_root=repo,
        state_dir=tmp_path / "state",
        run_dir=tmp_path / "blocker",
        output_limit_bytes=1024,
    )
    small = shell(ctx, "echo fine")
    assert not small.is_error and "fine" in small.content
    big = shell(ctx, "seq 1 100000")
    assert not big.is_error and big.full_output_path is None
    assert "bytes cut; full output not saved" in big.content
    assert big.content.rstrip().endswith("100000")


def test_each_cut_output_gets_its_own_file(ctx: ToolContext) -> None:
    first = shell(ctx, "seq 1 20000")
    second = shell(ctx, "seq 1 20000")
    assert first.full_output_path and second.full_output_path
    assert first.full_output_path != second.full_output_path
    assert Path(first.full_output_path).read_text().splitlines()[-1] == "20000"
    assert first.content.rstrip().endswith("20000")


def test_small_output_leaves_no_file(ctx: ToolContext, tmp_path: Path) -> None:
    shell(ctx, "echo small")
    outputs = tmp_path / f"run-{tmp_path.name}" / "outputs"
    assert not outputs.exists() or list(outputs.iterdir()) == []


def test_timeout_kills_the_process_group_including_grandchildren(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = shell(ctx, "sleep 300 & echo $!; sleep 300", timeout_s=1)
    elapsed = time.monotonic() - started
    assert elapsed < 4
    assert result.is_error and result.timed_out
    assert "timed out after 1 s; process group killed" in result.content
    grandchild = int(result.content.split("--- stdout ---\n")[1].split()[0])
    assert _wait_gone(grandchild)


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = shell(ctx, "trap '' TERM; echo $$; sleep 300", timeout_s=1)
    assert time.monotonic() - started < 6
    assert result.timed_out and result.is_error
    assert _wait_gone(int(result.content.split("--- stdout ---\n")[1].split()[0]))


def test_timeout_is_not_fooled_by_closed_pipes(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = shell(ctx, "exec >&- 2>&-; sleep 300", timeout_s=1)
    assert time.monotonic() - started < 4
    assert result.timed_out


def test_background_child_holding_the_pipes_does_not_hang(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = shell(ctx, "sleep 300 & echo $!; echo done")
    assert time.monotonic() - started < 4
    assert not result.timed_out and result.exit_code == 0 and not result.is_error
    assert _wait_gone(int(result.content.split("--- stdout ---\n")[1].split()[0]))


@pytest.mark.parametrize("detach", ["nohup", "setsid", "( sleep 300 & )"])
def test_no_background_process_outlives_the_call(ctx: ToolContext, detach: str) -> None:
    command = (
        "( sleep 300 & ) >/dev/null 2>&1; pgrep -n sleep"
        if detach.startswith("(")
        else f"{detach} sleep 300 >/dev/null 2>&1 & echo $!"
    )
    result = shell(ctx, command)
    assert result.exit_code == 0, result.content
    pid = int(result.content.split("--- stdout ---\n")[1].split()[0])
    assert _wait_gone(pid)


def test_model_timeout_is_capped(ctx: ToolContext) -> None:
    result = shell(ctx, "echo quick", timeout_s=100000)
    assert not result.is_error
    assert "capped" in result.content and "quick" in result.content


@pytest.mark.parametrize("bad", [0, -5, True, 1.5, "10"])
def test_bad_timeout_is_an_error(ctx: ToolContext, bad: object) -> None:
    result = shell(ctx, "echo never", timeout_s=bad)
    assert result.is_error and "timeout_s" in result.content
    assert "never" not in result.content


def test_credentials_are_removed_from_the_environment(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOO_API_KEY", "k-123")
    monkeypatch.setenv("MY_TOKEN", "t-456")
    monkeypatch.setenv("db_password", "p-789")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://example.invalid")
    monkeypatch.setenv("OPENAI_ORG", "org-1")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/tmp/creds.json")
    monkeypatch.setenv("MYAPP_HARMLESS", "visible")
    monkeypatch.setenv("RELAY_MODEL", "openai:x")  # relay's settings (issue 15)
    monkeypatch.setenv("LANG", "C.UTF-8")
    result = shell(ctx, "env")
    for secret in ("k-123", "t-456", "p-789", "example.invalid", "org-1", "eu-west-1", "creds"):
        assert secret not in result.content
    assert "LANG=C.UTF-8" in result.content  # allow-listed
    assert "MYAPP_HARMLESS" not in result.content  # not on the allow-list
    names = ("MYAPP_*", "RELAY_*", "FOO_API_KEY")
    result = shell(replace(ctx, sandbox=Sandbox(env_names=names)), "env")
    assert "MYAPP_HARMLESS=visible" in result.content  # sandbox.env adds names
    assert "RELAY_MODEL" not in result.content  # ... but never relay's settings
    assert "k-123" not in result.content  # ... but never a credential
    assert f"PATH={os.environ['PATH']}" in result.content
    if "HOME" in os.environ:
        assert f"HOME={os.environ['HOME']}" in result.content


def test_scrubbed_env_is_a_filtered_copy() -> None:
    env = scrubbed_env({"PATH": "/bin", "GITHUB_TOKEN": "x", "Aws_Profile": "y", "HOME": "/h"})
    assert env == {"PATH": "/bin", "HOME": "/h"}


def test_kill_running_stops_the_command(ctx: ToolContext) -> None:
    results: list[ToolResult] = []
    worker = threading.Thread(target=lambda: results.append(shell(ctx, "sleep 300")))
    started = time.monotonic()
    worker.start()
    killed = False
    while not killed and time.monotonic() - started < 5:
        time.sleep(0.05)
        killed = kill_running()
    worker.join(timeout=6)
    assert killed and results
    assert results[0].is_error and not results[0].timed_out
    assert "stopped" in results[0].content
    assert time.monotonic() - started < 5
    assert kill_running() is False


def test_missing_working_directory_is_an_error_result(tmp_path: Path) -> None:
    ctx = ToolContext(
        repo_root=tmp_path / "does-not-exist",
        state_dir=tmp_path / "state",
        run_dir=tmp_path / f"run-{tmp_path.name}",
    )
    result = shell(ctx, "echo hi")
    assert result.is_error and "cannot start" in result.content


def test_empty_command_is_an_error(ctx: ToolContext) -> None:
    result = shell(ctx, "   ")
    assert result.is_error and "empty" in result.content
