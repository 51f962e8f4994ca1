"""The goal store (SPEC §10): SQLite with WAL, goal writes guarded by the expected status,
every record kind round-trips, and a file that is not a relay database is never overwritten."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay.errors import GoalStateError, StoreError
from relay.store import SCHEMA_VERSION, Store
from relay.store import base as store_base

DELIVERABLES = [
    {"file": "src/pool.py"},
    {"file": "README.md", "contains": "pool_size"},
    {"command": "pytest -q", "timeout_s": 600},
    {"changed": "src/**"},
]
LIMITS = {"max_rounds_total": 6, "max_rounds_without_progress": 2, "time_budget": 5400.0}


@pytest.fixture()
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state dir" / "relay.db"  # the folder does not exist yet


@pytest.fixture()
def store(db_path: Path) -> Any:
    s = Store(db_path)
    yield s
    s.close()


def new_goal(store: Store, text: str = "Add a connection pool", **extra: Any) -> Any:
    args: dict[str, Any] = {
        "text": text,
        "goal_file": None,
        "branch": "relay/add-a-connection-pool",
        "base_commit": "a" * 40,
        "mode": "relay",
        "model": "scripted:script.yaml",
        "deliverables": DELIVERABLES,
        "limits": LIMITS,
    }
    args.update(extra)
    return store.create_goal(**args)


# --- goals ------------------------------------------------------------------------------


def test_create_and_read_goal(store: Store, db_path: Path) -> None:
    assert db_path.exists()
    deliverables = [dict(d) for d in DELIVERABLES]
    limits = dict(LIMITS)
    goal = new_goal(store, "Add a pool — ünïcode ✓", deliverables=deliverables, limits=limits)
    assert len(goal.id) == 12
    assert goal.status == "active"
    assert goal.text == "Add a pool — ünïcode ✓"
    assert goal.deliverables == DELIVERABLES
    assert goal.limits == LIMITS
    assert goal.base_commit == "a" * 40
    assert (goal.rounds, goal.no_progress_streak, goal.blocked_reports) == (0, 0, 0)
    assert goal.supplements == []

    # frozen as given: changing the caller's objects later changes nothing stored
    deliverables.append({"file": "extra.py"})
    deliverables[0]["file"] = "other.py"
    limits["max_rounds_total"] = 999
    again = store.goal(goal.id)
    assert again.deliverables == DELIVERABLES
    assert again.limits == LIMITS


def test_deliverables_and_limits_cannot_be_updated(store: Store) -> None:
    goal = new_goal(store)
    for field in ("deliverables", "limits", "text", "base_commit", "id"):
        with pytest.raises(ValueError, match=field):
            store.save_goal(goal.id, "active", **{field: "x"})
    again = store.goal(goal.id)
    assert again.deliverables == DELIVERABLES
    assert again.limits == LIMITS
    assert again.text == "Add a connection pool"


def test_unknown_goal_id(store: Store) -> None:
    with pytest.raises(GoalStateError, match="nope"):
        store.goal("nope")
    with pytest.raises(GoalStateError, match="missing"):
        store.save_goal("nope", "active", status="paused")


def test_update_goal_with_the_expected_status(store: Store) -> None:
    goal = new_goal(store)
    store.save_goal(
        goal.id, "active", status="limit_reached", reason="total_rounds", rounds=6, question=None
    )
    updated = store.goal(goal.id)
    assert (updated.status, updated.reason, updated.rounds) == ("limit_reached", "total_rounds", 6)
    assert updated.updated_at >= goal.updated_at
    assert store.goal(goal.id).status == "limit_reached"
    # None skips the check (user commands)
    store.save_goal(goal.id, None, status="cleared")
    assert store.goal(goal.id).status == "cleared"


def test_stale_writer_cannot_overwrite_a_user_pause(db_path: Path) -> None:
    runner = Store(db_path)
    user = Store(db_path)  # e.g. `relay pause` in another process
    try:
        goal = new_goal(runner)
        runner.save_goal(goal.id, "active", rounds=2, no_progress_streak=1)

        user.save_goal(goal.id, "active", status="paused")

        with pytest.raises(GoalStateError) as info:
            runner.save_goal(goal.id, "active", rounds=3, status="limit_reached")
        assert "paused" in str(info.value)
        assert goal.id in str(info.value)

        for s in (runner, user):
            seen = s.goal(goal.id)
            assert seen.status == "paused"
            assert (seen.rounds, seen.no_progress_streak) == (2, 1)
    finally:
        runner.close()
        user.close()


def test_update_goal_unknown_field_raises_and_changes_nothing(store: Store) -> None:
    goal = new_goal(store)
    with pytest.raises(ValueError, match="colour"):
        store.save_goal(goal.id, "active", status="paused", colour="red")
    assert store.goal(goal.id).status == "active"


def test_add_usage_accumulates(store: Store) -> None:
    goal = new_goal(store)
    usage = {"uncached_input": 100, "cache_write": 20, "cached_input": 500, "output": 30}
    store.add_usage(goal.id, usage, 0.25)
    store.add_usage(goal.id, usage, 0.5)
    g = store.goal(goal.id)
    assert (g.uncached_input, g.cache_write, g.cached_input, g.output) == (200, 40, 1000, 60)
    assert g.cost_usd == pytest.approx(0.75)


def test_latest_goal_open_only_skips_complete_and_cleared(store: Store) -> None:
    assert store.latest_goal() is None
    assert store.latest_goal(open_only=True) is None
    first = new_goal(store, "first")
    second = new_goal(store, "second")
    third = new_goal(store, "third")
    assert store.latest_goal().id == third.id
    store.save_goal(third.id, "active", status="complete")
    store.save_goal(second.id, "active", status="cleared")
    assert store.latest_goal().id == third.id
    assert store.latest_goal(open_only=True).id == first.id
    store.save_goal(first.id, "active", status="blocked")  # blocked is still open
    assert store.latest_goal(open_only=True).id == first.id
    store.save_goal(first.id, "blocked", status="cleared")
    assert store.latest_goal(open_only=True) is None


# --- supplements, runs, rounds, steps, events, audits ---------------------------------


def test_supplements_oldest_first_and_per_goal(store: Store) -> None:
    goal = new_goal(store)
    other = new_goal(store, "other goal")
    store.add_supplement(goal.id, "use asyncio", "say")
    store.add_supplement(other.id, "not mine", "say")
    store.add_supplement(goal.id, "also document it", "inbox")
    store.add_supplement(goal.id, "edited goal", "goal_file")
    sups = store.goal(goal.id).supplements
    assert [(s["text"], s["source"]) for s in sups] == [
        ("use asyncio", "say"),
        ("also document it", "inbox"),
        ("edited goal", "goal_file"),
    ]
    assert sups[0]["created_at"] <= sups[1]["created_at"] <= sups[2]["created_at"]
    assert [s["text"] for s in store.supplements(other.id)] == ["not mine"]


def test_runs_round_trip(store: Store) -> None:
    goal = new_goal(store)
    first = store.start_run(goal.id, 4242)
    second = store.start_run(goal.id, 4343)
    assert first != second
    store.end_run(first, "paused", 130)
    runs = store.runs(goal.id)
    assert [r["id"] for r in runs] == [first, second]
    assert (runs[0]["pid"], runs[0]["status"], runs[0]["exit_code"]) == (4242, "paused", 130)
    assert runs[0]["ended_at"] is not None
    assert runs[1]["ended_at"] is None and runs[1]["status"] is None


def test_rounds_round_trip_and_restart_replaces_an_interrupted_round(store: Store) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    store.start_round(goal.id, 1, run)
    store.end_round(
        goal.id,
        1,
        steps=3,
        tool_calls=5,
        real_tool_calls=4,
        files_changed=["src/pool.py", "tests/test_pool.py"],
        commit_sha="abc1234",
        handoff="Pool written; tests next.",
        handoff_auto=0,
        end_reason="handoff",
    )
    store.start_round(goal.id, 2, run)  # interrupted (kill -9)
    store.start_round(goal.id, 2, run)  # restarted by the next run
    rounds = store.rounds(goal.id)
    assert [r.n for r in rounds] == [1, 2]
    r1 = rounds[0]
    assert r1.files_changed == ("src/pool.py", "tests/test_pool.py")
    assert (r1.steps, r1.tool_calls, r1.real_tool_calls) == (3, 5, 4)
    assert (r1.commit_sha, r1.handoff, r1.end_reason) == (
        "abc1234",
        "Pool written; tests next.",
        "handoff",
    )
    assert r1.finished and not r1.handoff_auto
    assert not rounds[1].finished and rounds[1].files_changed == ()


def test_steps_round_trip(store: Store) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    actions = [{"name": "shell", "arguments": {"command": "ls"}, "is_error": False}]
    usage = {"uncached_input": 1200, "cache_write": 0, "cached_input": 300, "output": 150}
    store.add_step(goal.id, run, 1, 1, text="Looking around.", actions=actions, usage=usage)
    store.add_step(goal.id, run, 1, 2, text="", actions=[], usage={})
    store.add_step(goal.id, run, 2, 1, text="Round two.", actions=[], usage=usage)
    steps = store.steps(goal.id)
    assert [(s["round"], s["step"]) for s in steps] == [(1, 1), (1, 2), (2, 1)]
    assert steps[0]["actions"] == actions
    assert steps[0]["text"] == "Looking around."
    assert (steps[0]["uncached_input"], steps[0]["cached_input"], steps[0]["output"]) == (
        1200,
        300,
        150,
    )
    assert steps[1]["output"] == 0 and "error" not in steps[1]  # the dead column is not read
    assert [s["text"] for s in store.steps(goal.id, 2)] == ["Round two."]


def test_events_round_trip(store: Store) -> None:
    goal = new_goal(store)
    run = store.start_run(goal.id, 1)
    store.add_event(goal.id, "loop", "rounds 6, 7", run_id=run, round_n=7, weight=30)
    store.add_event(goal.id, "warning", "forced tool choice off")
    events = store.events(goal.id)
    assert [(e["kind"], e["detail"], e["round"], e["weight"]) for e in events] == [
        ("loop", "rounds 6, 7", 7, 30),
        ("warning", "forced tool choice off", None, 0),
    ]
    assert [e["kind"] for e in store.events(goal.id, run_id=run)] == ["loop"]


def test_a_batch_stores_all_of_its_writes_or_none(db_path: Path) -> None:
    """A round's end writes its record, the goal's fields and its event in one transaction:
    another connection sees none of them until the batch ends, and an interrupt inside it
    leaves nothing half-written."""
    store, reader = Store(db_path), Store(db_path)
    try:
        goal = new_goal(store)
        with store.batch():
            store.save_goal(goal.id, "active", rounds=1)
            store.add_event(goal.id, "note", "first")
            assert reader.goal(goal.id).rounds == 0 and reader.events(goal.id) == []
        assert reader.goal(goal.id).rounds == 1 and len(reader.events(goal.id)) == 1
        with pytest.raises(KeyboardInterrupt), store.batch():
            store.save_goal(goal.id, "active", rounds=2)
            store.add_event(goal.id, "note", "second")
            raise KeyboardInterrupt
        assert store.goal(goal.id).rounds == 1 and len(store.events(goal.id)) == 1
    finally:
        store.close()
        reader.close()


def test_a_write_that_fails_inside_a_batch_is_undone_alone(db_path: Path) -> None:
    """The stale-writer check still works inside a batch: the refused write changes nothing,
    the batch's other writes are stored (save_final retries after a re-read)."""
    store, user = Store(db_path), Store(db_path)
    try:
        goal = new_goal(store)
        user.save_goal(goal.id, "active", status="paused")
        with store.batch():
            store.add_event(goal.id, "note", "kept")
            with pytest.raises(GoalStateError):
                store.save_goal(goal.id, "active", rounds=5, status="limit_reached")
            store.save_goal(goal.id, "paused", rounds=5)
        seen = user.goal(goal.id)
        assert (seen.status, seen.rounds) == ("paused", 5)
        assert [e["detail"] for e in user.events(goal.id)] == ["kept"]
    finally:
        store.close()
        user.close()


