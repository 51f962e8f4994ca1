"""A goal state crafted with hostile values on a goal's branch (SPEC §6, §11, §14).

``relay run --branch B`` on a machine whose store does not know B's goal (a CI job, a batch
worker's fresh clone) continues the goal from ``.relay/goal.json`` committed on B. Anyone who
can push B — or a model that got hold of a push credential — controls that file. relay continues
only a goal state it sealed with this machine's key (tests/test_attacks_branch_state.py); these
tests play a writer who holds that key too (a CI job that shares the secret): each commits a
hostile goal state on B, sealed, and continues it. relay refuses with exit 1 and one line
naming the file, the key and the value; it never crashes, never works on another branch and
never audits from a base commit outside the branch's history.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import call, git, respond, sealed_goal_state, state_dir

BRANCH = "relay/x"


def _stopped_goal(make_repo: Any, write_script: Any, relay_run: Any) -> Path:
    """A repository whose branch ``relay/x`` carries an open goal (stopped at its round
    limit), with this machine's store removed: the next run reads the goal from the branch."""
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    script = write_script(
        [respond(call("write_file", path="a.txt", content="a")), respond(call("handoff", note="x"))]
    )
    _, result, _ = relay_run(repo, script, "Do it.", "--branch", BRANCH, "--max-rounds", "1")
    assert result["status"] == "limit_reached", result
    shutil.rmtree(state_dir(repo))
    return repo


def _commit_goal_state(repo: Path, change: Any) -> None:
    """Commit on ``relay/x`` the goal state as ``change(data)`` leaves it, sealed with this
    machine's key (raw JSON text, unsealed, when it returns a string)."""
    git(repo, "checkout", "-q", BRANCH)
    path = repo / ".relay" / "goal.json"
    data = json.loads(path.read_text())
    text = change(data)
    path.write_text(text if isinstance(text, str) else sealed_goal_state(data))
    git(repo, "commit", "-qam", "hostile goal state")
    git(repo, "checkout", "-q", "main")


def _set(section: str, key: str | None, value: Any) -> Any:
    def change(data: dict[str, Any]) -> None:
        if key is None:
            data[section] = value
        else:
            data[section][key] = value

    return change


