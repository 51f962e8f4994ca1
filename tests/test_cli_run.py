"""`relay run` end to end with the scripted model: how runs end (SPEC §7, §12 exit codes) and
how rounds and steps work (SPEC §3, §4, §5, §7.1, §7.3)."""

from __future__ import annotations

import json

import pytest
from conftest import call, complete, git, read_transcript, respond

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}


WRITE_NOTES = call("write_file", path="notes.txt", content="hello\n")


def write_notes() -> dict:
    return respond(WRITE_NOTES)


def tool_results(row: dict) -> list[dict]:
    """The tool-result messages of a transcript row's request."""
    return [m for m in row["request"]["messages"] if m["role"] == "tool"]


def by_round(rows: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(r["round"], []).append(r)
    return out


# --------------------------------------------------------------------------- statuses


def test_complete_exits_0(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    code, data, _ = relay_run(repo, write_script([write_notes(), complete("notes written")]), GOAL)
    assert code == 0
    assert data["status"] == "complete"
    assert data["rounds"] == 1
    assert data["audit"]["passed"] is True
    assert (repo / "notes.txt").read_text() == "hello\n"
    assert len(read_transcript(repo)) == 2


def test_needs_user_input_exits_2_with_the_question(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    question = "Should notes.txt be in English or French?"
    script = write_script(
        [
            respond(
                call(
                    "update_goal", status="needs_user_input", summary="language?", question=question
                )
            )
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 2
    assert data["status"] == "needs_user_input"
    assert data["question"] == question
    assert question in data["message"]
    assert data["rounds"] == 1


def test_blocked_accepted_at_the_third_report_exits_3(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    blocked = respond(
        call("update_goal", status="blocked", summary="no", reason="disk is read-only")
    )
    script = write_script([blocked, blocked, blocked])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 3
    assert data["status"] == "blocked"
    assert data["blocked_reports"] == 3
    assert "disk is read-only" in data["message"]
    rows = read_transcript(repo)
    assert len(rows) == 3
    # The first two reports were rejected with "try another way"; the model saw that.
    for row in rows[1:]:
        result = tool_results(row)[-1]
        assert result["is_error"] is True
        assert "try another way" in result["content"].lower()


def test_no_progress_limit_exits_4_with_exact_notice(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script([{"repeat": 10, "response": {"text": "I am thinking about it."}}])
    code, data, _ = relay_run(repo, script, GOAL, "--max-no-progress", "3")
    assert code == 4
    assert data["status"] == "limit_reached"
    assert data["reason"] == "no_progress"
    assert data["message"] == (
        "Goal stopped: no step was taken in 3 rounds in a row. Say how to continue."
    )
    assert data["rounds"] == 3
    assert data["no_progress_streak"] == 3
    assert len(read_transcript(repo)) == 3


def test_total_rounds_limit_exits_4(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script([{"repeat": 20, "response": {"text": "Still thinking."}}])
    code, data, _ = relay_run(repo, script, GOAL, "--max-rounds", "3", "--max-no-progress", "10")
    assert code == 4
    assert data["status"] == "limit_reached"
    assert data["reason"] == "total_rounds"
    assert data["message"] == (
        "Goal stopped after 3 rounds in total without completion. Say how to continue."
    )
    assert data["rounds"] == 3
    assert len(read_transcript(repo)) == 3


def test_total_rounds_counts_rounds_with_progress(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    work = respond(call("shell", command="echo working"), call("handoff", note="more to do"))
    script = write_script([{"repeat": 10, "response": work}])
    code, data, _ = relay_run(repo, script, GOAL, "--max-rounds=4")
    assert code == 4
    assert (data["status"], data["reason"], data["rounds"]) == ("limit_reached", "total_rounds", 4)
    assert data["no_progress_streak"] == 0


def test_insufficient_quota_fails_without_retry(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    script = write_script([{"error": "insufficient_quota"}, write_notes(), complete()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 7
    assert data["status"] == "failed"
    assert "quota" in data["message"].lower()
    rows = read_transcript(repo)
    assert len(rows) == 1, "an exhausted quota must never be retried"
    assert "error" in rows[0] and "response" not in rows[0]
    assert not (repo / "notes.txt").exists()


def test_auth_error_fails(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    script = write_script([{"error": "auth"}, write_notes(), complete()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 7
    assert data["status"] == "failed"
    assert "api key" in data["message"].lower()
    assert len(read_transcript(repo)) == 1


def test_script_exhausted_fails(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script([write_notes()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 7
    assert data["status"] == "failed"
    assert "exhausted" in data["message"]
    rows = read_transcript(repo)
    assert len(rows) == 2
    assert "response" in rows[0] and "error" in rows[1]
    # The work done before the failure is committed.
    assert git(repo, "show", f"{data['branch']}:notes.txt") == "hello\n"


def test_transient_errors_are_retried_then_work_goes_on(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    script = write_script(
        [{"error": "rate_limit"}, {"error": "overloaded"}, write_notes(), complete()]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    assert data["status"] == "complete"
    rows = read_transcript(repo)
    assert [("error" in r) for r in rows] == [True, True, False, False]
    assert [r["step"] for r in rows] == [1, 1, 1, 2], "a retry repeats the same step"
    api_events = [e for e in data["events"] if "api" in e["kind"]]
    assert len(api_events) >= 2


def test_api_retries_exceeded_fails_as_api_unavailable(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01, "api_retries": 2}})
    script = write_script([{"repeat": 5, "response": {"error": "overloaded"}}, write_notes()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 7
    assert data["status"] == "failed"
    assert data["reason"] == "api_unavailable"
    rows = read_transcript(repo)
    assert len(rows) == 3, "one call and two retries"
    assert all("error" in r and "response" not in r for r in rows)


# --------------------------------------------------------------------------- round mechanics


def test_handoff_ends_the_round_after_the_other_calls(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(call("handoff", note="BATON: notes.txt written, verify next"), WRITE_NOTES),
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    rows = read_transcript(repo)
    assert [(r["round"], r["step"]) for r in rows] == [(1, 1), (2, 1)]
    # write_file ran although it came after handoff in the same response, and it is part of
    # round 1's commit.
    round1 = data["commits"][0]["sha"]
    assert git(repo, "show", f"{round1}:notes.txt") == "hello\n"
    subject = git(repo, "log", "-1", "--format=%s", round1).strip()
    assert subject == "relay: round 1: BATON: notes.txt written, verify next"
    assert "BATON: notes.txt written" in rows[1]["request"]["messages"][0]["content"]


def test_automatic_handoff_when_the_round_ends_without_one(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(call("shell", command="echo probing"), WRITE_NOTES),
            respond(call("shell", command="exit 3")),
            respond(text="That is all for now."),
            complete(),
        ]
    )
    code, _, _ = relay_run(repo, script, GOAL)
    assert code == 0
    rows = read_transcript(repo)
    assert [(r["round"], r["step"]) for r in rows] == [(1, 1), (1, 2), (1, 3), (2, 1)]
    message = rows[3]["request"]["messages"][0]["content"]
    assert "echo probing` → exit 0" in message
    assert "exit 3` → exit 3" in message
    assert "notes.txt" in message
    assert "utomatic handoff" in message


def test_max_steps_per_round_ends_the_round(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"max_steps_per_round": 3}})
    shell = respond(call("shell", command="echo step"))
    script = write_script([shell, shell, shell, write_notes(), complete()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    rows = read_transcript(repo)
    assert [(r["round"], r["step"]) for r in rows] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)]
    assert data["rounds"] == 2


def test_update_goal_with_another_tool_is_deferred(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(
                call("write_file", path="notes.txt", content="hello\n"),
                call("update_goal", status="complete", summary="written"),
            ),
            complete("written and checked"),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    assert data["status"] == "complete"
    assert data["blocked_reports"] == 0
    rows = read_transcript(repo)
    assert [(r["round"], r["step"]) for r in rows] == [(1, 1), (1, 2)]
    results = tool_results(rows[1])
    assert len(results) == 2
    write_result, update_result = results
    assert write_result["is_error"] is False
    assert "deferred" in update_result["content"]
    assert "rejected" not in update_result["content"]
    assert update_result["is_error"] is False


def test_text_only_response_ends_the_round(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script([write_notes(), respond(text="Done for this round."), complete()])
    code, _, _ = relay_run(repo, script, GOAL)
    assert code == 0
    rows = read_transcript(repo)
    assert [(r["round"], r["step"]) for r in rows] == [(1, 1), (1, 2), (2, 1)]


def test_unknown_tool_and_bad_arguments_are_error_results(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(
                call("frobnicate", level=3),
                call("write_file", path="notes.txt"),
                call("shell", command=42),
            ),
            write_notes(),
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0, data
    rows = read_transcript(repo)
    unknown, missing, wrong_type = tool_results(rows[1])
    assert unknown["is_error"] is True
    assert "frobnicate" in unknown["content"] and "unknown tool" in unknown["content"]
    assert missing["is_error"] is True and "content" in missing["content"]
    assert wrong_type["is_error"] is True and "command" in wrong_type["content"]
    assert (repo / "notes.txt").read_text() == "hello\n"


def test_next_round_starts_with_a_fresh_context(make_repo, write_script, relay_run):
    goal = "Create answer.txt containing 42."
    repo = make_repo(config={"deliverables": [{"file": "answer.txt", "contains": "42"}]})
    script = write_script(
        [
            respond(call("shell", command="echo looking"), text="SCRATCH-THOUGHT-5521"),
            respond(call("read_file", path="README.md")),
            respond(call("handoff", note="BATON-7731: write answer.txt next")),
            respond(call("write_file", path="answer.txt", content="42\n")),
            complete("answer written"),
        ]
    )
    code, _, _ = relay_run(repo, script, goal)
    assert code == 0
    rows = read_transcript(repo)
    first_of_round2 = next(r for r in rows if r["round"] == 2 and r["step"] == 1)
    request = first_of_round2["request"]
    assert request["system"] == rows[0]["request"]["system"]
    assert request["system"].strip()
    assert len(request["messages"]) == 1, "nothing but the round message carries over"
    (message,) = request["messages"]
    assert message["role"] == "user"
    text = message["content"]
    assert "Round 2 of 50" in text
    assert f"<<<USER GOAL\n{goal}\nUSER GOAL>>>" in text
    assert "# Goal progress" in text
    assert "BATON-7731: write answer.txt next" in text
    assert "relay: round 1" in text
    assert "git status" in text
    assert "SCRATCH-THOUGHT-5521" not in json.dumps(request)
    # Within a round the context grows: step 3 of round 1 saw steps 1 and 2.
    round1 = by_round(rows)[1]
    assert len(round1[2]["request"]["messages"]) == 5


def test_last_five_rounds_warning(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(call("shell", command="echo one"), call("handoff", note="round one")),
            respond(call("shell", command="echo two"), call("handoff", note="round two")),
            write_notes(),
            complete(),
        ]
    )
    code, _, _ = relay_run(repo, script, GOAL, "--max-rounds", "6")
    assert code == 0
    rows = read_transcript(repo)
    messages = {r["round"]: r["request"]["messages"][0]["content"] for r in rows if r["step"] == 1}
    assert "Round 1 of 6" in messages[1]
    assert "remain" not in messages[1]
    assert "Round 2 of 6" in messages[2]
    assert "4 rounds remain" in messages[2]
    assert "needs_user_input" in messages[2].split("## Goal")[0]
    assert "3 rounds remain" in messages[3]


@pytest.mark.parametrize("status", ["paused", "active", "cleared"])
def test_update_goal_with_a_user_status_is_rejected(make_repo, write_script, relay_run, status):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(call("update_goal", status=status, summary="stop here")),
            write_notes(),
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    assert data["status"] == "complete"
    result = tool_results(read_transcript(repo)[1])[0]
    assert result["is_error"] is True
    assert "rejected" in result["content"]


def test_run_without_goal_resumes_the_open_goal(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    ask = respond(
        call("update_goal", status="needs_user_input", summary="?", question="Hello or Hi?")
    )
    code, first, _ = relay_run(repo, write_script([ask]), GOAL)
    assert code == 2
    code, second, _ = relay_run(repo, write_script([write_notes(), complete()]), None)
    assert code == 0, second
    assert second["goal_id"] == first["goal_id"]
    assert second["status"] == "complete"
    assert second["rounds"] == 2
    assert second["branch"] == first["branch"]
    subjects = git(repo, "log", "--format=%s", f"main..{second['branch']}").splitlines()
    assert subjects[0].startswith("relay: round 2:")
    assert subjects[1].startswith("relay: round 1:")


def test_plain_output_prints_the_effective_limits_and_the_outcome(
    make_repo, write_script, run_relay
):
    repo = make_repo(config=NOTES)
    script = write_script([write_notes(), complete("notes written")])
    code, out, err = run_relay(
        ["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--max-rounds", "7"]
    )
    assert code == 0
    text = " ".join((out + err).split())
    assert "7 rounds" in text, "the effective round limit is shown when the run starts"
    assert "complete" in text
    assert "Traceback" not in err


def test_paths_with_spaces_and_non_ascii(tmp_path, write_script, relay_run):
    repo = tmp_path / "mon dépôt" / "my repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Relay Test")
    git(repo, "config", "user.email", "relay-test@example.invalid")
    (repo / "relay.yaml").write_text(
        'deliverables:\n  - {file: "dossier ü/note é.txt", contains: "olá"}\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    script_dir = tmp_path / "scripts dir ß"
    script_dir.mkdir()
    script = write_script(
        [
            respond(call("write_file", path="dossier ü/note é.txt", content="olá\n")),
            respond(call("shell", command="cat 'dossier ü/note é.txt'")),
            complete(),
        ]
    )
    moved = script_dir / "the script.yaml"
    script.rename(moved)
    code, data, _ = relay_run(repo, moved, "Écrire la note « olá »")
    assert code == 0, data
    assert (repo / "dossier ü" / "note é.txt").read_text() == "olá\n"
    assert "olá" in tool_results(read_transcript(repo)[2])[-1]["content"]
    assert git(repo, "show", f"{data['branch']}:dossier ü/note é.txt") == "olá\n"
    assert git(repo, "status", "--porcelain") == ""
