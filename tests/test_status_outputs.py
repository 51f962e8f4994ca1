"""What ``relay status`` shows of a goal (README "Statuses and limits", "Exit codes and
outputs"; issue 13): the limits stored with the goal, its model, mode and sandbox, in the JSON
and for a person; counts in words ("1 round", not "1 rounds")."""

from __future__ import annotations

import json

from conftest import call, respond


def one_round_goal(make_repo, write_script, relay_run):
    repo = make_repo()
    script = write_script([respond(call("handoff", note="looked around"))])
    code, data, err = relay_run(repo, script, "Do it", "--max-rounds", "1")
    assert code == 4 and data["reason"] == "total_rounds", err
    return repo, data, err


def test_status_json_has_the_limits_model_mode_and_sandbox(
    make_repo, write_script, relay_run, run_relay
):
    repo, ran, _ = one_round_goal(make_repo, write_script, relay_run)
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    data = json.loads(out)
    assert code == 0
    assert data["model"] == ran["model"] and data["model"].startswith("scripted:")
    assert (data["mode"], data["sandbox"]) == ("relay", ran["sandbox"])
    limits = data["limits"]  # the configuration keys' names, as stored with the goal
    assert limits["max_rounds_total"] == 1 and limits["max_no_progress"] == 5
    assert {"max_steps_per_round", "token_budget", "time_budget", "cost_budget"} <= set(limits)
    assert "max_rounds_without_progress" not in limits


def test_status_shows_the_limits_and_one_round_in_words(
    make_repo, write_script, relay_run, run_relay
):
    repo, ran, err = one_round_goal(make_repo, write_script, relay_run)
    assert ran["message"] == (
        "Goal stopped after 1 round in total without completion. Say how to continue."
    )
    code, out, _ = run_relay(["status", "--repo", repo])
    assert code == 0
    assert "limits: max_rounds_total 1 · max_no_progress 5" in out
    assert f"model {ran['model']} · relay mode" in out
    for text in (out, err):
        assert "1 rounds" not in text and "1 tool calls" not in text and "1 steps" not in text


def test_one_token_figure_the_budget_counts_everywhere(
    make_repo, write_script, relay_run, run_relay
):
    """The budget notice, the JSON and the summary line give the same counted figure; cache
    reads are named as not counted (issue 13, item 4)."""
    repo = make_repo()
    usage = {"input": 3000, "cached": 1000, "cache_write": 100, "output": 400}
    steps = [respond(call("shell", command=f"echo {i}"), usage=usage) for i in range(4)]
    script = write_script(steps)
    code, data, _ = relay_run(repo, script, "Echo.", "--token-budget", "5000")
    assert (code, data["status"]) == (5, "budget_limited"), data
    counted_tokens = data["tokens"]["counted"]
    t = data["tokens"]
    assert counted_tokens == t["uncached_input"] + t["cache_write"] + t["output"]
    assert data["message"].startswith(f"Token budget used up: {counted_tokens:,} of 5,000 tokens")
    assert "cache reads are not counted" in data["message"]
    _, _, err = run_relay(["resume", "--repo", repo, "--token-budget", "5000"])
    assert f"tokens: {counted_tokens:,} counted (" in err
    assert f"{t['cached_input']:,} cache reads, not counted" in err


def test_json_keeps_the_progress_on_stderr_and_quiet_silences_it(
    make_repo, write_script, run_relay
):
    """README: progress goes to stderr, stdout holds only the JSON; --quiet for silence
    (issue 13, item 1). Piped stderr is line-oriented: no status-line escapes."""
    repo = make_repo()
    steps = [respond(call("shell", command="echo one"), call("handoff", note="echoed"))]
    args = ["run", "Echo one.", "--repo", repo, "--max-rounds", "1", "--json"]
    code, out, err = run_relay(
        [*args, "--model", f"scripted:{write_script(steps)}"], subprocess=True
    )
    assert code == 4
    assert json.loads(out)["status"] == "limit_reached"  # stdout: the JSON object alone
    assert "round 1" in err and "shell" in err and "limit_reached" in err
    assert "\x1b[" not in err and "\r" not in err
    quiet = [*args, "--quiet", "--model", f"scripted:{write_script(steps)}"]
    run_relay(["clear", "--repo", repo])
    code, out, err = run_relay(quiet, subprocess=True)
    assert code == 4 and json.loads(out)["status"] == "limit_reached"
    assert err.strip() == ""


def test_the_no_progress_notice_says_what_made_no_progress(make_repo, write_script, relay_run):
    """Three rejected claims in one round are not "no step in 3 rounds" (issue 13, item 3)."""
    repo = make_repo(config={"deliverables": [{"file": "missing.txt"}]})
    claim = call("update_goal", status="complete", summary="done")
    script = write_script([respond(claim), respond(claim), respond(claim)])
    code, data, _ = relay_run(repo, script, "Write missing.txt.", "--max-no-progress", "3")
    assert (code, data["reason"], data["rounds"]) == (4, "no_progress", 1), data
    assert data["message"] == (
        "Goal stopped: 3 update_goal calls in a row were rejected, with no other tool call "
        "between them. Say how to continue."
    )


def test_after_a_resume_the_stop_names_the_rounds_since_the_restart_and_the_goals(
    make_repo, write_script, relay_run, run_relay
):
    """Issue 13, item 3: after a resume, "limit_reached after 3 rounds" is not followed by
    "stopped after 2 rounds in total": the end of the run, the JSON and relay status name
    both figures."""
    repo, _, _ = one_round_goal(make_repo, write_script, relay_run)
    script = write_script([respond(call("handoff", note="looked again"))] * 2)
    args = ["resume", "--repo", repo, "--model", f"scripted:{script}", "--max-rounds", "2"]
    code, out, err = run_relay([*args, "--json"])
    data = json.loads(out)
    assert (code, data["reason"], data["rounds"]) == (4, "total_rounds", 3), err
    both = (
        "Goal stopped after 2 rounds since the round count restarted (3 rounds of the goal in all)"
    )
    assert data["message"].startswith(both)
    assert "limit_reached (total_rounds) after 3 rounds" in err and both in err
    assert "round 3 (2 of 2)" in err
    code, out, _ = run_relay(["status", "--repo", repo])
    assert code == 0 and both in out
