"""The loop's copy of its goal row (relay.current_goal): read again only when another
connection wrote the database, and then checked against the loop's own writes (SPEC §14)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from relay.current_goal import CurrentGoal
from relay.store import Store
from tests.test_store_queries import new_goal


class Events:
    def __init__(self) -> None:
        self.added: list[tuple[str, str]] = []

    def tamper(self, detail: str) -> None:
        self.added.append(("tamper", detail))


@pytest.fixture()
def current(tmp_path: Path) -> Any:
    store = Store(tmp_path / "relay.db")
    goal = new_goal(store)
    events = Events()
    yield CurrentGoal(store, goal.id, events), store, events  # type: ignore[arg-type]
    store.close()


def test_no_read_while_nothing_else_wrote_and_own_writes_stay_current(current: Any) -> None:
    goal, store, _ = current
    reads: list[str] = []
    real = store.goal
    store.goal = lambda goal_id: reads.append(goal_id) or real(goal_id)
    goal.save(no_progress_streak=2)
    goal.count_model_call()
    for _ in range(5):
        value = goal.refresh()
    assert reads == []
    assert (value.no_progress_streak, value.model_calls) == (2, 1)
    assert real(goal.goal_id).model_calls == 1  # the copy says what the store says


def test_another_connections_write_is_read_and_tampering_undone(
    current: Any, tmp_path: Path
) -> None:
    goal, store, events = current
    other = sqlite3.connect(tmp_path / "relay.db", isolation_level=None)
    other.execute("UPDATE goals SET status='paused', reason='user' WHERE id=?", (goal.goal_id,))
    assert goal.refresh().status == "paused"  # relay pause from another process
    other.execute("UPDATE goals SET limits='{}' WHERE id=?", (goal.goal_id,))
    assert goal.refresh().limits == {"max_rounds_total": 9}  # a frozen field, restored
    assert store.goal(goal.goal_id).limits == {"max_rounds_total": 9}
    assert [kind for kind, _ in events.added] == ["tamper"]
    other.close()


def test_force_reads_a_write_of_this_process_that_bypassed_the_copy(current: Any) -> None:
    goal, store, _ = current
    store.add_supplement(goal.goal_id, "also cover the CLI", "inbox")
    assert goal.refresh().supplements == []
    assert [s["text"] for s in goal.refresh(force=True).supplements] == ["also cover the CLI"]
