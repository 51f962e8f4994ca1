"""The goal store: SQLite in ``<state_dir>/relay.db`` with WAL (SPEC §10).

Tables: goals, supplements, runs, rounds, steps, events, audits. Every write to a goal row names
the status it expects, so that a stale process can never overwrite a newer goal or a user's
pause (:meth:`Store.update_goal` raises :class:`relay.errors.GoalStateError` otherwise).
Writes are transactions; a process killed at any point loses at most the step in flight.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay.errors import GoalStateError, StoreError, UnreadableGoalError

SCHEMA_VERSION = 1

_SCHEMA = """
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
    error TEXT,
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
CREATE INDEX IF NOT EXISTS steps_goal ON steps(goal_id, round);
CREATE INDEX IF NOT EXISTS events_goal ON events(goal_id);
CREATE INDEX IF NOT EXISTS audits_goal ON audits(goal_id);
"""

_GOAL_COUNTERS = (
    "rounds",
    "counted_rounds",
    "no_progress_streak",
    "blocked_reports",
    "auto_replies",
)
_GOAL_MUTABLE = frozenset(
    {
        "status",
        "reason",
        "message",
        "question",
        "branch",
        "sandbox",
        *_GOAL_COUNTERS,
        "uncached_input",
        "cache_write",
        "cached_input",
        "output",
        "cost_usd",
        "elapsed_s",
        "progress_text",
        "diagnosis",
        "risk_score",
        "failure_streak",
        "goal_file_digest",
    }
)


@dataclass
class GoalRecord:
    """One row of ``goals``; ``deliverables`` and ``limits`` are decoded JSON (frozen at creation)."""

    id: str
    text: str
    goal_file: str | None
    branch: str | None
    base_commit: str
    mode: str
    model: str
    deliverables: list[dict[str, Any]]
    limits: dict[str, Any]
    status: str
    reason: str | None
    message: str | None
    question: str | None
    rounds: int
    counted_rounds: int
    no_progress_streak: int
    blocked_reports: int
    auto_replies: int
    uncached_input: int
    cache_write: int
    cached_input: int
    output: int
    cost_usd: float
    elapsed_s: float
    progress_text: str | None
    diagnosis: str | None
    risk_score: float
    failure_streak: int
    model_calls: int
    overrides: dict[str, Any]
    goal_file_digest: str | None
    created_at: float
    updated_at: float
    sandbox: str = "off"
    """The sandbox in force in the goal's latest run: ``bwrap`` or ``off`` (SPEC §14)."""
    supplements: list[dict[str, Any]] = field(default_factory=list)


