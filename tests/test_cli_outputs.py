"""What a run leaves behind (SPEC §5, §6, §9, §11, §12): the `--json` object, `relay status`,
the transcript, the round commits and branches, the progress file, and the protections of
the repository and the user's credentials."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import call, complete, git, load_json, read_transcript, respond, state_dir

GOAL = "Create notes.txt saying hello."
NO_SANDBOX = ("--sandbox", "off")
"""The detection and undo without a sandbox (inside it these writes fail: tests/test_sandbox.py)."""

NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = call("write_file", path="notes.txt", content="hello\n")

SPEC_KEYS = {
    "goal_id",
    "status",
    "reason",
    "message",
    "question",
    "rounds",
    "no_progress_streak",
    "blocked_reports",
    "tokens",
    "cost_usd",
    "elapsed_s",
    "audit",
    "diagnosis",
    "events",
    "branch",
    "commits",
}


def tool_results(row: dict) -> list[dict]:
    return [m for m in row["request"]["messages"] if m["role"] == "tool"]


def trailers(repo, rev: str) -> dict[str, str]:
    out = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", rev)
    pairs = [line.split(":", 1) for line in out.splitlines() if ":" in line]
    return {k.strip(): v.strip() for k, v in pairs}


def round_commits(repo, branch: str) -> list[tuple[str, str]]:
    """``(sha, subject)`` of every commit on ``branch`` after ``main``, oldest first."""
    out = git(repo, "log", "--reverse", "--format=%H%x1f%s", f"main..{branch}")
    return [tuple(line.split("\x1f", 1)) for line in out.splitlines()]  # type: ignore[misc]


def three_round_script() -> list[dict]:
    return [
        respond(call("shell", command="echo one"), call("handoff", note="first baton")),
        respond(WRITE_NOTES, call("handoff", note="second baton\nwith a body line")),
        complete("notes written"),
    ]


# --------------------------------------------------------------------------- --json and status


def test_json_object_has_every_key_of_the_spec(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    code, data, _ = relay_run(repo, write_script(three_round_script()), GOAL)
    assert code == 0
    assert data.keys() >= SPEC_KEYS, SPEC_KEYS - data.keys()
    assert data["status"] == "complete"
    assert data["reason"]
    assert isinstance(data["goal_id"], str) and data["goal_id"]
    assert data["question"] is None
    assert data["rounds"] == 3
    assert data["no_progress_streak"] == 0
    assert data["blocked_reports"] == 0
    assert set(data["tokens"]) >= {"uncached_input", "cache_write", "cached_input", "output"}
    assert isinstance(data["cost_usd"], int | float)
    assert isinstance(data["elapsed_s"], int | float) and data["elapsed_s"] >= 0
    assert data["diagnosis"] is None
    audit = data["audit"]
    assert audit["passed"] is True
    assert audit["checks"], "the audit records its checks"
    for check in audit["checks"]:
        assert {"kind", "target", "passed", "evidence"} <= check.keys()
    file_check = next(c for c in audit["checks"] if c["kind"] == "file")
    assert file_check["target"] == "notes.txt" and file_check["passed"] is True
    assert data["events"]
    for event in data["events"]:
        assert {"kind", "round", "detail"} <= event.keys()
    assert data["branch"] == "relay/create-notes-txt-saying-hello"
    assert len(data["commits"]) == 3


def test_tokens_are_the_sum_of_the_reported_usage(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    usages = [
        {"input": 1200, "cached": 0, "cache_write": 300, "output": 150},
        {"input": 200, "cached": 1000, "cache_write": 0, "output": 40},
        {"input": 900, "cached": 2500, "cache_write": 7, "output": 60},
    ]
    script = write_script(
        [
            respond(call("shell", command="echo hi"), usage=usages[0]),
            respond(WRITE_NOTES, usage=usages[1]),
            {**complete(), "usage": usages[2]},
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    assert data["tokens"] == {
        "counted": 2300 + 307 + 250,  # what the token budget counts
        "uncached_input": 2300,
        "cache_write": 307,
        "cached_input": 3500,
        "output": 250,
    }
    rows = read_transcript(repo)
    assert [r["response"]["usage"]["cached_input"] for r in rows] == [0, 1000, 2500]


def test_status_json_matches_the_run(make_repo, write_script, relay_run, run_relay):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(
                call("shell", command="echo hi"),
                call("handoff", note="next"),
                usage={"input": 10, "output": 5},
            ),
            respond(
                call(
                    "update_goal",
                    status="needs_user_input",
                    summary="?",
                    question="Tabs or spaces?",
                ),
                usage={"input": 20, "cached": 3, "output": 1},
            ),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 2
    code, out, err = run_relay(["status", "--json", "--repo", repo])
    assert code == 0, err
    status = load_json(out)
    for key in ("goal_id", "status", "rounds", "tokens", "question", "branch", "blocked_reports"):
        assert status[key] == data[key], key
    assert status["tokens"] == {
        "counted": 36,
        "uncached_input": 30,
        "cache_write": 0,
        "cached_input": 3,
        "output": 6,
    }
    assert status.keys() >= SPEC_KEYS


def test_status_json_in_a_real_process_prints_only_json(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo(config=NOTES)
    code, data, _ = relay_run(repo, write_script([respond(WRITE_NOTES), complete()]), GOAL)
    assert code == 0
    code, out, _ = run_relay(["status", "--json", "--repo", repo], subprocess=True)
    assert code == 0
    status = json.loads(out)
    assert (status["goal_id"], status["status"], status["rounds"]) == (
        data["goal_id"],
        "complete",
        1,
    )


def test_json_run_in_a_real_process_keeps_stdout_pure(make_repo, write_script, run_relay):
    repo = make_repo(config=NOTES)
    script = write_script([respond(WRITE_NOTES), complete()])
    code, out, err = run_relay(
        ["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--json"], subprocess=True
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "complete"
    assert "Traceback" not in err


# --------------------------------------------------------------------------- transcript


def test_transcript_records_every_call(make_repo, write_script, relay_run):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    script = write_script(
        [
            respond(call("shell", command="echo a"), text="checking"),
            respond(call("handoff", note="go on")),
            {"error": "overloaded"},
            respond(WRITE_NOTES),
            complete(),
        ]
    )
    code, _, _ = relay_run(repo, script, GOAL)
    assert code == 0
    rows = read_transcript(repo)
    assert [(r["round"], r["step"]) for r in rows] == [(1, 1), (1, 2), (2, 1), (2, 1), (2, 2)]
    for row in rows:
        assert row["mode"] == "relay"
        assert {"system", "messages", "tools", "tool_choice"} <= row["request"].keys()
        names = {t["name"] for t in row["request"]["tools"]}
        assert {
            "shell",
            "read_file",
            "write_file",
            "edit_file",
            "get_goal",
            "update_goal",
            "handoff",
        } <= names
        assert row["request"]["tool_choice"] == "auto"
    failed = rows[2]
    assert "error" in failed and "response" not in failed
    for row in rows[:2] + rows[3:]:
        assert "error" not in row
        assert {"text", "tool_calls", "usage", "stop_reason"} <= row["response"].keys()
    assert rows[0]["response"]["text"] == "checking"
    assert rows[0]["response"]["tool_calls"][0]["name"] == "shell"
    assert rows[0]["response"]["tool_calls"][0]["arguments"] == {"command": "echo a"}


# --------------------------------------------------------------------------- git


def test_each_round_commits_with_subject_and_trailers(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    code, data, _ = relay_run(repo, write_script(three_round_script()), GOAL)
    assert code == 0
    branch = data["branch"]
    assert branch.startswith("relay/")
    assert git(repo, "branch", "--show-current").strip() == branch
    commits = round_commits(repo, branch)
    assert len(commits) == 3
    assert [c[0] for c in commits] == [c["sha"] for c in data["commits"]]
    subjects = [s for _, s in commits]
    assert subjects[0] == "relay: round 1: first baton"
    assert subjects[1] == "relay: round 2: second baton"
    assert subjects[2].startswith("relay: round 3:")
    for n, (sha, _) in enumerate(commits, 1):
        assert trailers(repo, sha) == {"Relay-Goal": data["goal_id"], "Relay-Round": str(n)}
        # the progress file is part of every round's commit
        changed = git(repo, "show", "--name-only", "--format=", sha).split()
        assert ".relay/progress.md" in changed
        assert f"Round {n}" in git(repo, "show", f"{sha}:.relay/progress.md")
    assert "with a body line" in git(repo, "log", "-1", "--format=%b", commits[1][0])
    assert "notes.txt" in git(repo, "show", "--name-only", "--format=", commits[1][0]).split()
    # main is untouched
    assert git(repo, "log", "--format=%s", "main").split("\n")[0] == "initial"


def test_in_place_commits_on_the_current_branch(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    git(repo, "checkout", "-q", "-b", "feature")
    code, data, _ = relay_run(
        repo, write_script([respond(WRITE_NOTES), complete()]), GOAL, "--in-place"
    )
    assert code == 0
    assert data["branch"] == "feature"
    assert git(repo, "branch", "--show-current").strip() == "feature"
    assert git(repo, "log", "-1", "--format=%s", "feature").startswith("relay: round 1:")
    assert git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split() == [
        "feature",
        "main",
    ]


def test_branch_option_uses_the_named_branch(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    code, data, _ = relay_run(
        repo, write_script([respond(WRITE_NOTES), complete()]), GOAL, "--branch", "work/notes"
    )
    assert code == 0
    assert data["branch"] == "work/notes"
    assert git(repo, "branch", "--show-current").strip() == "work/notes"
    assert git(repo, "log", "-1", "--format=%s", "work/notes").startswith("relay: round 1:")
    assert git(repo, "log", "-1", "--format=%s", "main").strip() == "initial"
    assert not [
        b
        for b in git(repo, "branch", "--format=%(refname:short)").split()
        if b.startswith("relay/")
    ]


def test_the_state_lives_outside_the_working_tree(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    code, data, _ = relay_run(repo, write_script(three_round_script()), GOAL)
    assert code == 0
    assert (state_dir(repo) / "relay.db").is_file()
    assert Path(data["run_dir"]).parent == state_dir(repo) / "runs"
    assert not (repo / ".relay" / "state").exists()
    assert not (repo / ".relay" / "inbox").exists()
    assert sorted(p.name for p in (repo / ".relay").iterdir()) == ["goal.json", "progress.md"]
    assert git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""
    exclude = repo / ".git" / "info" / "exclude"
    assert not exclude.exists() or ".relay" not in exclude.read_text()
    tracked = git(repo, "ls-files").split()
    assert ".relay/progress.md" in tracked
    for _, subject in round_commits(repo, data["branch"]):
        assert subject.startswith("relay: round")


# --------------------------------------------------------------------------- progress file


def test_progress_file_stays_bounded(make_repo, write_script, relay_run):
    # The same command every round is a loop to the guard; this test is about the file only.
    repo = make_repo(config={**NOTES, "progress": {"max_chars": 3000}, "guard": {"enabled": False}})
    long_note = "Long handoff note. " + "Details of what was tried and what comes next. " * 60
    work = respond(call("shell", command="echo step"), call("handoff", note=long_note))
    script = write_script([{"repeat": 29, "response": work}, respond(WRITE_NOTES), complete()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0, data
    assert data["rounds"] == 30
    text = (repo / ".relay" / "progress.md").read_text()
    assert len(text) <= 3000
    assert "Round 30" in text
    for sha, _ in round_commits(repo, data["branch"])[::5]:
        assert len(git(repo, "show", f"{sha}:.relay/progress.md")) <= 3000
    assert git(repo, "status", "--porcelain") == ""


def test_progress_file_overwritten_by_shell_is_restored(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            respond(
                call("shell", command="echo HACK > .relay/progress.md"),
                call("handoff", note="overwrote the progress file"),
            ),
            respond(call("shell", command="cat .relay/progress.md")),
            respond(WRITE_NOTES),
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL, *NO_SANDBOX)
    assert code == 0
    assert "tamper" in [e["kind"] for e in data["events"]]
    for sha, _ in round_commits(repo, data["branch"]):
        committed = git(repo, "show", f"{sha}:.relay/progress.md")
        assert "HACK" not in committed
        assert "# Goal progress" in committed
    assert "HACK" not in (repo / ".relay" / "progress.md").read_text()
    # the model's next look at the file already shows the restored version
    cat_result = tool_results(read_transcript(repo)[2])[-1]["content"]
    assert read_transcript(repo)[2]["round"] == 2
    assert "HACK" not in cat_result
    assert "Goal progress" in cat_result


def test_write_file_refuses_protected_and_outside_paths(
    make_repo, write_script, relay_run, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("outside original\n")
    repo = make_repo(
        {"GOAL.md": "Create notes.txt saying hello.\n"},
        NOTES,
    )
    os.symlink(outside, repo / "link_dir")
    os.symlink(outside / "target.txt", repo / "link_file")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    config_before = (repo / "relay.yaml").read_text()
    git_config_before = (repo / ".git" / "config").read_text()
    attempts = [
        ".relay/progress.md",
        "relay.yaml",
        "GOAL.md",
        ".git/config",
        "../x.txt",
        "link_dir/escaped.txt",
        "link_file",
    ]
    script = write_script(
        [
            respond(*[call("write_file", path=p, content="PWNED\n") for p in attempts]),
            respond(WRITE_NOTES),
            complete(),
        ]
    )
    code, data, _ = relay_run(repo, script, None, "--goal-file", repo / "GOAL.md")
    assert code == 0, data
    results = tool_results(read_transcript(repo)[1])
    assert len(results) == len(attempts)
    for path, result in zip(attempts, results, strict=True):
        assert result["is_error"] is True, (path, result)
        assert "refused" in result["content"].lower(), (path, result)
    assert (repo / "relay.yaml").read_text() == config_before
    assert (repo / "GOAL.md").read_text() == "Create notes.txt saying hello.\n"
    assert (repo / ".git" / "config").read_text() == git_config_before
    assert "PWNED" not in (repo / ".relay" / "progress.md").read_text()
    assert not (tmp_path / "x.txt").exists()
    assert not (outside / "escaped.txt").exists()
    assert (outside / "target.txt").read_text() == "outside original\n"
    assert "PWNED" not in git(repo, "log", "-p", "--all")


def test_shell_cannot_see_credentials(make_repo, write_script, relay_run, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-OPENAI-1234")
    monkeypatch.setenv("MY_SECRET_TOKEN", "tok-SECRET-5678")
    monkeypatch.setenv("HARMLESS_SETTING", "visible-9012")
    repo = make_repo(config={**NOTES, "sandbox": {"env": ["HARMLESS_*"]}})
    script = write_script(
        [
            respond(
                call(
                    "shell",
                    command='echo "K=${OPENAI_API_KEY:-unset} T=${MY_SECRET_TOKEN:-unset} H=$HARMLESS_SETTING"',
                ),
                call("shell", command="env"),
            ),
            respond(WRITE_NOTES),
            complete(),
        ]
    )
    code, _, _ = relay_run(repo, script, GOAL)
    assert code == 0
    echo, env = tool_results(read_transcript(repo)[1])
    assert "K=unset T=unset H=visible-9012" in echo["content"]
    assert "HARMLESS_SETTING=visible-9012" in env["content"]
    for secret in ("sk-test-OPENAI-1234", "tok-SECRET-5678", "OPENAI_API_KEY", "MY_SECRET_TOKEN"):
        assert secret not in env["content"]


# --------------------------------------------------------------------------- goal file


def test_goal_file_with_front_matter_deliverables(make_repo, write_script, relay_run):
    goal_md = (
        "---\n"
        "deliverables:\n"
        "  - file: report.txt\n"
        "    contains: FINAL\n"
        "limits:\n"
        "  max_rounds_total: 7\n"
        "---\n"
        "Write report.txt with the word FINAL in it.\n"
    )
    repo = make_repo({"GOAL.md": goal_md})
    script = write_script(
        [
            respond(call("write_file", path="report.txt", content="draft\n")),
            complete("report written"),  # rejected: the audit checks the front matter
            respond(call("write_file", path="GOAL.md", content="Write anything.\n")),
            respond(call("edit_file", path="report.txt", old="draft", new="FINAL")),
            complete("report finished"),
        ]
    )
    code, data, _ = relay_run(repo, script, None, "--goal-file", repo / "GOAL.md")
    assert code == 0, data
    assert data["status"] == "complete"
    checks = data["audit"]["checks"]
    report = next(c for c in checks if c["kind"] == "file")
    assert report["target"] == "report.txt" and report["passed"] is True
    rows = read_transcript(repo)
    rejection = tool_results(rows[2])[-1]
    assert rejection["is_error"] is True
    assert "report.txt" in rejection["content"]
    goal_write = tool_results(rows[3])[-1]
    assert goal_write["is_error"] is True and "refused" in goal_write["content"].lower()
    assert (repo / "GOAL.md").read_text() == goal_md
    first = rows[0]["request"]["messages"][0]["content"]
    assert "Round 1 of 7" in first
    assert "Write report.txt with the word FINAL in it." in first
    assert "deliverables:" not in first.split("<<<USER GOAL")[1].split("USER GOAL>>>")[0]


def test_shell_change_to_a_protected_path_is_undone_and_recorded(
    make_repo, write_script, relay_run
):
    """SPEC §5, §8: the file tools refuse protected paths, and a `shell` command that changes
    one (relay.yaml) is undone at once and recorded as `tamper`; the goal's deliverables were
    frozen at its start, so the audit still checks the original ones."""
    repo = make_repo(config=NOTES)
    original = (repo / "relay.yaml").read_text()
    script = write_script(
        [
            respond(call("shell", command="echo 'deliverables: []' > relay.yaml")),
            complete("nothing to do"),
            respond(WRITE_NOTES),
            complete("notes written"),
        ]
    )
    code, data, _ = relay_run(repo, script, GOAL, *NO_SANDBOX)
    rows = read_transcript(repo)
    assert len(rows) == 4
    first_claim = tool_results(rows[2])[-1]
    assert first_claim["is_error"] is True, "the frozen deliverable notes.txt was still missing"
    assert "notes.txt" in first_claim["content"]
    assert any(e["kind"] == "tamper" and "relay.yaml" in e["detail"] for e in data["events"])
    assert (repo / "relay.yaml").read_text() == original
    assert git(repo, "show", "HEAD:relay.yaml") == original
    assert code == 0 and data["status"] == "complete"
