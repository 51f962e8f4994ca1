"""The guard acts when its score reaches the threshold inside a round too (SPEC §8, issue 12):
the goal ends at that step, with the same diagnosis as between rounds."""

from __future__ import annotations

import math

from conftest import call, complete, read_transcript, respond

from relay.guard import GuardSettings

DEFAULTS = GuardSettings()
SAME_CALL = respond(call("shell", command="echo still stuck"))


def calls_to_stop(settings: GuardSettings) -> int:
    """``threshold / weight × repeat_limit``: the repetitions in a row whose loop events bring
    the score from 0 to the threshold."""
    return math.ceil(settings.threshold / settings.weights["loop"]) * settings.repeat_limit


def test_the_same_call_with_the_same_result_is_stopped_inside_the_round(
    make_repo, write_script, relay_run
) -> None:
    repo = make_repo(config={"deliverables": [{"file": "t.txt"}]})
    script = write_script([{"repeat": 100, "response": SAME_CALL}, complete()])
    code, out, _ = relay_run(repo, script, "Create t.txt.")
    assert (code, out["status"], out["reason"]) == (6, "terminated", "guard"), out
    assert out["rounds"] == 1
    assert calls_to_stop(DEFAULTS) == 15
    assert len(read_transcript(repo)) == calls_to_stop(DEFAULTS)  # 40 before: the step cap
    assert out["diagnosis"].startswith("Terminated: loop (round 1). Check:")
    assert out["message"] == out["diagnosis"]
    loops = [e for e in out["events"] if e["kind"] == "loop"]
    assert [e["detail"] for e in loops] == [
        f"shell called {n} times in a row with the same result" for n in (5, 10, 15)
    ]
    ended = [e for e in out["events"] if e["kind"] == "round_ended"]
    assert len(ended) == 1 and ended[0]["detail"].startswith("guard; 15 steps, 15 tool calls")


def test_calls_after_the_crossing_in_the_same_response_are_not_run(
    make_repo, write_script, relay_run
) -> None:
    repo = make_repo(config={"guard": {"repeat_limit": 3}})
    marker = call("shell", command="echo ran > after.txt")
    script = write_script(
        [*[SAME_CALL] * 8, respond(SAME_CALL["tool_calls"][0], marker), complete()]
    )
    code, out, _ = relay_run(repo, script, "Do the task.")
    assert code == 6
    assert (out["status"], out["reason"]) == ("terminated", "guard"), out
    settings = GuardSettings(repeat_limit=3)
    assert len(read_transcript(repo)) == calls_to_stop(settings) == 9
    assert not (repo / "after.txt").exists()
    last = read_transcript(repo)[-1]
    assert last["response"]["tool_calls"][1]["arguments"] == marker["arguments"]


def test_a_call_whose_result_changes_is_never_stopped(make_repo, write_script, relay_run) -> None:
    repo = make_repo(config={"deliverables": [{"file": "n.txt"}]})
    poll = respond(call("shell", command="echo x >> n.txt; wc -l < n.txt"))
    script = write_script([{"repeat": 30, "response": poll}, complete()])
    code, out, _ = relay_run(repo, script, "Append lines to n.txt until it has 30.")
    assert (code, out["status"]) == (0, "complete"), out
    assert not [e for e in out["events"] if e["kind"] == "loop"]
