"""Edge cases of CI use found in review: what the branch carries, remote-only branches, bad
inputs, and outputs CI systems must be able to read."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml
from conftest import (
    GIT_EMAIL,
    GIT_NAME,
    call,
    complete,
    git,
    respond,
    sealed_goal_state,
    state_dir,
)

NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = respond(call("write_file", path="notes.txt", content="hello\n"))
QUESTION = respond(
    call("update_goal", status="needs_user_input", summary="?", question="Which greeting?")
)
GOAL = "Create notes.txt saying hello."


def remote_with_goal(tmp_path: Path, write_script, run_relay) -> tuple[Path, Path]:
    """A bare remote whose branch relay/ci carries an open goal (needs_user_input)."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    seed = clone(remote, tmp_path / "seed")
    (seed / "relay.yaml").write_text(yaml.safe_dump(NOTES))
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "initial")
    git(seed, "push", "-q", "origin", "main")
    job = clone(remote, tmp_path / "job1")
    script = write_script([QUESTION])
    code, _, _ = run_relay(
        ["run", GOAL, "--repo", job, "--branch", "relay/ci", "--push", "--model",
         f"scripted:{script}"]
    )  # fmt: skip
    assert code == 2
    return remote, job


def clone(remote: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(where)], check=True)
    git(where, "config", "user.name", GIT_NAME)
    git(where, "config", "user.email", GIT_EMAIL)
    return where


def edit_goal_state(job: Path, change) -> None:
    """Commit and push the goal state as ``change`` leaves it, sealed with the key the jobs
    share (a writer who holds it: its values are still checked)."""
    git(job, "checkout", "-q", "relay/ci")
    path = job / ".relay" / "goal.json"
    state = json.loads(path.read_text())
    change(state)
    path.write_text(sealed_goal_state(state))
    git(job, "commit", "-qam", "edit the goal state")
    git(job, "push", "-q", "origin", "relay/ci")


def test_a_goal_active_on_the_branch_does_not_commit_a_fresh_clones_files(
    tmp_path, write_script, run_relay
):
    remote, job = remote_with_goal(tmp_path, write_script, run_relay)
    edit_goal_state(job, lambda s: s["goal"].update(status="active"))
    fresh = clone(remote, tmp_path / "fresh")
    (fresh / "stray.txt").write_text("not the agent's\n")
    code, _, err = run_relay(
        ["run", "--repo", fresh, "--branch", "relay/ci", "--model",
         f"scripted:{write_script([WRITE_NOTES, complete()])}"]
    )  # fmt: skip
    assert code == 1 and "stray.txt" in err
    assert "interrupted" not in git(remote, "log", "--format=%s", "relay/ci")


def test_a_corrupt_goal_state_is_a_clear_error_and_imports_nothing(
    tmp_path, write_script, run_relay
):
    remote, job = remote_with_goal(tmp_path, write_script, run_relay)
    edit_goal_state(job, lambda s: s["goal"].update(rounds="two"))
    fresh = clone(remote, tmp_path / "fresh")
    args = ["run", "--repo", fresh, "--branch", "relay/ci", "--model",
            f"scripted:{write_script([WRITE_NOTES, complete()])}"]  # fmt: skip
    code, _, err = run_relay(args)
    assert code == 1 and "goal.json" in err and "goal.rounds" in err
    assert "Traceback" not in err
    db = state_dir(fresh) / "relay.db"
    if db.exists():  # nothing half-imported
        from relay.store import Store

        assert Store(db).latest_goal() is None