def test_the_database_file_is_looked_at_only_after_the_kernel_told_of_a_change(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each transaction checks that the file was not deleted or replaced; while the kernel
    tells of no change to it (SQLite's own -wal and -shm beside it are no change), that
    costs no stat. A file replaced meanwhile is seen and written back."""
    store = Store(db_path)
    try:
        goal = new_goal(store)
        looks: list[object] = []
        real = store_base.file_identity
        monkeypatch.setattr(store_base, "file_identity", lambda p: looks.append(p) or real(p))
        for n in range(5):
            store.data_version()
            store.add_event(goal.id, "note", f"event {n}")
        assert looks == []
        junk = db_path.with_name("junk")
        junk.write_text("not a database")
        os.replace(junk, db_path)
        store.data_version()
        assert looks and len(store.events(goal.id)) == 5
        assert list(db_path.parent.glob("relay.db.replaced-*"))
    finally:
        store.close()


def test_audits_round_trip_latest_wins(store: Store) -> None:
    goal = new_goal(store)
    assert store.latest_audit(goal.id) is None
    failing = [{"kind": "file", "target": "a.py", "passed": False, "evidence": "a.py missing"}]
    passing = [{"kind": "file", "target": "a.py", "passed": True, "evidence": "a.py exists"}]
    store.add_audit(goal.id, 3, False, failing)
    store.add_audit(goal.id, None, True, passing)
    latest = store.latest_audit(goal.id)
    assert latest is not None
    assert (latest["round"], latest["passed"], latest["checks"]) == (None, True, passing)
    other = new_goal(store, "other")
    assert store.latest_audit(other.id) is None


# --- the database file --------------------------------------------------------------------


def test_wal_mode_is_on(store: Store, db_path: Path) -> None:
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


def test_reopening_keeps_the_goals(db_path: Path) -> None:
    first = Store(db_path)
    goal = new_goal(first)
    first.add_supplement(goal.id, "more", "say")
    first.close()
    second = Store(db_path)
    try:
        again = second.goal(goal.id)
        assert again.text == goal.text
        assert [s["text"] for s in again.supplements] == ["more"]
    finally:
        second.close()


def test_a_file_that_is_not_a_database_raises(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    garbage = b"\x00\xffthis is not sqlite\n" * 200
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as info:
        Store(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == garbage  # never a silent fresh start


def test_a_sqlite_database_without_relay_tables_raises(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    db.execute("INSERT INTO notes (body) VALUES ('keep me')")
    db.commit()
    db.close()
    with pytest.raises(StoreError) as info:
        Store(path)
    assert str(path) in str(info.value)
    assert "not a goal-relay state database" in str(info.value)
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT body FROM notes").fetchall() == [("keep me",)]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "goals" not in tables
    finally:
        db.close()


def test_a_foreign_database_is_left_unchanged(tmp_path: Path) -> None:
    # Refusing a database must not alter it: not even its journal mode (a WAL switch is
    # persistent and changes how every other program opens the file).
    path = tmp_path / "relay.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreError):
        Store(path)
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        db.close()
    assert path.read_bytes() == before


def test_a_newer_schema_version_raises(db_path: Path) -> None:
    Store(db_path).close()
    db = sqlite3.connect(db_path)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreError) as info:
        Store(db_path)
    assert str(db_path) in str(info.value)
    assert "newer" in str(info.value)


def test_another_process_sees_committed_writes(store: Store, db_path: Path) -> None:
    goal = new_goal(store)
    store.add_supplement(goal.id, "from the first process", "say")
    store.save_goal(goal.id, "active", status="paused", rounds=4)
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from relay.store import Store\n"
        "s = Store(Path(sys.argv[1]))\n"
        "g = s.goal(sys.argv[2])\n"
        "s.add_event(g.id, 'note', 'written by the second process')\n"
        "print(json.dumps({'status': g.status, 'rounds': g.rounds,"
        " 'sups': [x['text'] for x in g.supplements]}))\n"
        "s.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(db_path), goal.id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout) == {
        "status": "paused",
        "rounds": 4,
        "sups": ["from the first process"],
    }
    # and this process sees what the other one committed
    assert [e["detail"] for e in store.events(goal.id)] == ["written by the second process"]
