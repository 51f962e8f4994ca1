"""Places relay cannot write (issue 28, items 4 and 9): a read-only repository for ``relay run``
and ``relay audit``, an unwritable ``relay compare --out`` and ``--junit``, a full disk under
``--json``. Each is a clear error naming the path, a non-zero exit, no traceback, and nothing
lost: refused before the run when it can be seen up front, the results kept when it fails at
the end.

A read-only repository is a read-only bind mount in a mount namespace of its own
(``unshare -rm``), which stops root too; without it a non-root user gets ``chmod -R a-w``. A
test that can do neither is skipped, and fails under ``CI=true``.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import call, complete, git, load_json, respond, state_dir, tree_snapshot

import relay.compare

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = respond(call("write_file", path="notes.txt", content="hello\n"))


def _mount(folder: Path) -> str:
    """The shell command that makes ``folder`` a read-only bind mount of itself."""
    f = str(folder)
    return f'mount --bind "{f}" "{f}" && mount -o remount,ro,bind "{f}" "{f}"'


def _mount_works(folder: Path) -> bool:
    """Whether ``unshare -rm`` can make ``folder`` a read-only bind mount here."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", _mount(folder)], capture_output=True, check=False
    )
    return probe.returncode == 0


def relay_read_only(repo: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m relay.cli ARGS...`` with ``repo`` read-only for the process."""
    argv = [sys.executable, "-m", "relay.cli", *map(str, args)]
    if _mount_works(repo):
        argv = ["unshare", "-rm", "sh", "-c", _mount(repo) + ' && exec "$@"', "sh", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if os.geteuid() == 0:
        if os.environ.get("CI") == "true":
            pytest.fail("no read-only mount possible (unshare -rm) and root ignores chmod")
        pytest.skip("no read-only mount possible (unshare -rm) and root ignores chmod")
    subprocess.run(["chmod", "-R", "a-w", str(repo)], check=True)
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(repo)], check=True)


# --------------------------------------------------------------------------- item 4: read-only


@pytest.mark.parametrize("command", ["run", "audit"])
def test_a_read_only_repository_is_refused_before_any_change(
    make_repo, write_script, command
) -> None:
    repo = make_repo(config=NOTES)
    before = tree_snapshot(repo)
    args: list[str | Path] = [command, "--repo", repo]
    if command == "run":
        args = ["run", GOAL, "--repo", repo, "--model", f"scripted:{write_script([complete()])}"]
    proc = relay_read_only(repo, *args)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "read-only" in proc.stderr and str(repo) in proc.stderr, proc.stderr
    assert tree_snapshot(repo) == before
    assert not state_dir(repo).exists()


def test_compare_refuses_an_unwritable_out_before_running(
    make_repo, write_script, run_relay, tmp_path
) -> None:
    repo = make_repo(config=NOTES)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    out = blocker / "cmp"
    script = write_script([WRITE_NOTES, complete()])
    code, _stdout, stderr = run_relay(
        ["compare", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--out", out]
    )
    assert code == 1, stderr
    assert "Traceback" not in stderr
    assert "--out" in stderr and str(out) in stderr, stderr
    assert git(repo, "branch", "--list", "relay/*").strip() == ""  # no run was started
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_compare_out_that_fails_at_the_end_keeps_the_results(
    make_repo, write_script, run_relay, tmp_path, monkeypatch
) -> None:
    repo = make_repo(config=NOTES)
    out = tmp_path / "cmp"

    def disk_full(result: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "compare.json"))

    monkeypatch.setattr(relay.compare, "write_outputs", disk_full)
    script = write_script([WRITE_NOTES, complete()] * 2)
    code, stdout, stderr = run_relay(
        ["compare", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--out", out, "--json"]
    )
    assert code == 1, stderr
    assert "Traceback" not in stderr
    assert str(out / "compare.json") in stderr and "No space left" in stderr, stderr
    data = load_json(stdout)  # the results are on stdout all the same
    assert [r["status"] for r in data["runs"]] == ["complete", "complete"]
    assert len(git(repo, "branch", "--list", "relay/*").splitlines()) == 2


# --------------------------------------------------------------------------- item 9: --junit, --json


def test_an_unwritable_junit_is_refused_before_the_run(
    make_repo, write_script, run_relay, tmp_path
) -> None:
    repo = make_repo(config=NOTES)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    junit = blocker / "audit.xml"
    script = write_script([WRITE_NOTES, complete()])
    code, _, stderr = run_relay(
        ["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--junit", junit]
    )
    assert code == 1, stderr
    assert "Traceback" not in stderr
    assert "--junit" in stderr and str(junit) in stderr, stderr
    assert git(repo, "branch", "--list", "relay/*").strip() == ""
    assert not (state_dir(repo) / "runs").exists()


def test_a_junit_write_that_fails_at_the_end_is_an_error(
    make_repo, write_script, run_relay
) -> None:
    repo = make_repo(config=NOTES)
    script = write_script([WRITE_NOTES, complete()])
    code, stdout, stderr = run_relay(
        [
            "run",
            GOAL,
            "--repo",
            repo,
            "--model",
            f"scripted:{script}",
            "--junit",
            "/dev/full",
            "--json",
        ]
    )
    assert code != 0, stderr
    assert "Traceback" not in stderr
    assert "--junit /dev/full" in stderr and "No space left" in stderr, stderr
    assert load_json(stdout)["status"] == "complete"  # nothing lost
    assert git(repo, "status", "--porcelain") == ""


def test_json_to_a_full_disk_is_an_error(make_repo, write_script, tmp_path) -> None:
    repo = make_repo(config=NOTES)
    script = write_script([WRITE_NOTES, complete()])
    argv = [sys.executable, "-m", "relay.cli", "run", GOAL, "--repo", str(repo)]
    argv += ["--model", f"scripted:{script}", "--json"]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False
        )
    assert proc.returncode != 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert "--json" in proc.stderr and "stdout" in proc.stderr, proc.stderr
    assert "No space left" in proc.stderr, proc.stderr
    assert git(repo, "status", "--porcelain") == ""  # the run's work is committed
