"""Statements of the README's "Using it" and "Exit codes and outputs" sections that no other
test proved (issue 13, "Done when"): each test runs the command as a user would, with the
scripted model, and asserts what the user sees."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import call, complete, flat, git, load_json, read_transcript, respond

README = Path(__file__).resolve().parent.parent / "README.md"
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = call("write_file", path="notes.txt", content="hello\n")


def ask(question: str) -> dict:
    return respond(call("update_goal", status="needs_user_input", summary="?", question=question))


def user_messages(row: dict) -> str:
    return "\n".join(m["content"] for m in row["request"]["messages"] if m["role"] == "user")


def test_unattended_answers_at_most_auto_replies_questions_then_asks(
    make_repo, write_script, relay_run
):
    """README: `--unattended` answers questions automatically, at most `limits.auto_replies`
    times; the next question stops the goal with exit 2."""
    repo = make_repo(config={**NOTES, "limits": {"auto_replies": 2}})
    script = write_script([ask("Tabs?"), ask("Spaces?"), ask("Which, really?")])
    code, data, err = relay_run(repo, script, "Write notes.", "--unattended")
    assert (code, data["status"], data["question"]) == (2, "needs_user_input", "Which, really?")
    replies = [e for e in data["events"] if e["kind"] == "auto_reply"]
    assert [e["detail"] for e in replies] == ["Tabs?", "Spaces?"]
    assert flat(err).count("automatic reply") == 2
    rows = read_transcript(repo)
    assert "automatic reply" in rows[1]["request"]["messages"][-1]["content"]


def test_unattended_lets_the_goal_go_on_to_complete(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script([ask("Tabs?"), respond(WRITE_NOTES), complete()])
    code, data, _ = relay_run(repo, script, "Write notes.", "--unattended")
    assert (code, data["status"]) == (0, "complete")


def test_an_answer_by_say_reaches_the_model_after_resume_and_the_newest_is_marked(
    make_repo, write_script, run_relay
):
    """README: when a goal stops with needs_user_input, answer with `relay say` and `relay
    resume`; every later round message holds the supplements after the goal, the newest
    marked, and says that the newest wins."""
    repo = make_repo(config=NOTES)
    script = write_script([ask("Which greeting?"), respond(WRITE_NOTES), complete()])
    args = ["run", "Write notes.", "--repo", repo, "--model", f"scripted:{script}"]
    code, _, err = run_relay(args)
    assert code == 2 and "Which greeting?" in err
    assert 'Answer with `relay say "…"`, then `relay resume`' in err
    for text in ("Say hi.", "No: say hello."):
        code, out, _ = run_relay(["say", text, "--repo", repo])
        assert code == 0 and "added to goal" in out + _
    code, out, err = run_relay(["resume", "--repo", repo, "--json"])
    assert (code, load_json(out)["status"]) == (0, "complete"), err
    message = user_messages(read_transcript(repo)[1])
    goal_at = message.index("Write notes.")
    first, second = message.index("Say hi."), message.index("No: say hello.")
    assert goal_at < first < second
    headers = [line for line in message.splitlines() if line.startswith("<<<USER SUPPLEMENT")]
    assert len(headers) == 2, headers
    assert "newest" not in headers[0] and headers[1].endswith(", say, newest)")
    assert "the newest wins" in flat(message)


def test_log_of_a_named_run_shows_that_run(make_repo, write_script, run_relay):
    """README: `relay log [RUN_ID]`: a run's events, by its id (default: the latest run)."""
    repo = make_repo(config=NOTES)
    first = write_script([respond(call("shell", command="echo first-run"))])
    code, out, _ = run_relay(
        ["run", "Write notes.", "--repo", repo, "--model", f"scripted:{first}", "--json"]
    )
    first_run = Path(load_json(out)["run_dir"]).name
    second = write_script([respond(WRITE_NOTES), complete()])
    code, out, _ = run_relay(["resume", "--repo", repo, "--model", f"scripted:{second}", "--json"])
    assert code == 0
    second_run = Path(load_json(out)["run_dir"]).name
    code, named, _ = run_relay(["log", first_run, "--repo", repo])
    assert code == 0
    assert f"run_started: run {first_run}" in named and "echo first-run" in named
    assert second_run not in named and "write_file notes.txt" not in named
    code, latest, _ = run_relay(["log", "--repo", repo])
    assert f"run_started: run {second_run}" in latest and "echo first-run" not in latest
    code, _, err = run_relay(["log", "20990101-000000-0000", "--repo", repo])
    assert code == 1 and "no run with id 20990101-000000-0000" in err


