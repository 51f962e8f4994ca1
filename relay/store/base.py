"""The store's connection: opening (and refusing) a database file, and transactions."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from relay.errors import StoreError
from relay.pathalarm import PathAlarm
from relay.store.failures import (
    CheckedConnection,
    connect,
    file_identity,
    keep_reserve,
    release_reserve,
    write_back,
)
from relay.store.schema import SCHEMA, SCHEMA_VERSION, migrate


class Connection:
    """An open relay database (SQLite, WAL) and its transactions; the tables' methods are
    mixed in by :class:`relay.store.Store`.

    No ``sqlite3`` exception leaves the store: each becomes a
    :class:`relay.errors.StoreAccessError` naming the file and what to do
    (:mod:`relay.store.failures`). A file deleted or replaced while it is open is written back
    before the next write transaction or ``data_version`` read, and recorded as ``tamper``
    (:attr:`on_written_back`, SPEC §14).

    Args:
        path: the database file (``<state_dir>/relay.db``); its folder is created.

    Raises:
        StoreError: the file exists but is not a readable relay database (never a silent
            fresh start), or a newer schema than this version knows.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._running: tuple[str, str] | None = None
        """``(goal id, run id)`` of the run this connection recorded the start of."""
        self._batched = False  # inside batch(): writes are savepoints of its transaction
        self.on_written_back: Callable[[str], None] | None = None
        """Records a file written back (the note, in words) as the running loop's ``tamper``
        finding; without it, the note is stored as a ``tamper`` event of the run."""
        existed = path.exists() and path.stat().st_size > 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot open the state database {path}: {exc}") from None
        self._db = connect(path)
        self._alarm = PathAlarm([os.path.abspath(path)], contents=False)  # before the look
        self._file = file_identity(path)
        try:
            if existed:  # look before changing anything: a foreign file stays as it was
                self._check_relay_database()
                migrate(self._db)
            self._setup(create=not existed)
        except StoreError:
            self._db.close()
            self._alarm.close()
            raise
        self._file = file_identity(path)
        keep_reserve(path)

    def _setup(self, *, create: bool) -> None:
        """The connection's settings and, for a new file, the schema."""
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        if create:
            self._db.executescript(SCHEMA)
            with self._tx() as db:
                db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )

    def _check_relay_database(self) -> None:
        """Raise ``StoreError`` unless the file holds relay's tables of a known schema."""
        tables = {
            r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if "goals" not in tables or "meta" not in tables:
            raise StoreError(
                f"{self.path} is not a goal-relay state database; move it away to start afresh"
            )
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        try:
            version = int(row[0]) if row else 0
        except (TypeError, ValueError):
            raise StoreError(f"{self.path} has an unreadable schema version") from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer goal-relay (schema {version}); upgrade relay"
            )

    def close(self) -> None:
        """Close the connection (a process that runs many goals keeps no file open)."""
        self._db.close()
        self._alarm.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def release_reserve(self) -> bool:
        """Free the disk space the store keeps for a full disk, so that the goal's status can
        still be written (:func:`relay.store.failures.release_reserve`); whether it had any."""
        return release_reserve(self.path)

    def check_writable(self) -> None:
        """Write to the database once (the schema version, unchanged), so that a file that
        cannot be written is refused before a run changes anything. Raises
        ``StoreAccessError`` naming the file and what to do."""
        with self._tx() as db:
            db.execute(
                "UPDATE meta SET value=value WHERE key='schema_version'",
            )

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: a number that changes whenever another connection
        (another process: ``relay pause``, ``relay say``, a model's command without the
        sandbox) committed to the database since the last call, and never for this
        connection's own writes. A file deleted or replaced meanwhile is written back first
        (not inside :meth:`batch`, whose transaction holds the file)."""
        if not self._batched:
            self._keep_file()
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _keep_file(self) -> None:
        """Write the database back when its file was deleted or replaced since it was opened
        (:func:`relay.store.failures.write_back`), open it again and record ``tamper``. It
        looks only when the kernel told of a change to the file or a folder on its way
        (:mod:`relay.pathalarm`)."""
        if not self._alarm.rang():
            return
        self._alarm = self._alarm.rearmed()
        if file_identity(self.path) == self._file:
            return
        note = write_back(self._db, self.path)
        self._db = connect(self.path)
        self._setup(create=False)
        self._file = file_identity(self.path)
        if self.on_written_back is not None:
            self.on_written_back(note)
        elif self._running is not None:  # the tamper of the run's latest round
            goal_id, run_id = self._running
            self._db.execute(
                "INSERT INTO events (goal_id, run_id, round, kind, detail, weight, created_at)"
                " SELECT ?, ?, MAX(n), 'tamper', ?, 0, ? FROM rounds WHERE goal_id=? AND run_id=?",
                (goal_id, run_id, note, time.time(), goal_id, run_id),
            )

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction for every write of the block: all of them are stored, or none
        (a round's end: its record, the goal's fields and the ``round_ended`` event). A write
        that fails inside is undone alone (a savepoint) and its error raised to its caller."""
        with self._tx():
            self._batched = True
            try:
                yield
            finally:
                self._batched = False

    @contextmanager
    def _tx(self) -> Iterator[CheckedConnection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed when the block ends, rolled back
        when it raises (inside :meth:`batch`: a savepoint of its transaction). Raises
        ``StoreAccessError`` when the database fails."""
        if self._batched:
            with self._savepoint():
                yield self._db
            return
        self._keep_file()
        try:  # a KeyboardInterrupt right after BEGIN never leaves the transaction open
            self._db.execute("BEGIN IMMEDIATE")
            yield self._db
        except BaseException:
            if self._db.in_transaction:
                with contextlib.suppress(StoreError):  # the first error is the one to tell
                    self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        self._db.execute("SAVEPOINT write")
        try:
            yield
        except BaseException:
            with contextlib.suppress(StoreError):
                self._db.execute("ROLLBACK TO write")
                self._db.execute("RELEASE write")
            raise
        self._db.execute("RELEASE write")