HOSTILE = {
    "rounds_beyond_int64": (_set("goal", "rounds", 10**30), "goal.rounds: 1000000000000000000"),
    "audit_round_beyond_int64": (
        _set("audit", None, {"round": 2**63, "passed": True, "checks": []}),
        "audit.round: 9223372036854775808",
    ),
    "digits_beyond_python": (
        lambda data: json.dumps(data).replace('"rounds": 1,', '"rounds": ' + "9" * 5000 + ","),
        "cannot be read (Exceeds the limit",
    ),
    "infinite_cost": (
        lambda data: json.dumps(data).replace('"cost_usd": 0.0', '"cost_usd": Infinity'),
        "goal.cost_usd: inf is not a finite number",
    ),
    "negative_limit": (
        _set("goal", "limits", {"max_rounds_total": -3}),
        "goal.limits: max_rounds_total: Input should be greater than 0 (found -3)",
    ),
    "unknown_deliverable": (
        _set("goal", "deliverables", [{"bogus": 1}]),
        "goal.deliverables: deliverable 1: bogus: Extra inputs are not permitted (found 1)",
    ),
    "goal_file_outside": (
        _set("goal", "goal_file", "../../etc/hostname"),
        "goal.goal_file: '../../etc/hostname' is not a path inside the repository",
    ),
    "base_commit_option": (_set("goal", "base_commit", "--help"), "goal.base_commit"),
    "goal_id_path": (_set("goal", "id", "../../x"), "goal.id"),
    "unknown_status": (_set("goal", "status", "complete-ish"), "goal.status"),
    "another_branch": (
        _set("goal", "branch", "main"),
        "is the goal state of the branch 'main', not of relay/x",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_goal_state_on_the_branch_is_refused(
    make_repo: Any, write_script: Any, relay_run: Any, run_relay: Any, case: str
) -> None:
    repo = _stopped_goal(make_repo, write_script, relay_run)
    change, message = HOSTILE[case]
    _commit_goal_state(repo, change)
    main_before = git(repo, "rev-parse", "main")
    script = write_script([respond(call("write_file", path="b.txt", content="b"))])
    argv = ["run", "--repo", repo, "--branch", BRANCH, "--model", f"scripted:{script}", "--json"]
    code, _, err = run_relay(argv)
    assert code == 1, err
    assert "Traceback" not in err
    assert ".relay/goal.json on branch relay/x" in err and message in " ".join(err.split()), err
    assert git(repo, "rev-parse", "main") == main_before  # nothing committed anywhere
    assert not (repo / "b.txt").exists()


def test_a_base_commit_outside_the_branch_is_refused(
    make_repo: Any, write_script: Any, relay_run: Any, run_relay: Any
) -> None:
    """A later base commit (here one of another branch) would make the audit compare with
    it: tests deleted before it, or protected paths changed before it, would not count."""
    repo = _stopped_goal(make_repo, write_script, relay_run)
    git(repo, "checkout", "-q", "-b", "elsewhere", "main")
    (repo / "other.txt").write_text("other\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "elsewhere")
    other = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    _commit_goal_state(repo, _set("goal", "base_commit", other))
    script = write_script([respond(call("write_file", path="b.txt", content="b"))])
    argv = ["run", "--repo", repo, "--branch", BRANCH, "--model", f"scripted:{script}", "--json"]
    code, _, err = run_relay(argv)
    assert code == 1 and "Traceback" not in err, err
    assert f"names the base commit {other}, which is not in the history of relay/x" in " ".join(
        err.split()
    )


@pytest.mark.parametrize("how", ["config_file", "environment"])
def test_the_settings_a_branch_carries_cannot_turn_off_this_machines_sandbox(
    make_repo: Any,
    write_script: Any,
    relay_run: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    how: str,
) -> None:
    """The goal started with ``--sandbox off`` (relay's goal state keeps that to the machine),
    and whoever can push the branch writes it into the goal state; a CI machine that requires the sandbox (``--config``, or
    ``RELAY_SANDBOX__MODE``) continues the goal in the sandbox: the sandbox is each run's
    choice, not the goal's (a goal state is written by whoever can push the branch)."""
    from sandbox_support import require_bwrap

    require_bwrap()
    repo = make_repo()
    first = write_script(
        [respond(call("write_file", path="a.txt", content="a")), respond(call("handoff", note="x"))]
    )
    extra = ("--branch", BRANCH, "--max-rounds", "1", "--sandbox", "off")
    _, result, _ = relay_run(repo, first, "Do it.", *extra)
    assert result["status"] == "limit_reached" and result["sandbox"] == "off", result
    carried = json.loads(git(repo, "show", f"{BRANCH}:.relay/goal.json"))["goal"]["overrides"]
    assert "sandbox" not in carried  # relay's own goal state keeps it to this machine
    _commit_goal_state(repo, _set("goal", "overrides", {"sandbox": {"mode": "off"}}))  # theirs
    shutil.rmtree(state_dir(repo))  # a fresh machine: the goal comes from the branch
    machine: tuple[str | Path, ...] = ()
    if how == "environment":
        monkeypatch.setenv("RELAY_SANDBOX__MODE", "required")
    else:
        (tmp_path / "ci.yaml").write_text("sandbox:\n  mode: required\n")
        machine = ("--config", tmp_path / "ci.yaml")
    again = write_script([respond(call("shell", command="echo $RELAY_SANDBOX > where.txt"))])
    _, result, _ = relay_run(repo, again, None, "--branch", BRANCH, "--max-rounds", "2", *machine)
    assert result["sandbox"] == "bwrap", result
    assert (repo / "where.txt").read_text().strip() == "bwrap"


def test_a_base_url_a_branch_carries_never_receives_this_machines_key(
    make_repo: Any, run_relay: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A goal state on the branch names a server of whoever pushed the branch as the
    provider's base URL (relay's own never carries it); a CI machine that continues the goal with its own provider settings
    (``--config``) sends its key only to its own server."""
    from relay.testing import FakeProvider

    monkeypatch.setenv("OPENAI_API_KEY", "sk-this-machines-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    work = {
        "responses": [
            respond(call("write_file", path="a.txt", content="a")),
            respond(call("handoff", note="x")),
        ]
    }
    with FakeProvider(work) as theirs:
        argv = ["run", "Do it.", "--repo", repo, "--model", "openai:m", "--json"]
        argv += ["--base-url", theirs.openai_url, "--branch", BRANCH, "--max-rounds", "1"]
        code, _, err = run_relay(argv)
        assert code == 4, err  # the round limit: open, carried by the branch
        shutil.rmtree(state_dir(repo))  # a fresh machine: the goal comes from the branch
        overrides = json.loads(git(repo, "show", f"{BRANCH}:.relay/goal.json"))["goal"]
        assert "base_url" not in overrides["overrides"]  # relay's goal state keeps it here
        _commit_goal_state(repo, _set("goal", "overrides", {"base_url": theirs.openai_url}))
        before = len(theirs.requests)
        with FakeProvider(work) as ours:
            (tmp_path / "ci.yaml").write_text(f"base_url: {ours.openai_url}\n")
            argv = ["run", "--repo", repo, "--branch", BRANCH, "--model", "openai:m"]
            argv += ["--config", tmp_path / "ci.yaml", "--max-rounds", "2", "--json"]
            code, _, err = run_relay(argv)
            assert "Traceback" not in err, err
            assert ours.requests, err  # the machine's own server was asked
        assert len(theirs.requests) == before  # theirs never again


@pytest.mark.parametrize("setting", ["sandbox:\n  mode: off", "base_url: http://theirs.example/v1"])
def test_a_goal_files_front_matter_cannot_set_the_machines_settings(
    make_repo: Any, write_script: Any, run_relay: Any, setting: str
) -> None:
    """A goal file can come with the branch (whoever can push it wrote it), and its front
    matter sits above ``--config``: it may not turn off the sandbox or move the provider."""
    repo = make_repo()
    goal = repo.parent / "GOAL.md"
    goal.write_text(f"---\n{setting}\n---\nDo it.\n")
    script = write_script([respond(call("write_file", path="a.txt", content="a"))])
    argv = ["run", "--goal-file", goal, "--repo", repo, "--model", f"scripted:{script}"]
    code, _, err = run_relay(argv)
    assert code == 1 and "Traceback" not in err, err
    assert "a setting of the machine a run runs on, not of a goal" in " ".join(err.split())
    assert not (repo / "a.txt").exists()


def test_a_goal_file_the_branch_links_outside_the_tree_is_never_read(
    make_repo: Any, write_script: Any, relay_run: Any, run_relay: Any, tmp_path: Path
) -> None:
    """The goal state names as the goal file a symlink committed on the branch, pointing at a
    file of the machine that continues the goal, with a digest that differs: an edited goal
    file is sent to the model as a supplement, so the file behind the link would be."""
    from conftest import read_transcript

    secret = tmp_path / "credentials"
    secret.write_text("aws_secret_access_key = SECRET-OF-THIS-MACHINE\n")
    repo = _stopped_goal(make_repo, write_script, relay_run)
    git(repo, "checkout", "-q", BRANCH)
    (repo / "notes.md").symlink_to(secret)
    path = repo / ".relay" / "goal.json"
    data = json.loads(path.read_text())
    data["goal"]["goal_file"] = "notes.md"
    data["goal"]["goal_file_digest"] = "0" * 64
    path.write_text(sealed_goal_state(data))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a goal file that links out")
    git(repo, "checkout", "-q", "main")
    script = write_script(
        [respond(call("write_file", path="b.txt", content="b")), respond(call("handoff", note="x"))]
    )
    argv = ["run", "--repo", repo, "--branch", BRANCH, "--model", f"scripted:{script}"]
    code, _, err = run_relay([*argv, "--max-rounds", "1", "--json"])
    assert code == 4 and "Traceback" not in err, err  # the goal went on, to its round limit
    assert "SECRET-OF-THIS-MACHINE" not in json.dumps(read_transcript(repo))
    assert "SECRET-OF-THIS-MACHINE" not in git(repo, "log", "-p", "--all")