def test_status_json_is_the_runs_object_with_running_and_inbox(
    make_repo, write_script, relay_run, run_relay
):
    """README, "Exit codes and outputs": `relay status --json` prints the run's object for the
    current goal, with `running` and `inbox` (and without the run's `run_dir`)."""
    repo = make_repo(config=NOTES)
    code, ran, _ = relay_run(repo, write_script([respond(WRITE_NOTES), complete()]), "Notes.")
    assert code == 0
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    status = json.loads(out)
    assert set(status) - set(ran) == {"running", "inbox"}
    assert set(ran) - set(status) == {"run_dir"}
    for key in ("goal_id", "status", "rounds", "tokens", "limits", "audit", "commits", "model"):
        assert status[key] == ran[key], key
    tokens = status["tokens"]
    assert tokens["counted"] == tokens["uncached_input"] + tokens["cache_write"] + tokens["output"]
    assert status["running"] is False and status["inbox"].endswith("inbox")


def test_quiet_leaves_stderr_to_errors(make_repo, write_script, run_relay):
    repo = make_repo(config=NOTES)
    script = write_script([respond(WRITE_NOTES), complete()])
    args = ["run", "Notes.", "--repo", repo, "--model", f"scripted:{script}", "--json", "-q"]
    code, out, err = run_relay([*args, "--max-rounds", "0"])
    assert code == 1 and "max_rounds_total = 0: must be greater than 0" in err and out == ""
    code, out, err = run_relay(args)
    assert (code, json.loads(out)["status"], err) == (0, "complete", "")


def test_a_rejected_and_an_accepted_claim_are_said_once_in_the_events(
    make_repo, write_script, relay_run
):
    repo = make_repo(config=NOTES)
    script = write_script([complete("too early"), respond(WRITE_NOTES), complete()])
    code, data, _ = relay_run(repo, script, "Notes.")
    assert code == 0
    claims = [e["detail"] for e in data["events"] if e["kind"] == "update_goal"]
    assert claims[0].startswith("complete: rejected: the completion audit failed"), claims
    assert claims[-1] == "complete: accepted: the audit passed; the goal is complete."