def test_a_branch_only_on_the_remote_is_built_on(tmp_path, write_script, run_relay):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    seed = clone(remote, tmp_path / "seed")
    (seed / "relay.yaml").write_text(yaml.safe_dump(NOTES))
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "initial")
    git(seed, "push", "-q", "origin", "main")
    git(seed, "checkout", "-q", "-b", "feature/x")
    (seed / "feature.txt").write_text("feature work\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "feature work")
    git(seed, "push", "-q", "origin", "feature/x")
    fresh = clone(remote, tmp_path / "fresh")
    script = write_script([WRITE_NOTES, complete()])
    code, out, _ = run_relay(
        ["run", GOAL, "--repo", fresh, "--branch", "feature/x", "--push", "--model",
         f"scripted:{script}", "--json"]
    )  # fmt: skip
    assert code == 0
    assert not [e for e in json.loads(out)["events"] if e["kind"] == "push_failed"]
    subjects = git(remote, "log", "--format=%s", "feature/x").splitlines()
    assert "feature work" in subjects and subjects[0].startswith("relay: round 1: complete")


def test_a_failed_push_shows_in_the_summary_and_the_junit_report(
    make_repo, write_script, run_relay, tmp_path
):
    repo = make_repo(config=NOTES)  # no remote at all: every push fails
    junit = tmp_path / "audit.xml"
    code, out, err = run_relay(
        ["run", GOAL, "--repo", repo, "--push", "--model",
         f"scripted:{write_script([WRITE_NOTES, complete()])}", "--junit", junit, "--json"]
    )  # fmt: skip
    data = json.loads(out)
    assert code == 0 and any(e["kind"] == "push_failed" for e in data["events"])
    summary = (Path(data["run_dir"]) / "summary.md").read_text()
    assert "not pushed** (1 failed push)" in summary
    # the end of the run says it too, not only a progress line that scrolled away
    end = err.rsplit("complete after", 1)[1]
    assert "warning: the branch was not pushed (1 failed push); the work is only in this" in end
    push = [c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "push"]
    assert push and push[0].find("failure") is not None


def test_junit_stays_well_formed_with_colour_codes_in_the_evidence(
    make_repo, write_script, run_relay, tmp_path
):
    repo = make_repo(
        config={"deliverables": [{"command": "printf '\\033[31mFAIL\\033[0m\\001\\n'; exit 1"}]}
    )
    junit = tmp_path / "audit.xml"
    script = write_script([WRITE_NOTES, complete()] + [respond(text="I give up.")] * 5)
    run_relay(["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--junit", junit])
    root = ET.parse(junit).getroot()  # must parse
    failures = [f.text or "" for f in root.iter("failure")]
    assert any("FAIL" in f for f in failures) and not any("\x1b" in f for f in failures)


def test_resuming_with_the_budget_spent_leaves_the_tree_clean(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo(config={**NOTES, "limits": {"token_budget": 1000}})
    work = {**respond(call("shell", command="echo x")), "usage": {"input": 900, "output": 100}}
    relay_run(repo, write_script([work, {"text": "Next: notes.", "usage": {"input": 1}}]), GOAL)
    assert run_relay(["resume", "--repo", repo])[0] == 5
    assert git(repo, "status", "--short") == ""
    script = write_script([WRITE_NOTES, complete()])
    code, _, err = run_relay(
        ["resume", "--repo", repo, "--token-budget", "100000", "--model", f"scripted:{script}"]
    )
    assert code == 0, err


def test_a_batch_with_a_bad_entry_is_refused_up_front(make_repo, tmp_path, run_relay):
    repo = make_repo()
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        yaml.safe_dump([{"goal": "A.", "name": "a"}, {"goal": "B.", "time_budget": "abc"}])
    )
    code, _, err = run_relay(["batch", batch, "--repo", repo])
    assert code == 1 and "time_budget" in err and "Traceback" not in err
    assert git(repo, "branch", "--list", "relay/batch-*") == ""


def test_relay_audit_on_another_branch_is_not_stored_as_the_goals(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo(config=NOTES)
    relay_run(repo, write_script([QUESTION]), GOAL)
    git(repo, "checkout", "-q", "main")
    code, _, _ = run_relay(["audit", "--repo", repo])
    assert code == 1
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    assert json.loads(out)["audit"] is None


def test_a_push_that_failed_then_went_through_is_no_warning(
    make_repo, write_script, run_relay, tmp_path
):
    """Each round pushes the branch: a failure of an earlier round (here: the run before the
    remote was added) is repaired by a later push, and the end of the run, summary.md and the
    JUnit report must not say that the branch was not pushed."""
    repo = make_repo(config=NOTES)  # no remote yet: the first run's push fails
    first = write_script([respond(call("handoff", note="looked around"))])
    code, out, _ = run_relay(
        ["run", GOAL, "--repo", repo, "--push", "--max-rounds", "1", "--model",
         f"scripted:{first}", "--json"]
    )  # fmt: skip
    assert any(e["kind"] == "push_failed" for e in json.loads(out)["events"])
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    junit = tmp_path / "audit.xml"
    code, out, err = run_relay(
        ["resume", "--repo", repo, "--push", "--max-rounds", "3", "--junit", junit, "--model",
         f"scripted:{write_script([WRITE_NOTES, complete()])}", "--json"]
    )  # fmt: skip
    data = json.loads(out)
    assert code == 0 and data["status"] == "complete", err
    branch = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    assert git(remote, "rev-parse", branch) == git(repo, "rev-parse", "HEAD")  # pushed
    assert "not pushed" not in err
    assert "not pushed" not in (Path(data["run_dir"]) / "summary.md").read_text()
    push = [c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "push"]
    assert not push or push[0].find("failure") is None
