"""Resuming keeps what the goal was started with; usage mistakes get clear answers."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import call, complete, git, read_transcript, respond, state_dir

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = respond(call("write_file", path="notes.txt", content="hello\n"))
TALK = respond(text="Thinking about it.")


def test_resume_keeps_the_goals_model_and_limits(make_repo, write_script, run_relay):
    """SPEC §7.2: the effective limits are stored with the goal; resume uses them (and the
    goal's model) without the flags being repeated."""
    repo = make_repo(config=NOTES)
    script = write_script([TALK, TALK, WRITE_NOTES, complete()])
    code, out, _ = run_relay(
        [
            "run",
            GOAL,
            "--repo",
            repo,
            "--model",
            f"scripted:{script}",
            "--max-no-progress",
            "2",
            "--json",
        ]
    )
    data = json.loads(out)
    assert (code, data["reason"], data["rounds"]) == (4, "no_progress", 2)
    code, out, err = run_relay(["resume", "--repo", repo, "--json"])
    assert code == 0, err
    assert json.loads(out)["status"] == "complete"
    started = [r for r in read_transcript(repo) if r["round"] == 3 and r["step"] == 1]
    assert "Round 1 of 50" in json.dumps(started[0]["request"])


def test_flags_given_on_resume_override_the_stored_limits(make_repo, write_script, run_relay):
    repo = make_repo(config=NOTES)
    script = write_script([TALK, TALK])
    run_relay(
        [
            "run",
            GOAL,
            "--repo",
            repo,
            "--model",
            f"scripted:{script}",
            "--max-no-progress",
            "2",
            "--json",
        ]
    )
    script2 = write_script([TALK, TALK, TALK])
    code, out, _ = run_relay(["resume", "--repo", repo, "--model", f"scripted:{script2}", "--json"])
    # still 2 without progress: the stored limit; the new script came from the flag
    assert (code, json.loads(out)["rounds"]) == (4, 4)


def test_resume_takes_the_no_progress_limit_like_run(make_repo, write_script, run_relay):
    """The limit flags of `run` work on `resume` too (the counts restart there, so a user who
    wants more patience says so on resume)."""
    repo = make_repo(config=NOTES)
    script = write_script([TALK, TALK])
    args = ["--repo", repo, "--model", f"scripted:{script}", "--max-no-progress", "2", "--json"]
    run_relay(["run", GOAL, *args])
    script2 = write_script([TALK] * 3)
    code, _, err = run_relay(
        ["resume", "--repo", repo, "--model", f"scripted:{script2}", "--max-no-progress", "3"]
    )
    assert code == 4, err
    assert "3 rounds in a row" in err


def test_a_paused_runs_summary_says_how_to_continue_once(capsys) -> None:
    from relay.cli.run import _print_summary

    message = "Paused by Ctrl+C. `relay resume` continues the goal."
    tokens = {"counted": 2, "uncached_input": 1, "cache_write": 0, "cached_input": 0, "output": 1}
    data = {"status": "paused", "reason": "user", "rounds": 1, "message": message}
    _print_summary({**data, "tokens": tokens, "branch": "b", "run_dir": "r"})
    err = capsys.readouterr().err
    assert err.count("`relay resume` continues the goal.") == 1


def test_no_model_anywhere_is_a_clear_error_naming_the_flag(make_repo, run_relay):
    repo = make_repo(config=NOTES)
    code, _, err = run_relay(["run", GOAL, "--repo", repo])
    assert code == 1
    assert "--model" in err and "scripted:" in err
    assert not (repo / ".relay").exists()


def test_a_relative_script_path_in_relay_yaml_is_relative_to_the_repository(
    make_repo, write_script, run_relay
):
    repo = make_repo(config=NOTES)
    (repo / "agent.yaml").write_text(Path(write_script([WRITE_NOTES, complete()])).read_text())
    (repo / "relay.yaml").write_text(
        (repo / "relay.yaml").read_text() + "model: scripted:agent.yaml\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "model")
    (repo / "sub").mkdir()
    code, out, err = run_relay(["run", GOAL, "--repo", repo / "sub", "--json"])
    assert code == 0, err
    assert json.loads(out)["status"] == "complete"


def test_allow_dirty_work_is_not_taken_for_the_agents_change(make_repo, write_script, run_relay):
    """The user's uncommitted files are committed on their own before the goal starts, so a
    claim without any work cannot pass the change requirement of the audit (SPEC §9)."""
    repo = make_repo()
    (repo / "wip.txt").write_text("the user's work in progress\n")
    script = write_script([complete("nothing to do"), WRITE_NOTES, complete("notes written")])
    code, out, _err = run_relay(
        ["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--allow-dirty", "--json"]
    )
    data = json.loads(out)
    rows = read_transcript(repo)
    first_claim = rows[0]
    assert len(rows) == 3, "the first claim, with no change by the agent, was rejected"
    assert "changed" in json.dumps(rows[1]["request"]["messages"][-1])
    assert first_claim["response"]["tool_calls"][0]["name"] == "update_goal"
    assert code == 0 and data["status"] == "complete"
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert "relay: uncommitted changes carried into the goal" in subjects
    assert (repo / "wip.txt").read_text() == "the user's work in progress\n"


def test_checklist_evidence_in_prose_does_not_reject_a_true_claim(
    make_repo, write_script, relay_run
):
    repo = make_repo(config=NOTES)
    checklist = [
        {"requirement": "notes", "evidence": "my notes.txt"},
        {"requirement": "style", "evidence": "plain text, node.js style line endings, 1/1 ok"},
        {"requirement": "file", "evidence": "notes.txt"},
    ]
    (repo / "my notes.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a file with a space")
    claim = respond(call("update_goal", status="complete", summary="done", checklist=checklist))
    script = write_script([WRITE_NOTES, claim])
    code, data, _ = relay_run(repo, script, GOAL)
    assert (code, data["status"]) == (0, "complete"), data["audit"]


def test_goal_text_and_goal_file_together_are_refused(make_repo, write_script, run_relay):
    repo = make_repo()
    (repo / "GOAL.md").write_text("Write x.\n")
    script = write_script([complete()])
    code, _, err = run_relay(
        [
            "run",
            "Write y.",
            "--goal-file",
            repo / "GOAL.md",
            "--repo",
            repo,
            "--model",
            f"scripted:{script}",
        ]
    )
    assert code == 1 and "--goal-file" in err and "not both" in err


def test_status_says_when_no_run_is_live_for_an_active_goal(make_repo, write_script, run_relay):
    repo = make_repo(config=NOTES)
    script = write_script([WRITE_NOTES, complete()])
    run_relay(["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--json"])
    # simulate a crashed run: the goal is still active, and nobody holds the lock
    from relay.store import Store

    store = Store(state_dir(repo) / "relay.db")
    goal = store.latest_goal()
    assert goal is not None
    store.save_goal(goal.id, "complete", status="active")
    _, out, _ = run_relay(["status", "--repo", repo, "--json"])
    assert json.loads(out)["running"] is False
    _, out, _ = run_relay(["status", "--repo", repo])
    assert "relay resume" in out


def test_version_and_demo_into_a_new_folder(tmp_path, run_relay):
    code, out, _ = run_relay(["--version"])
    assert code == 0 and out.startswith("goal-relay ")
    target = tmp_path / "new folder" / "demo"
    code, out, err = run_relay(["demo", "--dir", target, "--json"])
    assert code == 0, err
    assert json.loads(out)["status"] == "complete"
    assert target.is_dir()


def test_resume_takes_allow_dirty_like_run(make_repo, write_script, run_relay):
    """SPEC §11, §12: `relay resume` refuses a dirty tree with a message that suggests
    --allow-dirty, and accepts that option: the uncommitted files are committed as the user's
    before the goal continues, so that they are not taken for the agent's change."""
    repo = make_repo(config=NOTES)
    ask = respond(call("update_goal", status="needs_user_input", summary="?", question="Which?"))
    script = write_script([ask, WRITE_NOTES, complete("notes written")])
    code, _, _ = run_relay(["run", GOAL, "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 2
    (repo / "wip.txt").write_text("the user's work while the goal waited\n")
    code, _, err = run_relay(["resume", "--repo", repo, "--json"])
    assert code == 1
    assert "wip.txt" in err and "--allow-dirty" in err
    code, out, err = run_relay(["resume", "--repo", repo, "--allow-dirty", "--json"])
    assert code == 0, err
    assert json.loads(out)["status"] == "complete"
    subjects = dict(line.split(" ", 1) for line in git(repo, "log", "--format=%H %s").splitlines())
    carried = next(sha for sha, s in subjects.items() if "carried into the goal" in s)
    assert git(repo, "show", "--name-only", "--format=", carried).split() == ["wip.txt"]
    assert git(repo, "status", "--porcelain") == ""


def test_resume_keeps_the_goals_mode_and_every_limit(make_repo, write_script, run_relay):
    """README "Using it": a resumed goal keeps the model, mode and limits it was started with
    unless flags say otherwise, and a scripted model goes on where the goal left its script."""
    repo = make_repo(config=NOTES)
    script = write_script([TALK, WRITE_NOTES, complete()])
    flags = ["--mode", "session", "--max-rounds", "1", "--token-budget", "900000"]
    args = ["--repo", repo, "--model", f"scripted:{script}", *flags, "--json"]
    code, out, err = run_relay(["run", GOAL, *args])
    started = json.loads(out)
    assert (code, started["reason"]) == (4, "total_rounds"), err
    code, out, err = run_relay(["resume", "--repo", repo, "--json"])
    resumed = json.loads(out)
    assert (code, resumed["status"]) == (0, "complete"), err
    assert (resumed["mode"], resumed["model"]) == ("session", f"scripted:{script}")
    assert resumed["limits"] == started["limits"]
    assert (resumed["limits"]["max_rounds_total"], resumed["limits"]["token_budget"]) == (
        1,
        900_000,
    )
    assert "round 2 (1 of 1)" in err
