"""Attack: the model carries relay's provider key off through git (SPEC §14; issue 27).

With the sandbox off, running as root, a hostile model that has the key relay holds:

* writes it into a file of the repository for relay's round-end commit to record — plain,
  reversed, base64-encoded inside a longer blob (each byte offset, both alphabets), hex,
  URL-encoded: relay commits nothing, pauses the goal with a message naming the file and the
  variable (never the value), and ``relay resume`` commits the round once the file is gone;
* commits it itself with ``git commit`` (then deletes the file, so that relay's own commit
  holds nothing) for relay's push to send: relay pushes nothing and pauses the goal;
* reads it from ``/proc/<relay's pid>/environ``, the environment block relay was started with:
  relay re-executes itself at start without its secrets in that block, and still uses the key.

Ordinary files are committed as before.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from conftest import GIT_EMAIL, GIT_NAME, call, complete, flat, git, respond, state_dir
from sandbox_support import require_bwrap
from test_sandbox_pidns import require_pid_namespace

from relay.testing import FakeProvider

SECRET = "sk-proj-attack-Zq7Xk2Lm9Pw4Rt6Yv8Bn3Cd5Fg1Hj0Ks"
BLOB = f"OPENAI_API_KEY={SECRET}\nOTHER=1\n"


def _leaks() -> dict[str, str]:
    """The file's content for each disguise of the key."""
    forms = {
        "plain": SECRET,
        "reversed": SECRET[::-1],
        "hex": SECRET.encode().hex(),
        "url-encoded": "".join(f"%{b:02x}" for b in SECRET.encode()),
    }
    for offset in range(3):  # the key at each byte offset of a longer base64-encoded blob
        blob = ("#" * offset + BLOB).encode()
        forms[f"base64-blob-{offset}"] = base64.b64encode(blob).decode()
        forms[f"base64url-blob-{offset}"] = base64.urlsafe_b64encode(b"\xfb\xff" + blob).decode()
    forms["base64-wrapped"] = base64.encodebytes(("x" * 50 + BLOB).encode()).decode()
    forms["url-quoted-in-a-query"] = "https://x.test/?k=" + urllib.parse.quote(SECRET, safe="")
    return forms


LEAKS = _leaks()


