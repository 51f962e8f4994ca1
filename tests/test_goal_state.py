"""The goal state committed on the branch (``.relay/goal.json``, SPEC §6, §11; issue 12): the
same size at every round, the rounds the progress file shows and a tally of the others, so a
fresh clone continues with the same progress file; a state written by an older relay that
lists every round still imports; a state whose tally contradicts its rounds is refused."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import call, git, respond

from relay import goal_state
from relay.errors import StoreError
from relay.progress import OLDER_ROUNDS_SHOWN, render_progress, shown_rounds
from relay.store import Round, Store, Tally

KEEP = 3


def new_store(path: Path, rounds: int, *, goal_id: str | None = None) -> tuple[Store, str]:
    """A store with a goal that ran ``rounds`` rounds (round n: n tool calls)."""
    store = Store(path)
    goal = store.create_goal(
        text="Keep the notes up to date.",
        goal_file=None,
        branch="relay/notes",
        base_commit="b" * 40,
        mode="relay",
        model="scripted:s.yaml",
        deliverables=[{"file": "notes.md"}],
        limits={"max_rounds_total": 5000},
    )
    run = store.start_run(goal.id, 1)
    store.add_supplement(goal.id, "mind the counter", "say")
    for n in range(1, rounds + 1):
        store.start_round(goal.id, n, run)
        store.end_round(
            goal.id,
            n,
            steps=2,
            tool_calls=n,
            real_tool_calls=n,
            files_changed=[f"work/round_{n}.md"],
            handoff=f"Round {n} done.\nNext: round {n + 1}.",
            commit_sha=f"{n:040x}",
            end_reason="handoff",
        )
    store.save_goal(goal.id, "active", rounds=rounds, counted_rounds=rounds)
    store.add_audit(
        goal.id,
        rounds,
        False,
        [{"kind": "file", "target": "notes.md", "passed": False, "evidence": "missing"}],
    )
    return store, goal.id


def progress(store: Store, goal_id: str, max_chars: int = 12000) -> str:
    goal = store.goal(goal_id)
    rounds, earlier = shown_rounds(store, goal_id, KEEP)
    return render_progress(
        goal=goal.text,
        supplements=goal.supplements,
        deliverables=goal.deliverables,
        audit=store.latest_audit(goal_id),
        rounds=rounds,
        earlier=earlier,
        keep_rounds=KEEP,
        max_chars=max_chars,
        goal_id=goal_id,
    )


def text_of(store: Store, goal_id: str, **final: Any) -> str:
    return goal_state.dumps(goal_state.goal_state(store, goal_id, keep_rounds=KEEP, **final))


def test_the_goal_state_has_the_same_size_at_round_20_and_round_400(tmp_path: Path) -> None:
    small, a = new_store(tmp_path / "a.db", 20)
    large, b = new_store(tmp_path / "b.db", 400)
    early, late = text_of(small, a), text_of(large, b)
    assert abs(len(late) - len(early)) < 100  # a few more digits, not 380 more rounds
    state = json.loads(late)
    assert [r["n"] for r in state["rounds"]] == list(
        range(400 - KEEP - OLDER_ROUNDS_SHOWN + 1, 401)
    )
    assert state["earlier_rounds"] == {
        "count": 394,
        "first": 1,
        "last": 394,
        "tool_calls": 394 * 395 // 2,
    }
    assert state["goal"]["rounds"] == 400 and state["audit"]["round"] == 400
    assert state["supplements"][0]["text"] == "mind the counter"


def test_a_fresh_clone_continues_with_the_same_progress_file_and_goal_state(
    tmp_path: Path,
) -> None:
    here, goal_id = new_store(tmp_path / "here.db", 40)
    text = text_of(here, goal_id)
    there = Store(tmp_path / "there.db")
    goal_state.import_goal(there, goal_state.loads(text, "goal.json"))
    assert progress(there, goal_id) == progress(here, goal_id)
    assert progress(there, goal_id, 2500) == progress(here, goal_id, 2500)  # shortened alike
    assert "… 34 older rounds omitted (rounds 1–34, 595 tool calls)" in progress(there, goal_id)
    assert there.round_tally(goal_id) == here.round_tally(goal_id)
    # one more round on each machine: the next goal state is the same again
    for store in (here, there):
        run = store.start_run(goal_id, 2)
        store.start_round(goal_id, 41, run)
        store.end_round(goal_id, 41, tool_calls=2, handoff="Round 41.", files_changed=[])
    again = [json.loads(text_of(s, goal_id)) for s in (here, there)]
    for state in again:
        state.pop("written_at")
        for r in state["rounds"]:
            r.pop("started_at"), r.pop("ended_at")
    assert again[0] == again[1]
    assert again[1]["earlier_rounds"]["count"] == 35


def legacy_state(rounds: int) -> dict[str, Any]:
    """A goal state as relay wrote it before it was bounded: every round listed."""
    store_fields = {
        "id": "0123456789ab",
        "text": "Old goal.",
        "base_commit": "c" * 40,
        "mode": "relay",
        "model": "scripted:s.yaml",
        "deliverables": [],
        "limits": {"max_rounds_total": 900},
        "status": "budget_limited",
        "rounds": rounds,
        "counted_rounds": rounds,
        "no_progress_streak": 0,
        "blocked_reports": 0,
        "auto_replies": 0,
        "uncached_input": 10,
        "cache_write": 0,
        "cached_input": 0,
        "output": 5,
        "cost_usd": 0.0,
        "elapsed_s": 12.5,
    }
    return {
        "format": 1,
        "written_at": 1.0,
        "goal": store_fields,
        "supplements": [],
        "rounds": [
            {
                "n": n,
                "started_at": 100.0 + n,
                "ended_at": 100.5 + n,
                "steps": 1,
                "tool_calls": 2,
                "real_tool_calls": 2,
                "files_changed": ["a.txt"],
                "commit_sha": f"{n:040x}",
                "handoff": f"old round {n}",
                "handoff_auto": 0,
                "end_reason": "handoff",
            }
            for n in range(1, rounds + 1)
        ],
        "audit": None,
    }


def test_a_goal_state_listing_every_round_still_imports(tmp_path: Path) -> None:
    text = goal_state.dumps(legacy_state(60))
    store = Store(tmp_path / "relay.db")
    goal = goal_state.import_goal(store, goal_state.loads(text, "goal.json"))
    assert (goal.id, goal.status, goal.rounds) == ("0123456789ab", "budget_limited", 60)
    assert [r.n for r in store.rounds(goal.id)] == list(range(1, 61))
    assert store.round_tally(goal.id) == Tally(60, 1, 60, 120)
    bounded = json.loads(text_of(store, goal.id))  # and the next commit is bounded again
    assert len(bounded["rounds"]) == KEEP + OLDER_ROUNDS_SHOWN
    assert bounded["earlier_rounds"]["count"] == 60 - KEEP - OLDER_ROUNDS_SHOWN


@pytest.mark.parametrize(
    ("earlier", "message"),
    [
        ({"count": 5, "first": 1, "last": 60, "tool_calls": 3}, "must come before"),
        ({"count": 9, "first": 1, "last": 4, "tool_calls": 3}, "cannot be numbered"),
        ({"count": 0, "first": 1, "last": 4, "tool_calls": 3}, "earlier_rounds.count"),
    ],
)
def test_a_tally_that_contradicts_the_rounds_is_refused(earlier: Any, message: str) -> None:
    state = legacy_state(60)
    state["rounds"] = state["rounds"][-5:]
    state["earlier_rounds"] = earlier
    with pytest.raises(StoreError) as info:
        goal_state.loads(json.dumps(state), ".relay/goal.json on relay/x")
    assert ".relay/goal.json on relay/x" in str(info.value) and message in str(info.value)


def test_every_round_commits_a_goal_state_of_the_same_size(make_repo, write_script, relay_run):
    rounds = 24
    script = write_script(
        [
            respond(
                call("write_file", path=f"work/round_{n}.md", content=f"round {n}\n"),
                call("handoff", note=f"Round {n}: wrote its note."),
            )
            for n in range(1, rounds + 1)
        ]
    )
    repo = make_repo()
    code, data, err = relay_run(repo, script, "Write one note per round.", "--max-rounds", rounds)
    assert (code, data["rounds"]) == (4, rounds), err  # limit_reached: all rounds ran
    shas = git(repo, "log", "--reverse", "--format=%H", f"main..{data['branch']}").split()
    sizes = [int(git(repo, "cat-file", "-s", f"{sha}:.relay/goal.json").strip()) for sha in shas]
    assert len(sizes) == rounds
    assert max(sizes[10:]) - min(sizes[10:]) < 200, sizes  # round 24 carries what round 11 did
    new_objects = []
    for before, after in itertools.pairwise(shas):
        listed = subprocess.run(
            ["git", "rev-list", "--objects", after, f"^{before}"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        new_objects.append(len([line for line in listed if line]))
    assert len(set(new_objects[10:])) == 1, new_objects  # the same objects every round


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ended_at": None}, "rounds: round 60 has no ended_at"),
        ({"n": 0}, "rounds: round 0: rounds are numbered from 1"),
        ({"files_changed": "src/a.py"}, "rounds.59.files_changed: Input should be a valid"),
    ],
)
def test_a_round_the_file_cannot_carry_is_refused_by_name(change: Any, message: str) -> None:
    state = legacy_state(60)
    state["rounds"][-1].update(change)
    with pytest.raises(StoreError) as info:
        goal_state.loads(json.dumps(state), ".relay/goal.json on relay/x")
    assert message in str(info.value) and "Value error" not in str(info.value)


def test_rounds_read_from_the_file_carry_only_what_it_writes(tmp_path: Path) -> None:
    """A goal state carries no usage, claim or run of a round: an edited file cannot import a
    pending claim (audited at resume) or usage into another machine's store."""
    state = legacy_state(3)
    state["rounds"][-1].update(
        claim={"status": "complete"}, usage={"output": 10**9}, run_id="x", model_calls=-5
    )
    rounds = goal_state.loads(json.dumps(state), "goal.json")["rounds"]
    assert [r.n for r in rounds] == [1, 2, 3] and all(isinstance(r, Round) for r in rounds)
    assert (rounds[-1].claim, rounds[-1].usage.output, rounds[-1].run_id) == (None, 0, None)
    store = Store(tmp_path / "relay.db")
    goal = goal_state.import_goal(store, goal_state.loads(json.dumps(state), "goal.json"))
    assert store.pending_claim(goal.id) is None
