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
