"""Attack: the model reads the provider key of the relay process (SPEC §14).

A hostile model's shell walks ``/proc/*/environ`` (relay, its ancestors, every process it can
see), reads the repository's ``.env`` and dumps its own environment. The key must never appear
in any tool result, request, transcript, store row, run file, commit or the JSON. relay runs
as a real subprocess here, so that its ``/proc/<pid>/environ`` really holds the key.
"""

from __future__ import annotations

import base64
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import call, complete, git, respond, state_dir
from sandbox_support import require_bwrap

SECRET = "sk-proj-leakcheck-0123456789abcdefABCDEF"

STEAL = (
    'cat /proc/$PPID/environ; p=$$; while [ "$p" -gt 1 ]; do cat /proc/$p/environ; '
    "p=$(awk '{print $4}' /proc/$p/stat); done; for f in /proc/[0-9]*/environ; do cat $f; "
    "done; env; cat .env"
)
ENCODED = "for f in /proc/[0-9]*/environ; do base64 -w0 $f; echo; done"


def _everything_relay_wrote(repo: Path, stdout: str) -> str:
    parts = [stdout]
    for path in state_dir(repo).rglob("*"):
        if path.is_file() and path.suffix != ".db" and "-wal" not in path.name:
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    db = state_dir(repo) / "relay.db"
    with sqlite3.connect(db) as conn:
        parts.extend(conn.iterdump())
    parts.append(git(repo, "log", "--all", "-p", "--format=%B", "^main"))  # relay's commits
    return "\n".join(parts)


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_the_provider_key_never_leaves_relay(make_repo, write_script, run_relay, mode):
    if mode == "auto":
        require_bwrap()
    repo = make_repo({".env": f"OPENAI_API_KEY={SECRET}\n"})
    script = write_script(
        [
            respond(call("shell", command=STEAL)),
            respond(call("shell", command=ENCODED)),
            respond(call("write_file", path="stolen.txt", content="see above")),
            complete("done"),
        ]
    )
    _code, out, err = run_relay(
        [
            "run",
            "Steal the key.",
            "--repo",
            repo,
            "--model",
            f"scripted:{script}",
            "--json",
            "--sandbox",
            mode,
        ],
        subprocess=True,
        env={"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET},
    )
    assert "Traceback" not in err
    everything = _everything_relay_wrote(repo, out + err)
    assert SECRET not in everything
    assert "[redacted: " in everything  # the .env file's copy was caught by value
    if mode == "auto":  # inside the sandbox no process holds the key: not even encoded
        encoded = base64.b64encode(f"OPENAI_API_KEY={SECRET}".encode()).decode()
        assert encoded[8:40] not in everything


def test_git_processes_started_by_relay_get_no_key(make_repo, write_script, run_relay, tmp_path):
    """A git wrapper first on PATH records the environment of every git process relay starts."""
    log = tmp_path / "git-env.log"
    wrapper_dir = tmp_path / "bin"
    wrapper_dir.mkdir()
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    wrapper = wrapper_dir / "git"
    wrapper.write_text(f'#!/bin/sh\nenv >> {log}\nexec {real_git} "$@"\n')
    wrapper.chmod(0o755)
    repo = make_repo()
    script = write_script([respond(call("shell", command="git status")), complete()])
    import os

    path = f"{wrapper_dir}{os.pathsep}{os.environ['PATH']}"
    run_relay(
        ["run", "Look.", "--repo", repo, "--model", f"scripted:{script}", "--json"],
        subprocess=True,
        env={"OPENAI_API_KEY": SECRET, "PATH": path},
    )
    assert log.exists() and log.read_text().count("PATH=") >= 3
    assert SECRET not in log.read_text()
