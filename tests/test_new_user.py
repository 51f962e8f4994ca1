"""What a new user meets trying the commands of the README's "Using it" (issue 13, the
walkthrough): the output says what happened, once, in relay's words, and the advice it gives
works when followed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import call, complete, flat, git, load_json, respond


def test_a_rejected_update_goal_is_shown_as_it_happens(make_repo, write_script, relay_run):
    """A claim with a malformed checklist is rejected: the live output shows the call and why,
    not only ``relay log`` afterwards."""
    repo = make_repo()
    bad = call(
        "update_goal", status="complete", summary="s", checklist=[{"item": "x", "evidence": "y"}]
    )
    code, out, err = relay_run(repo, write_script([respond(bad)]))
    assert code == 7, out
    assert "✗ step 1 · update_goal complete" in err
    assert "rejected: update_goal: missing required argument 'checklist[0].requirement'" in err
    shown = [e for e in out["events"] if e["kind"] == "update_goal"]
    assert shown and "rejected" in shown[0]["detail"], out["events"]


def test_responses_added_to_a_used_up_script_are_used_by_resume(make_repo, write_script, run_relay):
    """The advice after a used-up script ("add responses to it, then relay resume") works: the
    first added response is the next one the model gives, none is skipped."""
    repo = make_repo(config={"deliverables": [{"file": "a.txt", "contains": "two"}]})
    script = write_script([respond(call("write_file", path="a.txt", content="one"))])
    code, _, err = run_relay(
        ["run", "Write a.txt.", "--repo", repo, "--model", f"scripted:{script}"]
    )
    assert code == 7 and "add responses to it" in flat(err), err
    data = yaml.safe_load(script.read_text())
    data["responses"] += [respond(call("write_file", path="a.txt", content="two")), complete()]
    script.write_text(yaml.safe_dump(data))
    code, out, err = run_relay(["resume", "--repo", repo, "--json"])
    result = load_json(out)
    assert (code, result["status"]) == (0, "complete"), err
    assert (repo / "a.txt").read_text() == "two"


def test_a_round_end_is_one_line(make_repo, write_script, relay_run):
    repo = make_repo()
    script = write_script([respond(call("shell", command="true")), respond(text="done for now")])
    _, _, err = relay_run(repo, script, "Do the task.", "--max-rounds", "1")
    ends = [line for line in err.splitlines() if "round 1 ended" in line or "round_ended" in line]
    assert len(ends) == 1, err
    assert "2 steps, 1 tool call; changed: nothing; commit " in ends[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "x", "--max-rounds", "ten"], "--max-rounds = 'ten': expected a whole number"),
        (["run", "x", "--token-budget", "1.5"], "--token-budget = '1.5': expected a whole number"),
        (["batch", "goals.yaml", "--workers", "0"], "--workers = '0': must be at least 1"),
        (["compare", "x", "--repeat", "two"], "--repeat = 'two': expected a whole number"),
    ],
)
def test_a_flag_value_of_the_wrong_type_is_said_in_relays_words(run_relay, args, needle):
    code, _, err = run_relay(args)
    assert code == 1
    assert needle in err
    assert "Input should" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("entries", "needles"),
    [
        (
            [{"goal": "a"}, {"goall": "b"}],
            ["goal 2 of the batch file", "unknown key 'goall'", "allowed keys: branch, goal,"],
        ),
        ([{"goal": "a", "max_rounds": "ten"}], ["goal 1", "max_rounds = 'ten'", "whole number"]),
        ({"goals": []}, ["goals = []: needs at least 1 item"]),
    ],
)
def test_a_bad_batch_file_names_the_entry_and_key(make_repo, tmp_path, run_relay, entries, needles):
    repo = make_repo()
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump(entries))
    code, _, err = run_relay(["batch", batch, "--repo", repo])
    assert code == 1
    for needle in needles:
        assert needle in flat(err), err
    assert "Extra inputs" not in err and "List should" not in err


def test_a_batch_goal_whose_script_cannot_be_read_is_refused_in_full_before_any_runs(
    make_repo, write_script, tmp_path, run_relay
):
    repo = make_repo()
    good = write_script([respond(call("write_file", path="b.txt", content="b")), complete()])
    missing = tmp_path / "a-rather-long-folder-name" / "that-makes-the-reason-long" / "no.yaml"
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        yaml.safe_dump(
            [
                {"goal": "Write b.txt.", "name": "b", "model": f"scripted:{good}"},
                {"goal": "Never starts.", "name": "c", "model": f"scripted:{missing}"},
            ]
        )
    )
    code, _, err = run_relay(["batch", batch, "--repo", repo])
    assert code == 1
    assert str(missing) in flat(err)
    assert "relay/batch-b" not in git(repo, "branch", "--list")  # nothing ran


def test_the_status_json_help_promises_no_progress(run_relay):
    _, out, _ = run_relay(["status", "--help"])
    assert "Print the goal as one JSON object on stdout." in flat(out)
    assert "progress" not in flat(out), out


def test_the_config_show_json_help_promises_no_progress(run_relay):
    _, out, _ = run_relay(["config", "show", "--help"])
    assert "Print the layers and every setting as one JSON object on stdout." in flat(out)
    assert "progress stays" not in flat(out), out  # it prints no progress


def test_clear_says_a_new_goal_would_start_from_the_cleared_goals_branch(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo()
    code, data, _ = relay_run(repo, write_script([respond(text="Hmm.")]), "Do it.", "-q")
    assert code == 7
    code, _, err = run_relay(["clear", "--repo", repo])
    assert code == 0
    assert f"from the current branch, {data['branch']}, which keeps the goal's commits" in err
    assert "`git switch` to another branch first" in err


def test_an_unknown_run_id_lists_the_runs_there_are(make_repo, write_script, relay_run, run_relay):
    repo = make_repo()
    code, data, _ = relay_run(repo, write_script([respond(text="Hmm.")]), "Do it.", "-q")
    run_id = Path(data["run_dir"]).name
    code, _, err = run_relay(["log", data["goal_id"], "--repo", repo])
    assert code == 1
    assert f"no run with id {data['goal_id']}; runs of goal {data['goal_id']}: {run_id}" in err


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["audit", "--deliverables"], "(see relay audit --help)"),
        (["run", "--model"], "(see relay run --help)"),
        (["nope"], "(see relay --help)"),
    ],
)
def test_a_usage_error_points_to_the_commands_help(run_relay, args, hint):
    code, _, err = run_relay(args)
    assert code == 1 and hint in err


def test_batch_prints_a_line_as_each_goal_ends(make_repo, write_script, tmp_path, run_relay):
    repo = make_repo()
    good = write_script([respond(call("write_file", path="b.txt", content="b")), complete()])
    stuck = write_script([respond(text="Hmm.")])
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        yaml.safe_dump(
            [
                {"goal": "Write b.txt.", "name": "b", "model": f"scripted:{good}"},
                {"goal": "Says nothing.", "name": "c", "model": f"scripted:{stuck}"},
            ]
        )
    )
    code, out, err = run_relay(["batch", batch, "--repo", repo])
    assert code != 0
    assert "b: complete after 1 round" in flat(err)
    assert "c: " in flat(err)
    for branch in ("relay/batch-b", "relay/batch-c"):
        git(repo, "branch", "-D", branch)
    code, out, err = run_relay(["batch", batch, "--repo", repo, "--quiet"])
    assert "b: complete" not in err and out == ""


def test_an_uncommitted_goal_file_in_the_tree_is_named_with_the_ways_on(
    make_repo, write_script, run_relay
):
    """A new user writes GOAL.md into the repository and runs it: the refusal says that the
    goal file itself is what makes the tree dirty, and how to go on."""
    repo = make_repo()
    (repo / "GOAL.md").write_text("Write notes.\n")
    script = write_script([respond(call("write_file", path="n.txt", content="n")), complete()])
    args = ["run", "--goal-file", repo / "GOAL.md", "--repo", repo, "--model", f"scripted:{script}"]
    code, _, err = run_relay(args)
    assert code == 1
    message = flat(err)
    assert "the goal file GOAL.md has uncommitted changes" in message
    assert "git add GOAL.md && git commit" in message and "outside the repository" in message
    assert git(repo, "status", "--porcelain") == "?? GOAL.md\n"  # nothing changed
    (repo / "other.txt").write_text("x")
    code, _, err = run_relay(args)
    assert code == 1 and "2 uncommitted paths: GOAL.md other.txt" in flat(err)


def test_compare_and_batch_on_a_dirty_tree_offer_no_flag_they_lack(
    make_repo, write_script, tmp_path, run_relay
):
    """Only run and resume take --allow-dirty: the others' refusal does not suggest it."""
    repo = make_repo()
    (repo / "wip.txt").write_text("x")
    script = write_script([complete()])
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump([{"goal": "Do it.", "model": f"scripted:{script}"}]))
    for args in (
        ["compare", "Do it.", "--model", f"scripted:{script}"],
        ["batch", batch],
    ):
        code, _, err = run_relay([*args, "--repo", repo])
        assert code == 1 and "wip.txt" in err and "git stash -u" in err, err
        assert "--allow-dirty" not in err
    code, _, err = run_relay(["run", "Do it.", "--model", f"scripted:{script}", "--repo", repo])
    assert code == 1 and "--allow-dirty" in err
