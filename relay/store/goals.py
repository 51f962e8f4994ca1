"""The goals and supplements tables: a goal's row, its guarded writes (SPEC §10) and imports."""

from __future__ import annotations

import json
import time
from typing import Any

from relay.errors import GoalStateError, UnreadableGoalError
from relay.store.base import Connection
from relay.store.records import GOAL_MUTABLE, GoalRecord, new_id

_JSON_COLUMNS = {"deliverables": list, "limits": dict, "overrides": dict}
"""Goal columns holding JSON, with the type each must decode to."""

_FROZEN = frozenset({"text", "base_commit", "mode", "worker", *_JSON_COLUMNS})
"""Goal columns fixed at creation that only :meth:`GoalRows.restore_goal` writes back."""


class GoalRows(Connection):
    """Methods of :class:`relay.store.Store` on goals and supplements."""

    def create_goal(
        self,
        *,
        text: str,
        goal_file: str | None,
        branch: str | None,
        base_commit: str,
        mode: str,
        model: str,
        worker: str = "builtin",
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
        row = {
            "id": goal_id,
            "text": text,
            "goal_file": goal_file,
            "branch": branch,
            "base_commit": base_commit,
            "mode": mode,
            "model": model,
            "worker": worker,
            "deliverables": json.dumps(deliverables),
            "limits": json.dumps(limits),
            "overrides": json.dumps(overrides or {}),
            "goal_file_digest": goal_file_digest,
            "status": "active",
            "created_at": now,
            "updated_at": now,
        }
        self._insert_goal(row)
        return self.goal(goal_id)

    def _insert_goal(self, row: dict[str, Any]) -> None:
        """One ``INSERT`` of a goal row (``row``: column → encoded value)."""
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._tx() as db:
            db.execute(f"INSERT INTO goals ({cols}) VALUES ({marks})", list(row.values()))

    def goal(self, goal_id: str) -> GoalRecord:
        """The goal ``goal_id`` with its supplements. Raises ``GoalStateError`` if unknown,
        ``UnreadableGoalError`` when a JSON column was changed outside relay."""
        row = self._db.execute("SELECT * FROM goals WHERE id=?", (goal_id,)).fetchone()
        if row is None:
            raise GoalStateError(f"no goal with id {goal_id}")
        data = dict(row)
        for name, kind in _JSON_COLUMNS.items():
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

    def save_goal(self, goal_id: str, expected_status: str | None, **fields: Any) -> None:
        """Write ``fields`` (columns of :data:`relay.store.records.GOAL_MUTABLE`) to the goal
        when its status is still ``expected_status`` (SPEC §10).

        ``expected_status=None`` skips the check (only for user commands that override).
        Raises ``GoalStateError`` when the goal's status changed meanwhile (e.g. a user pause),
        ``ValueError`` for a field that is not mutable.
        """
        unknown = set(fields) - GOAL_MUTABLE
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
        :meth:`save_goal`, but the frozen fields (``text``, ``base_commit``, ``mode``,
        ``deliverables``, ``limits``, ``overrides``; the last three as decoded JSON) may be
        written too. Raises ``GoalStateError`` when the status is not ``expected_status``."""
        plain = {k: v for k, v in fields.items() if k not in _FROZEN}
        encoded = {
            k: json.dumps(v) if k in _JSON_COLUMNS else v for k, v in fields.items() if k in _FROZEN
        }
        unknown = set(plain) - GOAL_MUTABLE
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

    def add_usage(
        self, goal_id: str, usage: dict[str, int], cost_usd: float, *, model_calls: int = 0
    ) -> None:
        """Add token counts (keys of :class:`relay.models.Usage`) and cost (USD) to the goal,
        and ``model_calls`` to its model calls (:meth:`count_model_call`), in one transaction."""
        with self._tx() as db:
            db.execute(
                "UPDATE goals SET uncached_input=uncached_input+?, cache_write=cache_write+?,"
                " cached_input=cached_input+?, output=output+?, cost_usd=cost_usd+?,"
                " model_calls=model_calls+?, updated_at=? WHERE id=?",
                (
                    usage["uncached_input"],
                    usage["cache_write"],
                    usage["cached_input"],
                    usage["output"],
                    cost_usd,
                    model_calls,
                    time.time(),
                    goal_id,
                ),
            )

    def count_model_call(self, goal_id: str) -> None:
        """Count one model call of the goal (what a scripted model consumed, for resuming)."""
        with self._tx() as db:
            db.execute("UPDATE goals SET model_calls=model_calls+1 WHERE id=?", (goal_id,))

    def import_goal_row(self, fields: dict[str, Any]) -> None:
        """Insert a goal row as another machine wrote it (``fields``: the goal's columns, JSON
        ones decoded). Raises ``GoalStateError`` when a goal with that id exists here."""
        if self._db.execute("SELECT 1 FROM goals WHERE id=?", (fields["id"],)).fetchone():
            raise GoalStateError(f"goal {fields['id']} already exists in {self.path}")
        row = dict(fields)
        for name, kind in _JSON_COLUMNS.items():
            row[name] = json.dumps(row.get(name) or kind())
        row["updated_at"] = time.time()
        row["created_at"] = row.get("created_at") or time.time()
        self._insert_goal(row)

    def delete_goal(self, goal_id: str) -> None:
        """Remove a goal and everything recorded for it (a failed import only)."""
        with self._tx() as db:
            for table in (
                "supplements",
                "runs",
                "rounds",
                "earlier_rounds",
                "steps",
                "events",
                "audits",
            ):
                db.execute(f"DELETE FROM {table} WHERE goal_id=?", (goal_id,))
            db.execute("DELETE FROM goals WHERE id=?", (goal_id,))

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

    def supplements(self, goal_id: str) -> list[dict[str, Any]]:
        """Supplements of the goal, oldest first: ``[{id, text, source, created_at}]``."""
        rows = self._db.execute(
            "SELECT id, text, source, created_at FROM supplements WHERE goal_id=? ORDER BY id",
            (goal_id,),
        )
        return [dict(r) for r in rows]
