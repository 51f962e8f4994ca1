"""The store's narrow queries (issue 12): the newest rounds, a tally of the older ones, the last
answer, a run's log lines and per-round sums read only what their callers show; an older
database gains the new table on open and its dead ``steps.error`` column is never read."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from relay.cli.log import format_step
from relay.json_output import goal_json
from relay.store import Round, Store, Tally


@pytest.fixture()
def store(tmp_path: Path) -> Any:
    s = Store(tmp_path / "relay.db")
    yield s
    s.close()


def new_goal(store: Store) -> Any:
    return store.create_goal(
        text="Add a pool",
        goal_file=None,
        branch="relay/pool",
        base_commit="a" * 40,
        mode="relay",
        model="scripted:x.yaml",
        deliverables=[],
        limits={"max_rounds_total": 9},
    )


def add_rounds(store: Store, goal_id: str, run: str, count: int, *, open_last: bool = False):
    for n in range(1, count + 1):
        store.start_round(goal_id, n, run)
        if n < count or not open_last:
            store.end_round(goal_id, n, tool_calls=n, handoff=f"note {n}", files_changed=[f"{n}"])


def statements(store: Store) -> list[str]:
    """Every SQL statement the store's connection runs from now on."""
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def test_rounds_last_gives_the_newest_ones_oldest_first(store: Store) -> None:
    goal = new_goal(store)
    add_rounds(store, goal.id, store.start_run(goal.id, 1), 12, open_last=True)
    assert [r.n for r in store.rounds(goal.id, last=3)] == [10, 11, 12]
    assert [r.n for r in store.rounds(goal.id, last=3, finished=True)] == [9, 10, 11]
    assert store.rounds(goal.id, last=3)[0].files_changed == ("10",)
    assert [r.n for r in store.rounds(goal.id, last=50)] == list(range(1, 13))
    assert store.rounds(goal.id, last=0) == []
    assert [r.n for r in store.rounds(goal.id)] == list(range(1, 13))


def test_round_tally_sums_finished_rounds_and_what_an_import_summed_up(store: Store) -> None:
    goal = new_goal(store)
    add_rounds(store, goal.id, store.start_run(goal.id, 1), 6, open_last=True)
    assert store.round_tally(goal.id) == Tally(5, 1, 5, 15)
    assert store.round_tally(goal.id, before=4) == Tally(3, 1, 3, 6)
    assert store.round_tally(goal.id, before=1) == Tally()
    other = new_goal(store)
    store.import_earlier_rounds(other.id, Tally(40, 1, 40, 400))
    store.import_round(other.id, Round(n=41, ended_at=1.0, tool_calls=7, handoff="x"))
    assert store.round_tally(other.id) == Tally(41, 1, 41, 407)
    assert store.round_tally(other.id, before=41) == Tally(40, 1, 40, 400)
    store.delete_goal(other.id)
    assert store.round_tally(other.id) == Tally()


def test_last_answer_is_one_query_that_skips_blank_answers(store: Store) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    for i in range(200):
        store.add_step(goal.id, run, 1, i, text=f"answer {i}", actions=[], usage={})
    later = store.start_run(goal.id, 2)
    store.add_step(goal.id, later, 2, 1, text="  \n", actions=[], usage={})
    store.add_step(goal.id, later, 2, 2, text="", actions=[], usage={})
    seen = statements(store)
    assert store.last_answer(goal.id) == "answer 199"
    assert [s for s in seen if "steps" in s] == [seen[0]] and len(seen) == 1
    assert store.last_answer(goal.id, later) == ""
    assert store.last_answer(goal.id, run) == "answer 199"


def test_status_reads_one_step_for_the_last_answer(store: Store, monkeypatch) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    for i in range(50):
        store.add_step(goal.id, run, 1, i, text=f"answer {i}", actions=[], usage={})

    def every_step(*_: Any, **__: Any) -> None:
        raise AssertionError("relay status loaded every step")

    monkeypatch.setattr(Store, "steps", every_step)
    assert goal_json(store, goal.id)["final_response"] == "answer 49"


BIG = "x" * 50_000

STEPS: list[tuple[str, list[dict[str, Any]]]] = [
    ("Looking around.", [{"name": "shell", "arguments": {"command": "ls  -la\n"}}]),
    ("", [{"name": "write_file", "arguments": {"path": "a.py", "content": BIG}}]),
    ("Both.", [{"name": "read_file", "arguments": {"path": "b.py"}, "is_error": True}]),
    ("", [{"name": "update_goal", "arguments": {"status": "complete", "summary": BIG}}]),
    ("", [{"name": "handoff", "arguments": {"note": BIG}}]),
    ("", [{"name": "shell", "arguments": {"command": ["not", "a", "string"]}}]),
    ("", [{"name": "shell", "arguments": {"command": "", "path": "p", "status": None}}]),
    ("  An answer\n with   spaces " + "y" * 300, []),
    ("", []),
]


