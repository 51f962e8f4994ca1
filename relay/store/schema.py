"""The store's tables (SPEC §10) and what an older database gains when it is opened.

Every statement is ``IF NOT EXISTS``, so the script also brings an existing database up to
date with tables and indexes added since; columns added since are in :data:`ADDED_COLUMNS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from relay.store.failures import CheckedConnection

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS goals (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    goal_file TEXT,
    branch TEXT,
    base_commit TEXT NOT NULL,
    mode TEXT NOT NULL,
    model TEXT NOT NULL,
    deliverables TEXT NOT NULL,
    limits TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    message TEXT,
    question TEXT,
    rounds INTEGER NOT NULL DEFAULT 0,
    counted_rounds INTEGER NOT NULL DEFAULT 0,
    no_progress_streak INTEGER NOT NULL DEFAULT 0,
    blocked_reports INTEGER NOT NULL DEFAULT 0,
    auto_replies INTEGER NOT NULL DEFAULT 0,
    uncached_input INTEGER NOT NULL DEFAULT 0,
    cache_write INTEGER NOT NULL DEFAULT 0,
    cached_input INTEGER NOT NULL DEFAULT 0,
    output INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    elapsed_s REAL NOT NULL DEFAULT 0,
    progress_text TEXT,
    diagnosis TEXT,
    risk_score REAL NOT NULL DEFAULT 0,
    failure_streak INTEGER NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    overrides TEXT NOT NULL DEFAULT '{}',
    goal_file_digest TEXT,
    sandbox TEXT NOT NULL DEFAULT 'off',
    worker TEXT NOT NULL DEFAULT 'builtin',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS supplements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id TEXT NOT NULL REFERENCES goals(id),
    text TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    goal_id TEXT NOT NULL REFERENCES goals(id),
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT,
    exit_code INTEGER
);
CREATE TABLE IF NOT EXISTS rounds (
    goal_id TEXT NOT NULL REFERENCES goals(id),
    n INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    steps INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0,
    real_tool_calls INTEGER NOT NULL DEFAULT 0,
    files_changed TEXT NOT NULL DEFAULT '[]',
    commit_sha TEXT,
    handoff TEXT,
    handoff_auto INTEGER NOT NULL DEFAULT 0,
    end_reason TEXT,
    model_calls INTEGER,
    claim TEXT,
    PRIMARY KEY (goal_id, n)
);
CREATE TABLE IF NOT EXISTS steps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id TEXT NOT NULL REFERENCES goals(id),
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    step INTEGER NOT NULL,
    text TEXT,
    actions TEXT NOT NULL DEFAULT '[]',
    uncached_input INTEGER NOT NULL DEFAULT 0,
    cache_write INTEGER NOT NULL DEFAULT 0,
    cached_input INTEGER NOT NULL DEFAULT 0,
    output INTEGER NOT NULL DEFAULT 0,
    error TEXT,  -- no longer written or read; kept so that older relays can open the file
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id TEXT NOT NULL REFERENCES goals(id),
    run_id TEXT,
    round INTEGER,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    weight INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    goal_id TEXT NOT NULL REFERENCES goals(id),
    round INTEGER,
    passed INTEGER NOT NULL,
    checks TEXT NOT NULL,
    created_at REAL NOT NULL
);
-- the rounds before the first one stored, as a goal state summed them up (an imported goal)
CREATE TABLE IF NOT EXISTS earlier_rounds (
    goal_id TEXT PRIMARY KEY REFERENCES goals(id),
    count INTEGER NOT NULL,
    first INTEGER NOT NULL,
    last INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL
);
-- covers Store.round_tally: its aggregate reads index entries, not the rounds' rows
CREATE INDEX IF NOT EXISTS rounds_tally ON rounds(goal_id, n, ended_at, tool_calls);
CREATE INDEX IF NOT EXISTS steps_goal ON steps(goal_id, round);
CREATE INDEX IF NOT EXISTS steps_run ON steps(run_id, id);
CREATE INDEX IF NOT EXISTS events_goal ON events(goal_id);
CREATE INDEX IF NOT EXISTS events_run ON events(run_id, id);
CREATE INDEX IF NOT EXISTS audits_goal ON audits(goal_id);
"""


ADDED_COLUMNS = (
    ("goals", "risk_score", "REAL NOT NULL DEFAULT 0"),
    ("goals", "failure_streak", "INTEGER NOT NULL DEFAULT 0"),
    ("goals", "model_calls", "INTEGER NOT NULL DEFAULT 0"),
    ("goals", "overrides", "TEXT NOT NULL DEFAULT '{}'"),
    ("goals", "goal_file_digest", "TEXT"),
    ("goals", "sandbox", "TEXT NOT NULL DEFAULT 'off'"),
    ("goals", "worker", "TEXT NOT NULL DEFAULT 'builtin'"),
    ("rounds", "model_calls", "INTEGER"),
    ("rounds", "claim", "TEXT"),
)
"""Columns added since schema 1 was first written; older databases gain them on open."""


def migrate(db: CheckedConnection) -> None:
    """Bring an existing schema-1 database up to date: the columns of :data:`ADDED_COLUMNS`
    and the tables and indexes of :data:`SCHEMA` it lacks (nothing is removed or rewritten,
    so an older relay can still open the file)."""
    for table, column, ddl in ADDED_COLUMNS:
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")
    db.executescript(SCHEMA)