def _decoded(text: Any, default: list[Any]) -> list[Any]:
    """A JSON list column; ``default`` when something outside relay wrote garbage there (the
    row stays readable: no traceback from a tampered store, SPEC §14)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return default
    return value if isinstance(value, list) else default


def new_id() -> str:
    """A short random id (12 hex characters) for goals and runs."""
    return uuid.uuid4().hex[:12]


class Store:
    """The SQLite store of one working tree.

    Args:
        path: the database file (``<state_dir>/relay.db``); its folder is created.

    Raises:
        StoreError: the file exists but is not a readable relay database (never a silent
            fresh start), or a newer schema than this version knows.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        existed = path.exists() and path.stat().st_size > 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise StoreError(f"cannot open the state database {path}: {exc}") from None
        try:
            self._db.row_factory = sqlite3.Row
            if existed:  # look before changing anything: a foreign file stays as it was
                tables = {
                    r[0]
                    for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
                if "goals" not in tables or "meta" not in tables:
                    raise StoreError(
                        f"{path} is not a goal-relay state database; move it away to start afresh"
                    )
                self._check_version()
                self._migrate()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            if not existed:
                self._db.executescript(_SCHEMA)
                with self._tx() as db:
                    db.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(
                f"the state database {path} is unreadable or corrupt ({exc}); "
                "move it away to start afresh (its goals would be lost)"
            ) from None
        except StoreError:
            self._db.close()
            raise

    def _check_version(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer goal-relay (schema {version}); upgrade relay"
            )

    _ADDED_COLUMNS = (
        ("goals", "risk_score", "REAL NOT NULL DEFAULT 0"),
        ("goals", "failure_streak", "INTEGER NOT NULL DEFAULT 0"),
        ("goals", "model_calls", "INTEGER NOT NULL DEFAULT 0"),
        ("goals", "overrides", "TEXT NOT NULL DEFAULT '{}'"),
        ("goals", "goal_file_digest", "TEXT"),
        ("goals", "sandbox", "TEXT NOT NULL DEFAULT 'off'"),
    )
    """Columns added since schema 1 was first written; older databases gain them on open."""

    def _migrate(self) -> None:
        for table, column, ddl in self._ADDED_COLUMNS:
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    # goals ---------------------------------------------------------------------------------

    def create_goal(
        self,
        *,
        text: str,
        goal_file: str | None,
        branch: str | None,
        base_commit: str,
        mode: str,
        model: str,
        deliverables: list[dict[str, Any]],
        limits: dict[str, Any],
        overrides: dict[str, Any] | None = None,
        goal_file_digest: str | None = None,
    ) -> GoalRecord:
        """Insert a new ``active`` goal; deliverables and limits are frozen here (SPEC §9, §7.2).

        ``overrides`` are the settings the goal was started with beyond relay.yaml (goal-file
        front matter and flags), re-applied when it resumes; ``goal_file_digest`` the SHA-256
        of the goal file, to notice edits made while no run watched it."""
        goal_id = new_id()
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO goals (id, text, goal_file, branch, base_commit, mode, model,"
                " deliverables, limits, overrides, goal_file_digest, status, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)",
                (
                    goal_id,
                    text,
                    goal_file,
                    branch,
                    base_commit,
                    mode,
                    model,
                    json.dumps(deliverables),
                    json.dumps(limits),
                    json.dumps(overrides or {}),
                    goal_file_digest,
                    now,
                    now,
                ),
            )
        return self.goal(goal_id)

    def goal(self, goal_id: str) -> GoalRecord:
        """The goal ``goal_id`` with its supplements. Raises ``GoalStateError`` if unknown."""
        row = self._db.execute("SELECT * FROM goals WHERE id=?", (goal_id,)).fetchone()
        if row is None:
            raise GoalStateError(f"no goal with id {goal_id}")
        data = dict(row)
        expected = {"deliverables": list, "limits": dict, "overrides": dict}
        for name, kind in expected.items():
            try:
                data[name] = json.loads(data[name])
            except (TypeError, ValueError):
                data[name] = None
            if not isinstance(data[name], kind):
                raise UnreadableGoalError(
                    f"goal {goal_id}: its {name} in {self.path} cannot be read (the store was "
                    "changed outside relay)",
                    goal_id,
                )
        record = GoalRecord(**data)
        record.supplements = self.supplements(goal_id)
        return record

    def latest_goal(self, *, open_only: bool = False) -> GoalRecord | None:
        """The most recently created goal (only open ones — not complete/cleared — if asked)."""
        sql = "SELECT id FROM goals"
        if open_only:
            sql += " WHERE status NOT IN ('complete', 'cleared')"
        row = self._db.execute(sql + " ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
        return self.goal(row[0]) if row else None

    def update_goal(self, goal_id: str, expected_status: str | None, **fields: Any) -> None:
        """Write ``fields`` to the goal when its status is still ``expected_status``.

        ``expected_status=None`` skips the check (only for user commands that override).
        Raises ``GoalStateError`` when the goal's status changed meanwhile (e.g. a user pause).
        """
        unknown = set(fields) - _GOAL_MUTABLE
        if unknown:
            raise ValueError(f"not a mutable goal field: {sorted(unknown)}")
        if not self._write_goal(goal_id, expected_status, fields):
            current = self._db.execute("SELECT status FROM goals WHERE id=?", (goal_id,)).fetchone()
            now = current[0] if current else "missing"
            raise GoalStateError(
                f"goal {goal_id} is {now}, not {expected_status}: it was changed by another process"
            )

    def restore_goal(self, goal_id: str, expected_status: str | None, **fields: Any) -> None:
        """Write back fields that something other than relay changed (SPEC §14): like
        :meth:`update_goal`, but the frozen fields (``text``, ``base_commit``, ``mode``,
        ``deliverables``, ``limits``, ``overrides``; the last three as decoded JSON) may be
        written too. Raises ``GoalStateError`` when the status is not ``expected_status``."""
        frozen = {"text", "base_commit", "mode", "deliverables", "limits", "overrides"}
        plain = {k: v for k, v in fields.items() if k not in frozen}
        encoded = {
            k: json.dumps(v) if k in ("deliverables", "limits", "overrides") else v
            for k, v in fields.items()
            if k in frozen
        }
        unknown = set(plain) - _GOAL_MUTABLE
        if unknown:
            raise ValueError(f"not a goal field relay restores: {sorted(unknown)}")
        if not self._write_goal(goal_id, expected_status, {**plain, **encoded}):
            raise GoalStateError(f"goal {goal_id} changed while relay restored it")

    def _write_goal(
        self, goal_id: str, expected_status: str | None, values: dict[str, Any]
    ) -> bool:
        """One ``UPDATE`` of the goal's row (``updated_at`` set too), only while its status is
        ``expected_status`` when that is given; False when no row was written."""
        values = {**values, "updated_at": time.time()}
        sql = f"UPDATE goals SET {', '.join(f'{k}=?' for k in values)} WHERE id=?"
        params: list[Any] = [*values.values(), goal_id]
        if expected_status is not None:
            sql += " AND status=?"
            params.append(expected_status)
        with self._tx() as db:
            return db.execute(sql, params).rowcount > 0

    def add_usage(self, goal_id: str, usage: dict[str, int], cost_usd: float) -> None:
        """Add token counts (keys of :class:`relay.models.Usage`) and cost (USD) to the goal."""
        with self._tx() as db:
            db.execute(
                "UPDATE goals SET uncached_input=uncached_input+?, cache_write=cache_write+?,"
                " cached_input=cached_input+?, output=output+?, cost_usd=cost_usd+?,"
                " updated_at=? WHERE id=?",
                (
                    usage["uncached_input"],
                    usage["cache_write"],
                    usage["cached_input"],
                    usage["output"],
                    cost_usd,
                    time.time(),
                    goal_id,
                ),
            )

    def count_model_call(self, goal_id: str) -> None:
        """Count one model call of the goal (what a scripted model consumed, for resuming)."""
        with self._tx() as db:
            db.execute("UPDATE goals SET model_calls=model_calls+1 WHERE id=?", (goal_id,))

    # supplements ---------------------------------------------------------------------------

    def add_supplement(
        self, goal_id: str, text: str, source: str, *, created_at: float | None = None
    ) -> None:
        """Store a supplement (``source``: ``say``, ``inbox``, ``goal_file``) with its time
        (now, unless ``created_at`` — UNIX seconds — says otherwise)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO supplements (goal_id, text, source, created_at) VALUES (?, ?, ?, ?)",
                (goal_id, text, source, created_at if created_at is not None else time.time()),
            )

    def import_goal_row(self, fields: dict[str, Any]) -> None:
        """Insert a goal row as another machine wrote it (``fields``: the goal's columns, JSON
        ones decoded). Raises ``GoalStateError`` when a goal with that id exists here."""
        if self._db.execute("SELECT 1 FROM goals WHERE id=?", (fields["id"],)).fetchone():
            raise GoalStateError(f"goal {fields['id']} already exists in {self.path}")
        row = dict(fields)
        for name in ("deliverables", "limits", "overrides"):
            row[name] = json.dumps(row.get(name) or ({} if name == "overrides" else []))
        row["updated_at"] = time.time()
        row["created_at"] = row.get("created_at") or time.time()
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._tx() as db:
            db.execute(f"INSERT INTO goals ({cols}) VALUES ({marks})", list(row.values()))

    def delete_goal(self, goal_id: str) -> None:
        """Remove a goal and everything recorded for it (a failed import only)."""
        with self._tx() as db:
            for table in ("supplements", "runs", "rounds", "steps", "events", "audits"):
                db.execute(f"DELETE FROM {table} WHERE goal_id=?", (goal_id,))
            db.execute("DELETE FROM goals WHERE id=?", (goal_id,))

    def import_round(self, goal_id: str, r: dict[str, Any]) -> None:
        """Insert a finished round's record as another machine wrote it."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO rounds (goal_id, n, run_id, started_at, ended_at, steps,"
                " tool_calls, real_tool_calls, files_changed, commit_sha, handoff, handoff_auto,"
                " end_reason) VALUES (?, ?, 'imported', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    goal_id,
                    r["n"],
                    r.get("started_at") or r["ended_at"],
                    r["ended_at"],
                    r.get("steps", 0),
                    r.get("tool_calls", 0),
                    r.get("real_tool_calls", 0),
                    json.dumps(r.get("files_changed", [])),
                    r.get("commit_sha"),
                    r.get("handoff"),
                    r.get("handoff_auto", 0),
                    r.get("end_reason"),
                ),
            )

    def supplements(self, goal_id: str) -> list[dict[str, Any]]:
        """Supplements of the goal, oldest first: ``[{id, text, source, created_at}]``."""
        rows = self._db.execute(
            "SELECT id, text, source, created_at FROM supplements WHERE goal_id=? ORDER BY id",
            (goal_id,),
        )
        return [dict(r) for r in rows]

    # runs, rounds, steps -------------------------------------------------------------------

    def start_run(self, goal_id: str, pid: int) -> str:
        """Record a new run of the goal; returns its id."""
        run_id = time.strftime("%Y%m%d-%H%M%S-") + new_id()[:6]
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs (id, goal_id, pid, started_at) VALUES (?, ?, ?, ?)",
                (run_id, goal_id, pid, time.time()),
            )
        return run_id

    def end_run(self, run_id: str, status: str, exit_code: int) -> None:
        """Mark a run as ended with the goal status and exit code it ended with."""
        with self._tx() as db:
            db.execute(
                "UPDATE runs SET ended_at=?, status=?, exit_code=? WHERE id=?",
                (time.time(), status, exit_code, run_id),
            )

    def runs(self, goal_id: str) -> list[dict[str, Any]]:
        """Runs of the goal, oldest first."""
        rows = self._db.execute(
            "SELECT * FROM runs WHERE goal_id=? ORDER BY started_at, rowid", (goal_id,)
        )
        return [dict(r) for r in rows]

    def run_record(self, run_id: str) -> dict[str, Any] | None:
        """The run ``run_id`` (id, goal_id, pid, started_at, ended_at, status, exit_code)."""
        row = self._db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return dict(row) if row else None

    def start_round(self, goal_id: str, n: int, run_id: str) -> None:
        """Record the start of round ``n`` (replacing an interrupted record of the same n)."""
        with self._tx() as db:
            db.execute("DELETE FROM rounds WHERE goal_id=? AND n=?", (goal_id, n))
            db.execute(
                "INSERT INTO rounds (goal_id, n, run_id, started_at) VALUES (?, ?, ?, ?)",
                (goal_id, n, run_id, time.time()),
            )

    def end_round(self, goal_id: str, n: int, **fields: Any) -> None:
        """Complete round ``n``'s record (steps, tool_calls, real_tool_calls, files_changed (list),
        commit_sha, handoff, handoff_auto, end_reason)."""
        if "files_changed" in fields:
            fields["files_changed"] = json.dumps(fields["files_changed"])
        fields["ended_at"] = time.time()
        cols = ", ".join(f"{k}=?" for k in fields)
        with self._tx() as db:
            db.execute(
                f"UPDATE rounds SET {cols} WHERE goal_id=? AND n=?", (*fields.values(), goal_id, n)
            )

    def open_round(self, goal_id: str) -> int | None:
        """The number of a round that started but never ended (an interrupted run), or None."""
        row = self._db.execute(
            "SELECT n FROM rounds WHERE goal_id=? AND ended_at IS NULL ORDER BY n DESC LIMIT 1",
            (goal_id,),
        ).fetchone()
        return row[0] if row else None

    def rounds(self, goal_id: str) -> list[dict[str, Any]]:
        """Round records of the goal, oldest first; ``files_changed`` decoded."""
        rows = self._db.execute("SELECT * FROM rounds WHERE goal_id=? ORDER BY n", (goal_id,))
        out = []
        for r in rows:
            d = dict(r)
            d["files_changed"] = _decoded(d["files_changed"], [])
            out.append(d)
        return out

    def add_step(
        self,
        goal_id: str,
        run_id: str,
        round_n: int,
        step: int,
        *,
        text: str,
        actions: list[dict[str, Any]],
        usage: dict[str, int],
        error: str | None = None,
    ) -> None:
        """Record one step: the response text, its actions (``[{name, arguments, is_error,
        result_digest}]``), its usage (token counts) or the error of a failed call."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO steps (goal_id, run_id, round, step, text, actions, uncached_input,"
                " cache_write, cached_input, output, error, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    goal_id,
                    run_id,
                    round_n,
                    step,
                    text,
                    json.dumps(actions),
                    usage.get("uncached_input", 0),
                    usage.get("cache_write", 0),
                    usage.get("cached_input", 0),
                    usage.get("output", 0),
                    error,
                    time.time(),
                ),
            )

    def steps(self, goal_id: str, round_n: int | None = None) -> list[dict[str, Any]]:
        """Steps of the goal (or of one round), in order; ``actions`` decoded."""
        sql, params = "SELECT * FROM steps WHERE goal_id=?", [goal_id]
        if round_n is not None:
            sql += " AND round=?"
            params.append(round_n)
        rows = self._db.execute(sql + " ORDER BY id", params)
        out = []
        for r in rows:
            d = dict(r)
            d["actions"] = _decoded(d["actions"], [])
            out.append(d)
        return out

    def run_steps(self, run_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        """Steps of one run with an id above ``after_id``, in order; ``actions`` decoded."""
        rows = self._db.execute(
            "SELECT * FROM steps WHERE run_id=? AND id>? ORDER BY id", (run_id, after_id)
        )
        out = []
        for r in rows:
            d = dict(r)
            d["actions"] = _decoded(d["actions"], [])
            out.append(d)
        return out

    # events and audits ---------------------------------------------------------------------

    def add_event(
        self,
        goal_id: str,
        kind: str,
        detail: str,
        *,
        run_id: str | None = None,
        round_n: int | None = None,
        weight: int = 0,
    ) -> None:
        """Record an event (guard events, warnings, API errors, status changes)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO events (goal_id, run_id, round, kind, detail, weight, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (goal_id, run_id, round_n, kind, detail, weight, time.time()),
            )

    def events(
        self, goal_id: str, run_id: str | None = None, after_id: int = 0
    ) -> list[dict[str, Any]]:
        """Events of the goal (or of one run), oldest first; only those with an id above
        ``after_id`` (for following a live run)."""
        sql, params = "SELECT * FROM events WHERE goal_id=? AND id>?", [goal_id, after_id]
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        return [dict(r) for r in self._db.execute(sql + " ORDER BY id", params)]

    def add_audit(
        self, goal_id: str, round_n: int | None, passed: bool, checks: list[dict[str, Any]]
    ) -> None:
        """Record an audit result: ``checks`` is ``[{kind, target, passed, evidence}]``."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO audits (goal_id, round, passed, checks, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (goal_id, round_n, int(passed), json.dumps(checks), time.time()),
            )

    def latest_audit(self, goal_id: str) -> dict[str, Any] | None:
        """The goal's most recent audit ``{round, passed, checks, created_at}`` or None."""
        row = self._db.execute(
            "SELECT round, passed, checks, created_at FROM audits WHERE goal_id=?"
            " ORDER BY id DESC LIMIT 1",
            (goal_id,),
        ).fetchone()
        if row is None:
            return None
        return {
            "round": row["round"],
            "passed": bool(row["passed"]),
            "checks": _decoded(row["checks"], []),
            "created_at": row["created_at"],
        }
