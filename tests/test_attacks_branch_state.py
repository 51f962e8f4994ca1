"""Attack: state carried by the branch, or kept in relay's state folder, forged by the model
(SPEC §6, §9, §11, §14; issue 27). The sandbox is off and the model's commands run as the user.

* The model rewrites ``.relay/goal.json`` (other deliverables) and commits it on the goal's
  branch; then relay is killed (``kill -9``) and the user runs ``relay resume``. The committed
  state carries no valid seal of relay's: the store's deliverables are used.
* The model also rewrites the store (no deliverables) and commits an unsealed goal state over
  relay's sealed one: the newest goal state relay sealed on the branch restores the store.
* The model writes an empty base collection into relay's cache of the base commit's tests: the
  audit ignores the unsealed cache, collects the base commit again and names the test that did
  not run.
* Across machines: a state sealed with the key of the machine that wrote it
  (``RELAY_STATE_KEY``, a CI secret) is continued on a new machine (fresh ``HOME`` and state
  folder); a forged one, or one sealed with another key, is refused with a message saying why
  and how to continue.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, git, respond, state_dir
from test_crash_safety import kill9
from test_user_controls import Live, handoff, shell, wait_for

DONE = {"deliverables": [{"file": "done.txt", "contains": "real work"}], "sandbox": {"mode": "off"}}
GOAL = "Write done.txt with the real work."
KEY = "k" * 16 + "0123456789abcdef" + "-ci-secret"
"""A CI secret of 42 characters (``RELAY_STATE_KEY``)."""


@pytest.fixture()
def live(tmp_path: Path):
    lv = Live(tmp_path)
    try:
        yield lv
    finally:
        lv.cleanup()


def _python(code: str) -> str:
    """A shell command that runs ``code`` with this interpreter (the model's own script)."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


FORGE_DELIVERABLES = _python(
    "import json\n"
    "p = '.relay/goal.json'\n"
    "d = json.load(open(p))\n"
    "d['goal']['deliverables'] = [{'file': 'README.md'}]\n"
    "d['goal']['limits']['max_rounds_total'] = 500\n"
    "json.dump(d, open(p, 'w'))"
)
COMMIT = "git add .relay && git -c user.name=m -c user.email=m@m.invalid commit -qm 'update the goal state'"


def _kill_after_commit(live: Live, repo: Path, run: Any, slow: str) -> None:
    """Wait until the model's commit is made (its command goes on with ``slow``), then kill
    relay with SIGKILL (as the model itself could, or a crash)."""
    wait_for(lambda: "update the goal state" in git(repo, "log", "--format=%s"), 30, "the commit")
    kill9(run.pid, slow)
    assert run.wait(timeout=10) == -signal.SIGKILL


def _resume(live: Live, repo: Path, script: Path, *extra: str) -> dict[str, Any]:
    run = live.start("resume", "--repo", repo, "--model", f"scripted:{script}", "--json", *extra)
    run.wait(timeout=120)
    return run.json()


def _deliverables(repo: Path) -> str:
    with sqlite3.connect(state_dir(repo) / "relay.db") as conn:
        return conn.execute("select deliverables, limits from goals").fetchone()


def test_a_forged_goal_state_committed_before_a_kill_cannot_replace_the_deliverables(
    make_repo, write_script, live
) -> None:
    """The attack of issue 27: relay used to say "the committed one is used"."""
    repo = make_repo(config=DONE)
    slow = live.slow()
    script = write_script([respond(shell(f"{FORGE_DELIVERABLES} && {COMMIT} && {slow}"))])
    _kill_after_commit(live, repo, live.run(repo, script, GOAL), slow)
    forged = json.loads(git(repo, "show", "HEAD:.relay/goal.json"))
    assert forged["goal"]["deliverables"] == [{"file": "README.md"}]  # the model's commit

    data = _resume(live, repo, write_script([complete(), complete()]), "--max-rounds", "1")
    assert data["status"] != "complete", data
    assert any(c["target"] == "done.txt" and not c["passed"] for c in data["audit"]["checks"]), (
        data["audit"]
    )
    deliverables, limits = _deliverables(repo)
    assert "done.txt" in deliverables and '"max_rounds_total": 500' not in limits
    details = " ".join(e["detail"] for e in data["events"] if e["kind"] == "tamper")
    assert "not sealed by relay" in details and "the committed one is used" not in details


STORE_REWRITE = (
    "import sqlite3, glob\n"
    "db = glob.glob('.git/relay/relay.db')[0]\n"
    "c = sqlite3.connect(db)\n"
    "c.execute(\"update goals set deliverables='[]'\")\n"
    "c.commit()"
)


def test_a_store_rewritten_under_an_unsealed_commit_is_restored_from_relays_seal(
    make_repo, write_script, live
) -> None:
    """Without the sandbox the store is in the model's reach too: it empties the deliverables
    in the store and hides relay's sealed goal state under a commit of its own. The newest
    goal state relay sealed on the branch (round 1's) restores the store."""
    repo = make_repo(config=DONE)
    slow = live.slow()
    script = write_script(
        [
            respond(call("write_file", path="a.txt", content="a"), handoff("a written")),
            respond(
                shell(f"{_python(STORE_REWRITE)} && {FORGE_DELIVERABLES} && {COMMIT} && {slow}")
            ),
        ]
    )
    _kill_after_commit(live, repo, live.run(repo, script, GOAL), slow)
    assert _deliverables(repo)[0] == "[]"  # the model's write reached the store

    data = _resume(live, repo, write_script([complete(), complete()]), "--max-rounds", "1")
    assert data["status"] != "complete", data
    assert "done.txt" in _deliverables(repo)[0]
    details = " ".join(e["detail"] for e in data["events"] if e["kind"] == "tamper")
    round1 = git(repo, "log", "--format=%h", "--grep", "relay: round 1:", "-F").split()[0]
    assert f"the goal state relay sealed at {round1[:7]} is the one checked" in details, details
    assert "deliverables in relay's store differs" in details and "sealed one is used" in details


BASE_TESTS = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
PYTEST = "python -m pytest -q -p no:cacheprovider"
STOP_EARLY = (
    "import pytest\n\n\ndef test_ready():\n    assert True\n\n\n"
    "def test_done():\n    pytest.exit('all checks done', returncode=0)\n"
)


def test_an_empty_base_collection_written_into_relays_cache_is_not_trusted(
    make_repo, write_script, relay_run
) -> None:
    """The model writes the cache file of the base commit's collection for the deliverable's
    command with no test in it, then stops pytest before the failing base test runs: the
    audit must still name the base test that did not run."""
    repo = make_repo(
        {**BASE_TESTS},
        config={
            "sandbox": {"mode": "off"},
            "tools": {"protected_paths": ["tests/test_calc.py"]},
            "deliverables": [{"command": PYTEST, "timeout_s": 60}],
        },
    )
    base = git(repo, "rev-parse", "HEAD").strip()
    name = f"{base}-{hashlib.sha256(PYTEST.encode()).hexdigest()[:16]}.json"
    cache = state_dir(repo) / "audit-base" / name
    plant = _python(
        "import json, os\n"
        f"os.makedirs({str(cache.parent)!r}, exist_ok=True)\n"
        f"json.dump({{'command': {PYTEST!r}, 'commit': {base!r}, 'ids': []}}, "
        f"open({str(cache)!r}, 'w'))"
    )
    script = write_script(
        [
            respond(call("shell", command=plant), call("write_file", path="tests/test_aaa.py",
                                                          content=STOP_EARLY)),
            complete(),
            respond(text="stop"),
        ]
    )  # fmt: skip
    _code, data, _ = relay_run(repo, script, "Fix add().", "--max-rounds", "1")
    assert data["status"] != "complete", data
    evidence = " ".join(c["evidence"] for c in data["audit"]["checks"] if not c["passed"])
    assert "tests/test_calc.py::test_add" in evidence and "did not run" in evidence, evidence
    planted = json.loads(cache.read_text())
    assert planted["ids"] == ["tests/test_calc.py::test_add"] and "seal" in planted


# ---------------------------------------------------------------------- across machines


def _ci_job(make_repo, write_script, relay_run) -> Path:
    """Job 1 on machine A (key from the CI secret): the goal stops at its round limit, its
    state sealed on the branch."""
    repo = make_repo(config=DONE)
    script = write_script(
        [respond(call("write_file", path="a.txt", content="a")), respond(handoff("a written"))]
    )
    _, result, _ = relay_run(repo, script, GOAL, "--branch", "relay/ci", "--max-rounds", "1")
    assert result["status"] == "limit_reached", result
    return repo


def _new_machine(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Machine B: another HOME (no key file of A's) and no state folder."""
    home = tmp_path / name
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    shutil.rmtree(state_dir(repo))
    git(repo, "checkout", "-q", "main")


FINISH = [respond(call("write_file", path="done.txt", content="real work\n")), complete()]


def test_a_state_sealed_with_the_ci_key_continues_on_a_new_machine(
    make_repo, write_script, relay_run, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("RELAY_STATE_KEY", KEY)
    repo = _ci_job(make_repo, write_script, relay_run)
    seal = json.loads(git(repo, "show", "relay/ci:.relay/goal.json"))["seal"]
    assert seal["alg"] == "HMAC-SHA256" and KEY not in json.dumps(seal)
    _new_machine(repo, tmp_path, monkeypatch, "machine-b")
    code, data, err = relay_run(repo, write_script(FINISH), None, "--branch", "relay/ci")
    assert code == 0 and data["status"] == "complete", err
    assert "imported" in [e["kind"] for e in data["events"]]
    assert not (tmp_path / "machine-b" / ".config" / "relay" / "state.key").exists()


@pytest.mark.parametrize("how", ["forged", "other_key", "unsealed"])
def test_a_forged_state_is_refused_on_a_new_machine(
    make_repo, write_script, relay_run, run_relay, tmp_path, monkeypatch, how
) -> None:
    monkeypatch.setenv("RELAY_STATE_KEY", KEY)
    repo = _ci_job(make_repo, write_script, relay_run)
    git(repo, "checkout", "-q", "relay/ci")
    path = repo / ".relay" / "goal.json"
    state = json.loads(path.read_text())
    if how == "forged":
        state["goal"]["deliverables"] = [{"file": "README.md"}]
    elif how == "unsealed":
        del state["seal"]
    path.write_text(json.dumps(state))
    git(repo, "commit", "-qam", "the goal state, changed")
    _new_machine(repo, tmp_path, monkeypatch, "machine-b")
    if how == "other_key":
        monkeypatch.setenv("RELAY_STATE_KEY", "another-machines-key-" + "x" * 20)
    argv = ["run", "--repo", repo, "--branch", "relay/ci", "--json"]
    code, _, err = run_relay([*argv, "--model", f"scripted:{write_script(FINISH)}"])
    assert code == 1 and "Traceback" not in err, err
    said = " ".join(err.split())
    assert ".relay/goal.json on branch relay/x".replace("relay/x", "relay/ci") in said, said
    why = {
        "forged": "does not match its contents",
        "other_key": "sealed with another key",
        "unsealed": "not sealed by relay",
    }[how]
    assert why in said, said
    assert ("RELAY_STATE_KEY" in said) == (how != "forged"), said  # a key cannot fix a forgery
    assert not (repo / "done.txt").exists()
    assert "another-machines-key" not in said
    git(repo, "checkout", "-q", "relay/ci")
    code, _, err = run_relay(["status", "--repo", repo])
    assert code == 0 and why in " ".join(err.split()), err  # relay status says why, too


def test_a_batch_does_not_report_a_forged_complete_branch_as_done(
    make_repo, tmp_path, write_script, run_relay
) -> None:
    """A retried batch task reports a goal its branch carries as ``complete`` without running
    it: only when relay sealed that goal state. Here whoever pushed the branch marked it
    complete; the task runs, and the audit decides."""
    import yaml

    repo = make_repo()
    stop = write_script([respond(call("update_goal", status="needs_user_input", summary="?",
                                      question="Which d?"))])  # fmt: skip
    batch = tmp_path / "goals.yaml"
    entry = {"goal": "Write d.txt.", "name": "d", "model": f"scripted:{stop}"}
    batch.write_text(yaml.safe_dump([entry]))
    code, _, err = run_relay(["batch", batch, "--repo", repo, "--json"])
    assert code == 2, err
    git(repo, "checkout", "-q", "relay/batch-d")
    path = repo / ".relay" / "goal.json"
    state = json.loads(path.read_text())
    state["goal"].update(status="complete", reason="complete")
    path.write_text(json.dumps(state))
    git(repo, "commit", "-qam", "done, says who")
    git(repo, "checkout", "-q", "main")
    finish = write_script([respond(call("write_file", path="d.txt", content="d")), complete()])
    batch.write_text(yaml.safe_dump([{**entry, "model": f"scripted:{finish}"}]))
    code, out, err = run_relay(["batch", batch, "--repo", repo, "--json"])
    [row] = json.loads(out.splitlines()[-1])["goals"]
    assert "already" not in (row["message"] or ""), row
    assert row["result"] is not None, row  # relay ran the goal