@pytest.fixture()
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    """relay (in this process) holds SECRET as its OpenAI key."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return SECRET


def _run(run_relay: Any, repo: Path, script: Path, *extra: str) -> tuple[int, str, str]:
    args = ["run", "Write the config.", "--repo", repo, "--model", f"scripted:{script}"]
    code, out, err = run_relay([*args, "--sandbox", "off", *extra])
    assert "Traceback" not in err, err
    return code, out, err


def _status(run_relay: Any, repo: Path) -> dict[str, Any]:
    code, out, err = run_relay(["status", "--repo", repo, "--json"])
    assert code == 0, err
    return json.loads(out)


def _all_git_objects(repo: Path) -> str:
    """Every object reachable from a ref or the reflogs, as git shows it."""
    history = git(repo, "log", "--all", "--reflog", "-p", "--format=%H%n%B")
    names = git(repo, "rev-list", "--all", "--reflog", "--objects")
    return history + names


@pytest.mark.parametrize("form", sorted(LEAKS))
def test_a_key_written_into_a_file_is_never_committed(
    form, key, make_repo, write_script, run_relay
):
    repo = make_repo()
    leak = LEAKS[form]
    script = write_script(
        [
            respond(
                call("write_file", path="notes.txt", content="hello\n"),
                call("shell", command=f"mkdir -p conf && printf '%s' '{leak}' > conf/leak.txt"),
                call("handoff", note="wrote the config"),
            ),
            complete(),
        ]
    )
    code, _, err = _run(run_relay, repo, script)
    said = flat(err)
    assert code == 1, err
    assert "relay did not commit" in said and "conf/leak.txt" in said, said
    assert "OPENAI_API_KEY" in said and "relay resume" in said and SECRET not in said, said
    assert "is paused" in said, said
    everything = _all_git_objects(repo)
    assert leak not in everything and SECRET not in everything
    assert git(repo, "show", "HEAD:README.md")  # the branch is as it was: no round commit
    assert "conf/leak.txt" not in git(repo, "log", "--all", "--name-only", "--format=")
    data = _status(run_relay, repo)
    assert (data["status"], data["reason"]) == ("paused", "interrupted")
    assert "OPENAI_API_KEY" in data["message"] and SECRET not in data["message"]
    (repo / "conf" / "leak.txt").unlink()  # the user takes the file away
    code, _, err = run_relay(["resume", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 0, err
    data = _status(run_relay, repo)
    assert data["status"] == "complete"
    assert git(repo, "show", f"{data['branch']}:notes.txt") == "hello\n"  # the round's work
    assert SECRET not in _all_git_objects(repo)


def test_a_key_written_inside_the_sandbox_is_not_committed_either(
    key, make_repo, write_script, run_relay
):
    require_bwrap()
    repo = make_repo()
    leak = LEAKS["base64-blob-1"]
    script = write_script(
        [
            respond(
                call("shell", command=f"printf '%s' '{leak}' > leak.b64"),
                call("handoff", note="wrote it"),
            ),
            complete(),
        ]
    )
    args = ["run", "Write the config.", "--repo", repo, "--model", f"scripted:{script}"]
    code, _, err = run_relay([*args, "--sandbox", "required"])
    said = flat(err)
    assert code == 1 and "relay did not commit" in said and "leak.b64" in said, said
    assert leak not in _all_git_objects(repo)


def test_a_key_in_the_handoff_note_is_not_committed(key, make_repo, write_script, run_relay):
    """The note goes into the progress file, the goal state and the commit's message."""
    repo = make_repo()
    script = write_script(
        [
            respond(
                call("write_file", path="a.txt", content="a\n"),
                call("handoff", note=f"settings done\n{SECRET[::-1]}"),
            ),
            complete(),
        ]
    )
    code, _, err = _run(run_relay, repo, script)
    said = flat(err)
    assert code == 1 and "relay did not commit" in said, said
    assert "the commit message" in said and ".relay/progress.md" in said, said
    assert SECRET[::-1] not in _all_git_objects(repo)
    code, _, err = run_relay(["resume", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 0, err
    assert git(repo, "show", f"{_status(run_relay, repo)['branch']}:a.txt") == "a\n"
    assert SECRET[::-1] not in _all_git_objects(repo)


def _remote_and_clone(make_repo: Any, tmp_path: Path) -> tuple[Path, Path]:
    seed = make_repo(name="seed")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    git(clone, "config", "user.name", GIT_NAME)
    git(clone, "config", "user.email", GIT_EMAIL)
    return remote, clone


SELF_COMMIT = (
    f"printf 'OPENAI_API_KEY=%s\\n' '{SECRET}' | base64 > deploy.env && git add deploy.env && "
    "git commit -qm 'add deployment settings' && git rm -q deploy.env && "
    "git commit -qm 'tidy up' && echo committed"
)


def test_a_key_the_model_committed_itself_is_never_pushed(
    key, make_repo, write_script, run_relay, tmp_path
):
    remote, clone = _remote_and_clone(make_repo, tmp_path)
    script = write_script(
        [
            respond(
                call("write_file", path="notes.txt", content="hello\n"),
                call("shell", command=SELF_COMMIT),
                call("handoff", note="settings"),
            ),
            complete(),
        ]
    )
    code, _, err = _run(run_relay, clone, script, "--push", "--branch", "relay/settings")
    said = flat(err)
    assert code == 1, err
    assert "relay did not push relay/settings to origin" in said, said
    assert "deploy.env" in said and "OPENAI_API_KEY" in said and SECRET not in said, said
    assert git(remote, "branch", "--list", "relay/settings").strip() == ""
    assert SECRET not in _all_git_objects(remote)
    data = _status(run_relay, clone)
    assert data["status"] == "paused" and "did not push" in data["message"]
    # the local branch keeps the model's commits: the user takes them out, then resumes
    tidy = git(clone, "log", "-1", "--format=%H", "--grep=tidy up").strip()
    git(clone, "rebase", "-q", "--onto", "main", tidy, "relay/settings")
    code, _, err = run_relay(["resume", "--repo", clone, "--model", f"scripted:{script}"])
    assert code == 0, err
    assert git(remote, "rev-parse", "relay/settings") == git(clone, "rev-parse", "HEAD")
    assert "deploy.env" not in git(remote, "log", "--name-only", "--format=", "relay/settings")


NOT_SECRETS = {
    "src/client.py": 'BASE = "https://api.openai.com/v1"\nPREFIX = "sk-proj-"\n',
    "docs/keys.md": f"A key looks like {SECRET[:10]}… (never commit one)\n",
    "data/blob.b64": base64.b64encode(os.urandom(3000)).decode() + "\n",
    "data/short.txt": "sk-proj-att\n",
}


def test_ordinary_files_are_committed_and_pushed_as_before(
    key, make_repo, write_script, run_relay, tmp_path
):
    remote, clone = _remote_and_clone(make_repo, tmp_path)
    writes = [call("write_file", path=p, content=c) for p, c in NOT_SECRETS.items()]
    script = write_script([respond(*writes, call("handoff", note="files")), complete()])
    code, _, err = _run(run_relay, clone, script, "--push", "--branch", "relay/files")
    assert code == 0, err
    for path, content in NOT_SECRETS.items():
        assert git(remote, "show", f"relay/files:{path}") == content


STEAL = (
    'p=$$; while [ "$p" -gt 1 ]; do cat /proc/$p/environ; echo; '
    "p=$(awk '{print $4}' /proc/$p/stat); done > '{out}' 2>&1; "
    "for f in /proc/[0-9]*/environ; do cat $f; echo; done >> '{out}' 2>/dev/null; echo read"
)


@pytest.mark.parametrize("namespace", ["off", "auto"])
def test_relays_environment_block_holds_no_key_yet_relay_uses_it(make_repo, tmp_path, namespace):
    """relay as a real process, its model over HTTP: the model's shell (root, no sandbox)
    reads the environment block of relay and of every process it can see. Without a PID
    namespace (``sandbox.pid_namespace: off``) root reads relay's block, which holds no key;
    in one, the shell sees no process of relay's at all."""
    if namespace == "auto":
        require_pid_namespace()
    repo = make_repo(config={"sandbox": {"pid_namespace": namespace}})
    stolen = tmp_path / "stolen.txt"
    shell = STEAL.replace("{out}", str(stolen))
    write = call("write_file", path="notes.txt", content="hello\n")
    script = {"responses": [respond(call("shell", command=shell), write), complete()]}
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "GH_TOKEN": "ghp_forgetoken0123456789"}
    with FakeProvider(script) as fake:
        args = ["run", "Look around.", "--repo", str(repo), "--model", "openai:test-model"]
        args += ["--base-url", fake.openai_url, "--sandbox", "off", "--json"]
        proc = subprocess.run(
            [sys.executable, "-m", "relay.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert fake.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # relay has the key
    seen = stolen.read_text(encoding="utf-8", errors="replace")
    assert SECRET not in seen and "ghp_forgetoken0123456789" not in seen
    if namespace == "auto":  # relay is not among the processes the shell can see
        assert "RELAY_HELD_SECRETS_FD=" not in seen
    elif os.geteuid() == 0:  # root reads every block: relay's is among them
        assert "RELAY_HELD_SECRETS_FD=" in seen
    assert SECRET not in json.dumps([r.body for r in fake.requests])
    for path in state_dir(repo).rglob("*.jsonl"):
        assert SECRET not in path.read_text(encoding="utf-8", errors="replace")
