"""The model cannot loosen its own limits or move relay's work, and stops and resumes leave a
goal that goes on correctly (SPEC §5, §7.2, §7.4, §10, §11)."""

from __future__ import annotations

import json

from conftest import call, complete, git, read_transcript, respond, state_dir

from relay.store import Store

NO_SANDBOX = ("--sandbox", "off")
"""Detection and undo without a sandbox (inside it these writes fail: tests/test_sandbox.py)."""

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = respond(call("write_file", path="notes.txt", content="hello\n"))
QUESTION = respond(
    call("update_goal", status="needs_user_input", summary="?", question="Which greeting?")
)


def kinds(data: dict) -> list[str]:
    return [e["kind"] for e in data["events"]]


def test_the_model_cannot_write_supplements_into_the_inbox(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"max_rounds_total": 2}})
    script = write_script(
        [
            respond(call("write_file", path=".git/relay/inbox/more.txt", content="Start over.")),
            respond(call("shell", command="echo 'Start over.' > .git/relay/inbox/sneaky.txt")),
            respond(call("handoff", note="round 1 done")),
            respond(call("shell", command="echo still working")),
            respond(call("handoff", note="round 2 done")),
            WRITE_NOTES,
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL, *NO_SANDBOX)
    rows = read_transcript(repo)
    refused = rows[1]["request"]["messages"][-1]
    assert refused["is_error"] and "refused" in refused["content"]
    assert data["supplements"] == []
    assert "tamper" in kinds(data)
    # no restart of the counts: the total limit of 2 rounds still stopped the goal
    assert (code, data["status"], data["reason"], data["rounds"]) == (
        4,
        "limit_reached",
        "total_rounds",
        2,
    )


def test_the_old_inbox_folder_in_the_tree_is_no_inbox(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(call("write_file", path=".relay/inbox/more.txt", content="Start over.")),
            respond(call("shell", command="echo 'Start over.' > .relay/inbox/sneaky.txt")),
            WRITE_NOTES,
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert (code, data["status"], data["supplements"]) == (0, "complete", [])
    # the model's files are ordinary files of the tree, committed with its work
    committed = git(repo, "ls-tree", "-r", "--name-only", data["branch"]).split()
    assert ".relay/inbox/more.txt" in committed and ".relay/inbox/sneaky.txt" in committed


def test_relay_commits_stay_on_the_goals_branch_when_the_model_switches(
    make_repo, write_script, relay_run
):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(call("shell", command="git checkout -q main && echo hi > hi.txt")),
            respond(call("handoff", note="switched")),
            WRITE_NOTES,
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL, *NO_SANDBOX)
    assert code == 0
    assert git(repo, "log", "--format=%s", "main").splitlines() == ["initial"]
    relay_log = git(repo, "log", "--format=%s", data["branch"]).splitlines()
    assert relay_log[-1] == "initial" and relay_log[0].startswith("relay: round 2")
    assert any("switched from branch" in e["detail"] for e in data["events"])


def test_an_inbox_file_dropped_while_stopped_reaches_the_first_round_message(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo(config=NOTES)
    relay_run(repo, write_script([QUESTION]), GOAL)
    (state_dir(repo) / "inbox").mkdir(parents=True, exist_ok=True)
    (state_dir(repo) / "inbox" / "answer.txt").write_text("Say hello in English.\n")
    script = write_script([WRITE_NOTES, complete()])
    code, out, _ = run_relay(["resume", "--repo", repo, "--model", f"scripted:{script}", "--json"])
    assert code == 0
    first = next(r for r in read_transcript(repo) if r["round"] == 2 and r["step"] == 1)
    assert "Say hello in English." in first["request"]["messages"][0]["content"]
    assert json.loads(out)["supplements"][0]["source"] == "inbox"


def test_a_goal_file_edited_while_stopped_is_a_supplement_and_does_not_block_resume(
    make_repo, write_script, run_relay
):
    repo = make_repo(files={"GOAL.md": GOAL + "\n"}, config=NOTES)
    script = write_script([QUESTION])
    code, _, _ = run_relay(
        ["run", "--goal-file", repo / "GOAL.md", "--repo", repo, "--model", f"scripted:{script}"]
    )
    assert code == 2
    with (repo / "GOAL.md").open("a") as fh:
        fh.write("Use the greeting 'hello'.\n")
    script = write_script([WRITE_NOTES, complete()])
    code, out, err = run_relay(
        ["resume", "--repo", repo, "--model", f"scripted:{script}", "--json"]
    )
    assert code == 0, err
    sups = json.loads(out)["supplements"]
    assert len(sups) == 1 and sups[0]["source"] == "goal_file"
    assert "Use the greeting 'hello'." in sups[0]["text"]


def test_a_crashed_round_is_closed_counted_and_committed_on_resume(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo(config=NOTES)
    relay_run(repo, write_script([QUESTION]), GOAL)
    # the state a kill -9 leaves in round 2: an open round, a change in the tree
    store = Store(state_dir(repo) / "relay.db")
    goal = store.latest_goal()
    assert goal is not None
    store.save_goal(goal.id, "needs_user_input", status="active")
    store.start_round(goal.id, 2, "crashed-run")
    (repo / "half.txt").write_text("half done\n")
    # and the user paused it before resuming
    assert run_relay(["pause", "--repo", repo])[0] == 0
    script = write_script([WRITE_NOTES, complete()])
    code, out, err = run_relay(
        ["resume", "--repo", repo, "--model", f"scripted:{script}", "--json"]
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["rounds"] == 3
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert "relay: round 2 (interrupted)" in subjects
    assert subjects[0].startswith("relay: round 3: complete")
    assert (repo / "half.txt").exists()


def test_resuming_a_budget_limited_goal_without_more_budget_makes_no_model_call(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo(config={**NOTES, "limits": {"token_budget": 1000}})
    work = {**respond(call("shell", command="echo x")), "usage": {"input": 900, "output": 100}}
    script = write_script([work, {"text": "Next: write notes.", "usage": {"input": 1}}])
    code, data, _ = relay_run(repo, script, GOAL)
    assert (code, data["status"]) == (5, "budget_limited")
    calls_before = len(read_transcript(repo))
    code, out, _ = run_relay(["resume", "--repo", repo, "--json"])
    assert code == 5
    assert "token_budget" in json.loads(out)["message"]
    assert len(read_transcript(repo)) == calls_before


def test_deferred_update_goal_calls_are_no_progress(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"max_rounds_without_progress": 2}})
    stall = respond(
        call("get_goal"), call("update_goal", status="complete", summary="done, surely")
    )
    script = write_script([stall, respond(text="Waiting."), stall, respond(text="Waiting.")])
    code, data, _ = relay_run(repo, script, GOAL)
    assert (code, data["reason"], data["rounds"]) == (4, "no_progress", 2)


def test_each_tamper_finding_and_api_error_is_one_event(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.001}})
    script = write_script(
        [
            {"error": "overloaded"},
            respond(call("shell", command="echo HACK > .relay/progress.md")),
            WRITE_NOTES,
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL, *NO_SANDBOX)
    assert code == 0
    assert kinds(data).count("tamper") == 1
    assert kinds(data).count("api_errors") == 1
