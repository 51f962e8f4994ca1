"""What a finished goal must not hide (issue 14, defect 5): a ``complete`` accepted without any
deliverable being checked (SPEC §9 step 5: a goal without deliverables is audited with the
fallback checks alone), and a provider that reported no cache use, which makes every prompt
token count. The end-of-run lines, ``relay status``, the JSON and the summary say both."""

from __future__ import annotations

from pathlib import Path

from conftest import call, complete, flat, load_json, respond, state_dir

from relay.json_output import NO_CACHE_NOTE

GOAL = "Create hello.txt containing hello."
WRITE = call("write_file", path="hello.txt", content="Hello World\n")
HELLO = {"deliverables": [{"file": "hello.txt", "contains": "Hello"}]}
NO_CACHE = {"input": 1000, "cached": 0, "cache_write": 0, "output": 50}
CACHED = {"input": 100, "cached": 900, "cache_write": 0, "output": 50}


def _status(run_relay, repo: Path) -> tuple[str, dict]:
    code, text, err = run_relay(["status", "--repo", repo])
    assert code == 0, err
    code, out, err = run_relay(["status", "--repo", repo, "--json"])
    assert code == 0, err
    return flat(text + err), load_json(out)


def _summary(repo: Path) -> str:
    (summary,) = (state_dir(repo) / "runs").glob("*/summary.md")
    return flat(summary.read_text(encoding="utf-8"))


def test_complete_without_deliverables_says_none_were_checked(
    make_repo, write_script, relay_run, run_relay
) -> None:
    """Issue 14: the goal said "containing hello", the file said "Hello World", and ``complete``
    passed on "a file changed" alone while every output looked like a full audit."""
    repo = make_repo()  # no relay.yaml: no deliverables
    script = write_script([respond(WRITE, usage=NO_CACHE), complete()])
    code, data, err = relay_run(repo, script, GOAL)
    assert (code, data["status"]) == (0, "complete")  # SPEC §9 step 5 accepts it
    audit = data["audit"]
    assert audit["passed"] and audit["deliverables_checked"] is False
    note = audit["note"]
    assert note.startswith("complete was accepted without deliverables being checked")
    assert "a file changed since the goal started" in note
    assert "no test command was detected" in note
    assert "deliverables:" in note and "relay.yaml" in note  # how to add them
    assert f"note: {note}" in flat(err)
    text, status = _status(run_relay, repo)
    assert note in text
    assert status["audit"] == audit
    assert note in _summary(repo)


def test_a_goal_with_deliverables_has_no_such_note(make_repo, write_script, relay_run, run_relay):
    repo = make_repo(config=HELLO)
    code, data, err = relay_run(repo, write_script([respond(WRITE), complete()]), GOAL)
    assert code == 0
    assert data["audit"]["deliverables_checked"] is True and data["audit"]["note"] is None
    assert "without deliverables" not in err
    text, _ = _status(run_relay, repo)
    assert "without deliverables" not in text and "audit (round 1): passed" in text


def test_a_failed_audit_without_deliverables_names_what_it_checked(
    make_repo, write_script, relay_run
) -> None:
    repo = make_repo(files={"tests/test_x.py": "def test_x():\n    assert False\n"})
    script = write_script([respond(WRITE), complete(), respond(call("handoff", note="stuck"))])
    code, data, _ = relay_run(repo, script, GOAL, "--max-rounds", "1")
    assert (code, data["status"]) == (4, "limit_reached") and data["audit"]["passed"] is False
    note = data["audit"]["note"]
    assert note.startswith("the audit checked no deliverables")
    assert "that the project's test command `" in note and "passes" in note


def test_no_cache_use_over_the_goal_is_said(make_repo, write_script, relay_run, run_relay):
    """Issue 14: a local server that reports no cached tokens made 534k tokens count for one
    run, and nothing said why."""
    repo = make_repo(config=HELLO)
    script = write_script([respond(WRITE, usage=NO_CACHE), {**complete(), "usage": NO_CACHE}])
    code, data, err = relay_run(repo, script, GOAL)
    assert code == 0
    assert data["cache_note"] == NO_CACHE_NOTE
    assert "the provider reported no cached tokens: every prompt token was counted" in NO_CACHE_NOTE
    assert f"note: {NO_CACHE_NOTE}" in flat(err)
    text, status = _status(run_relay, repo)
    assert NO_CACHE_NOTE in text and status["cache_note"] == NO_CACHE_NOTE
    assert "tokens: 2,100 counted" in text
    assert NO_CACHE_NOTE in _summary(repo)


def test_cache_use_is_not_flagged(make_repo, write_script, relay_run, run_relay) -> None:
    repo = make_repo(config=HELLO)
    script = write_script([respond(WRITE, usage=NO_CACHE), {**complete(), "usage": CACHED}])
    code, data, err = relay_run(repo, script, GOAL)
    assert code == 0 and data["cache_note"] is None
    assert "no cached tokens" not in err
    text, _ = _status(run_relay, repo)
    assert "no cached tokens" not in text