def test_resume_allow_dirty_carries_changes_made_while_the_goal_was_open(
    make_repo, write_script, run_relay
):
    """README: `relay resume --allow-dirty` commits the user's changes on their own; made
    while the goal is open, they count as changes since the goal started (unlike the changes
    `relay run --allow-dirty` finds before the goal starts)."""
    repo = make_repo(config={"deliverables": [{"changed": "notes.txt"}]})
    script = write_script([ask("Shall I?"), complete("the user wrote it")])
    code, _, _ = run_relay(["run", "Notes.", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 2
    (repo / "notes.txt").write_text("the user's notes\n")
    code, out, err = run_relay(["resume", "--repo", repo, "--allow-dirty", "--json"])
    assert (code, load_json(out)["status"]) == (0, "complete"), err
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert subjects[1] == "relay: uncommitted changes carried into the goal"


def test_the_readme_states_what_these_tests_prove():
    text = flat(README.read_text(encoding="utf-8"))
    assert "at most `limits.auto_replies` times" in text
    assert "they count as changes since the goal started" in text


def test_run_flags_set_the_goals_limits(make_repo, write_script, relay_run):
    """README: `relay run "…" --max-rounds 20 --token-budget 2000000 --time-budget 8h`."""
    repo = make_repo(config=NOTES)
    script = write_script([respond(WRITE_NOTES), complete()])
    flags = ["--max-rounds", "20", "--token-budget", "2000000", "--time-budget", "8h"]
    code, data, err = relay_run(repo, script, "Notes.", *flags)
    assert code == 0
    limits = data["limits"]
    assert (limits["max_rounds_total"], limits["token_budget"]) == (20, 2_000_000)
    assert limits["time_budget"] == 8 * 3600
    assert "round 1 (1 of 20)" in err


def test_force_tool_choice_forces_a_tool_call_on_every_step(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script([respond(WRITE_NOTES), complete()])
    code, _, _ = relay_run(repo, script, "Notes.", "--force-tool-choice")
    assert code == 0
    assert [r["request"]["tool_choice"] for r in read_transcript(repo)] == ["required"] * 2


def test_status_shows_the_counters_and_the_latest_events(
    make_repo, write_script, relay_run, run_relay
):
    """README: `relay status`: the current goal: counters, model, limits, latest events."""
    repo = make_repo(config=NOTES)
    steps = [respond(call("shell", command="echo hi")), respond(text="Hmm.")]
    script = write_script({"responses": steps, "when_exhausted": "repeat_last"})
    code, data, _ = relay_run(repo, script, "Notes.", "--max-rounds", "2")
    assert code == 4
    code, out, _ = run_relay(["status", "--repo", repo])
    assert code == 0
    assert f"goal {data['goal_id']} · limit_reached" in out
    assert "rounds 2 · no-progress streak 1 · blocked reports 0 · branch relay/" in out
    assert "round 2 · round_ended: " in out and "round - · goal_started: " in out


def test_report_takes_a_goal_id(make_repo, write_script, relay_run, run_relay):
    """README: `relay report [RUN_ID|GOAL_ID]`: an earlier goal by its id, not only the current."""
    repo = make_repo(config=NOTES)
    code, first, _ = relay_run(repo, write_script([respond(WRITE_NOTES), complete()]), "First.")
    assert code == 0
    git(repo, "switch", "-q", "main")
    code, second, _ = relay_run(repo, write_script([respond(WRITE_NOTES), complete()]), "Second.")
    assert code == 0
    code, out, _ = run_relay(["report", first["goal_id"], "--repo", repo])
    assert code == 0
    assert f"# relay report: goal {first['goal_id']}" in out and "> First." in out
    code, out, _ = run_relay(["report", "--repo", repo])
    assert f"# relay report: goal {second['goal_id']}" in out


def test_batch_model_flag_is_for_goals_naming_none(make_repo, write_script, tmp_path, run_relay):
    repo = make_repo()
    own = write_script([respond(call("write_file", path="a.txt", content="a")), complete()])
    shared = write_script([respond(call("write_file", path="b.txt", content="b")), complete()])
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        json.dumps(
            [
                {"goal": "Write a.txt.", "name": "a", "model": f"scripted:{own}"},
                {"goal": "Write b.txt.", "name": "b"},
            ]
        )
    )
    code, out, _ = run_relay(
        ["batch", batch, "--repo", repo, "--model", f"scripted:{shared}", "--json"]
    )
    assert code == 0, out
    assert git(repo, "show", "relay/batch-a:a.txt") == "a"
    assert git(repo, "show", "relay/batch-b:b.txt") == "b"


def test_status_shows_where_the_state_is(make_repo, write_script, relay_run, run_relay):
    """README: relay's state lives in `.git/relay/`, or under `state_dir`; `relay status`
    shows where."""
    for name, config, where in (
        ("plain", NOTES, Path(".git") / "relay"),
        ("configured", {**NOTES, "state_dir": ".relay-state"}, Path(".relay-state")),
    ):
        repo = make_repo(config=config, name=name)
        code, _, _ = relay_run(repo, write_script([respond(WRITE_NOTES), complete()]), "Notes.")
        assert code == 0
        _, out, _ = run_relay(["status", "--repo", repo])
        assert f"state folder: {repo / where} (the store and the run folders)" in out