def test_log_steps_print_like_the_full_steps_without_their_arguments(store: Store) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    for i, (text, calls) in enumerate(STEPS, 1):
        actions = [{"is_error": False, "result": BIG, **c} for c in calls]
        store.add_step(goal.id, run, 1, i, text=text, actions=actions, usage={})
    full = store.run_steps(run)
    lean = store.log_steps(run)
    assert [format_step(s) for s in lean] == [format_step(s) for s in full]
    assert BIG not in repr(lean)
    assert [s["id"] for s in store.log_steps(run, after_id=full[5]["id"])] == [
        s["id"] for s in full[6:]
    ]


def test_log_steps_of_a_tampered_call_list_are_lines_not_tracebacks(store: Store) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    store.add_step(goal.id, run, 1, 1, text="t", actions=[], usage={})
    garbage = ["{not json", '{"an": "object"}', '["a string", 3, null]', "42"]
    for value in garbage:
        store._db.execute("UPDATE steps SET actions=?", (value,))
        lines = [format_step(s) for s in store.log_steps(run)]
        assert len(lines) == 1 and "step 1" in lines[0]


def test_usage_by_round_sums_each_rounds_steps(store: Store) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    usage = {"uncached_input": 100, "cache_write": 5, "cached_input": 30, "output": 7}
    for r, s in [(1, 1), (1, 2), (2, 1)]:
        store.add_step(goal.id, run, r, s, text="", actions=[], usage=usage)
    store.add_step(goal.id, store.start_run(goal.id, 2), 3, 1, text="", actions=[], usage=usage)
    sums = store.usage_by_round(goal.id)
    assert sums[1] == {
        "uncached_input": 200,
        "cache_write": 10,
        "cached_input": 60,
        "output": 14,
        "calls": 2,
    }
    assert sorted(sums) == [1, 2, 3]
    assert sorted(store.usage_by_round(goal.id, run)) == [1, 2]


def test_audits_oldest_first_and_the_newest_ones(store: Store) -> None:
    goal = new_goal(store)
    for n in (1, 2, 3):
        store.add_audit(goal.id, n, n == 3, [{"kind": "file", "target": "a", "passed": True}])
    assert [a["round"] for a in store.audits(goal.id)] == [1, 2, 3]
    assert [a["round"] for a in store.audits(goal.id, last=2)] == [2, 3]
    assert store.latest_audit(goal.id)["passed"] is True


def test_save_goal_and_its_former_name_write_the_row(store: Store) -> None:
    goal = new_goal(store)
    store.save_goal(goal.id, "active", rounds=2)
    store.save_goal(goal.id, "active", rounds=3)
    assert store.goal(goal.id).rounds == 3


def test_an_older_database_gains_the_new_table_and_its_error_column_is_ignored(
    tmp_path: Path,
) -> None:
    path = tmp_path / "relay.db"
    first = Store(path)
    goal = new_goal(first)
    run = first.start_run(goal.id, 1)
    first.close()
    db = sqlite3.connect(path)  # as main left it: no earlier_rounds table, no run indexes
    db.executescript(
        "DROP TABLE earlier_rounds; DROP INDEX steps_run; DROP INDEX events_run;"
        "INSERT INTO steps (goal_id, run_id, round, step, text, error, created_at)"
        f" VALUES ('{goal.id}', '{run}', 1, 1, 'old', 'overloaded', 1.0);"
    )
    db.close()
    again = Store(path)
    try:
        again.import_earlier_rounds(goal.id, Tally(3, 1, 3, 9))
        again.add_step(goal.id, run, 1, 2, text="new", actions=[], usage={})
        assert again.round_tally(goal.id) == Tally(3, 1, 3, 9)
        assert [s["text"] for s in again.steps(goal.id)] == ["old", "new"]
        assert all("error" not in s for s in again.steps(goal.id))
        assert [format_step(s).split(": ", 1)[1] for s in again.log_steps(run)] == [
            "answered without a tool call: old",
            "answered without a tool call: new",
        ]
    finally:
        again.close()


def test_the_round_tally_reads_an_index_not_the_rounds(store: Store) -> None:
    goal = new_goal(store)
    seen = statements(store)
    store.round_tally(goal.id, before=5)
    store._db.set_trace_callback(None)
    query = next(sql for sql in seen if "FROM rounds" in sql)  # bound values expanded
    plan = [row[3] for row in store._db.execute("EXPLAIN QUERY PLAN " + query)]
    assert any("COVERING INDEX rounds_tally" in step for step in plan), plan
