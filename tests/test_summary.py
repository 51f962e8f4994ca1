"""The morning summary (issue 8) reads only the rounds it lists (issue 12): the newest 15 one
by one, the earlier ones counted — those an imported goal state summed up included."""

from __future__ import annotations

from pathlib import Path

from test_goal_state import new_store

from relay import goal_state
from relay.json_output import goal_json
from relay.report import load_goal_report
from relay.store import Store
from relay.summary import run_summary_markdown


def summary(store: Store, goal_id: str) -> str:
    return run_summary_markdown({**goal_json(store, goal_id), "run_dir": "/tmp/run"}, store)


def test_the_summary_lists_the_newest_rounds_and_counts_the_earlier_ones(tmp_path: Path) -> None:
    store, goal_id = new_store(tmp_path / "relay.db", 40)
    text = summary(store, goal_id)
    listed = [ln for ln in text.splitlines() if ln.startswith("- Round ")]
    assert [ln.split(":")[0] for ln in listed] == [f"- Round {n}" for n in range(26, 41)]
    assert "- … 25 earlier rounds in `relay log` and the progress file" in text
    assert "Last handoff: Round 40 done." in text


def test_an_imported_goal_counts_the_rounds_its_goal_state_summed_up(tmp_path: Path) -> None:
    here, goal_id = new_store(tmp_path / "here.db", 40)
    state = goal_state.goal_state(here, goal_id, keep_rounds=5)
    there = Store(tmp_path / "there.db")
    goal_state.import_goal(there, goal_state.loads(goal_state.dumps(state), "goal.json"))
    assert len(there.rounds(goal_id)) == 8
    text = summary(there, goal_id)  # the rounds the goal state carries, the others counted
    listed = [ln for ln in text.splitlines() if ln.startswith("- Round ")]
    assert [ln.split(":")[0] for ln in listed] == [f"- Round {n}" for n in range(33, 41)]
    assert "- … 32 earlier rounds in `relay log` and the progress file" in text
    totals = [load_goal_report(s, goal_id).totals for s in (here, there)]
    assert totals[0]["tool_calls"] == totals[1]["tool_calls"] == 40 * 41 // 2


def test_an_exhausted_script_says_how_to_extend_it(make_repo, write_script, relay_run, run_relay):
    """Not "fix the key, quota or provider": the scripted model's script ran out (issue 13,
    item 7)."""
    repo = make_repo()
    script = write_script([{"text": "Thinking."}])
    code, data, _ = relay_run(repo, script, "Do the task.")
    assert (code, data["status"], data["reason"]) == (7, "failed", "script_exhausted")
    assert "after 1 response (" in data["message"]
    code, _, err = run_relay(["resume", "--repo", repo])
    assert "script is used up: add responses to it" in err
    assert "key, quota, provider" not in err
    summary = (Path(data["run_dir"]) / "summary.md").read_text()
    assert "script is used up" in summary
