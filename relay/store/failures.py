"""What goes wrong with the state database under relay, in words, and the one thing relay can
undo itself (issue 13, SPEC §10, §14).

Every ``sqlite3`` error of the store becomes a :class:`relay.errors.StoreAccessError` naming the
file and what to do (:func:`store_error`): a full disk, a file made read-only (``chattr +i``), a
corrupt file, a lock held by another process. The statements and reads go through
:class:`CheckedConnection` and :class:`CheckedRows`, so no ``sqlite3`` exception leaves the
store.

A database file deleted or replaced while relay has it open (a model's command without the
sandbox) is written back from the open connection, which still holds the whole database
(:func:`write_back`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from relay.errors import StoreAccessError

_KINDS = {
    sqlite3.SQLITE_FULL: "full",
    sqlite3.SQLITE_READONLY: "readonly",
    sqlite3.SQLITE_CORRUPT: "corrupt",
    sqlite3.SQLITE_NOTADB: "corrupt",
    sqlite3.SQLITE_BUSY: "locked",
    sqlite3.SQLITE_LOCKED: "locked",
    sqlite3.SQLITE_IOERR: "io",
    sqlite3.SQLITE_CANTOPEN: "io",
    sqlite3.SQLITE_PERM: "readonly",
}
"""SQLite's primary result code → the kind of :class:`StoreAccessError`."""

READONLY_DBMOVED = 1032
"""SQLite's extended code of a write to a database whose file was deleted or moved."""

_WORDS = {
    "full": "the disk holding the state database {path} is full ({error}): free disk space, "
    "then try again; `relay resume` continues the goal",
    "readonly": "the state database {path} cannot be written ({error}): make the file and its "
    "folder writable again (`chattr -i`, `chmod u+w`), then try again; `relay resume` "
    "continues the goal",
    "moved": "the state database {path} was deleted or moved while relay used it ({error}); "
    "`relay resume` continues the goal from the goal state its branch carries",
    "corrupt": "the state database {path} is corrupt ({error}): restore it from a backup, or "
    "move it away (`mv {path} {path}.corrupt`); `relay resume` on the goal's branch then "
    "continues the goal from the goal state its last round committed",
    "locked": "the state database {path} is locked by another process ({error}): let that "
    "process finish (or stop it), then try again",
    "io": "cannot read or write the state database {path} ({error}): check the disk and the "
    "file's permissions, then try again; `relay resume` continues the goal",
    "other": "the state database {path} failed ({error}); `relay resume` continues the goal "
    "once the cause is fixed",
}


def error_kind(exc: sqlite3.Error) -> str:
    """The kind of a ``sqlite3`` error: by SQLite's result code, else by its text."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code == READONLY_DBMOVED:
        return "moved"
    if isinstance(code, int) and code & 0xFF in _KINDS:
        return _KINDS[code & 0xFF]
    text = str(exc).lower()
    for words, kind in (
        ("disk is full", "full"),
        ("readonly", "readonly"),
        ("malformed", "corrupt"),
        ("not a database", "corrupt"),
        ("locked", "locked"),
        ("i/o error", "io"),
        ("unable to open", "io"),
    ):
        if words in text:
            return kind
    return "other"


def store_error(path: Path, exc: sqlite3.Error) -> StoreAccessError:
    """The :class:`StoreAccessError` of ``exc`` for the database ``path``: the file, what
    happened and what to do."""
    kind = error_kind(exc)
    message = _WORDS[kind].format(path=path, error=str(exc) or type(exc).__name__)
    return StoreAccessError(message, kind=kind, path=path)


class CheckedRows:
    """A cursor whose fetches raise :class:`StoreAccessError`, never a ``sqlite3`` error (rows
    of a damaged file can fail while they are fetched); other attributes are the cursor's."""

    def __init__(self, cursor: sqlite3.Cursor, path: Path) -> None:
        self._cursor = cursor
        self._path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def __iter__(self) -> CheckedRows:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._cursor)
        except sqlite3.Error as exc:
            raise store_error(self._path, exc) from None

    def fetchone(self) -> Any:
        try:
            return self._cursor.fetchone()
        except sqlite3.Error as exc:
            raise store_error(self._path, exc) from None

    def fetchall(self) -> list[Any]:
        try:
            return self._cursor.fetchall()
        except sqlite3.Error as exc:
            raise store_error(self._path, exc) from None


class CheckedConnection:
    """A ``sqlite3`` connection whose statements raise :class:`StoreAccessError` naming
    ``path``, never a ``sqlite3`` error; other attributes are the connection's."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.raw = db
        self.path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    def execute(self, sql: str, parameters: Any = ()) -> CheckedRows:
        try:
            return CheckedRows(self.raw.execute(sql, parameters), self.path)
        except sqlite3.Error as exc:
            raise store_error(self.path, exc) from None

    def executescript(self, sql_script: str) -> None:
        try:
            self.raw.executescript(sql_script)
        except sqlite3.Error as exc:
            raise store_error(self.path, exc) from None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.raw.close()


def connect(path: Path) -> CheckedConnection:
    """Open ``path`` (autocommit; :meth:`relay.store.base.Connection._tx` opens transactions).

    Raises:
        StoreAccessError: SQLite cannot open the file.
    """
    try:
        db = sqlite3.connect(path, timeout=30, isolation_level=None)
    except sqlite3.Error as exc:
        raise store_error(path, exc) from None
    db.row_factory = sqlite3.Row
    return CheckedConnection(db, path)


def file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``; None when there is none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def write_back(db: CheckedConnection, path: Path) -> str:
    """Write the database ``db`` still holds back to ``path``, whose file was deleted or
    replaced while ``db`` was open (SPEC §14: relay undoes what it can). A file found in its
    place is kept beside it as ``<name>.replaced-<time>``. Closes ``db``; the caller opens
    ``path`` again. Returns what was done, in words.

    Raises:
        StoreAccessError: the copy could not be written (names the file and what to do).
    """
    copy = path.with_name(f"{path.name}.restoring-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        copy.unlink(missing_ok=True)
        target = sqlite3.connect(copy)
        try:
            db.raw.backup(target)
        finally:
            target.close()
    except (sqlite3.Error, OSError) as exc:
        with contextlib.suppress(OSError):
            copy.unlink(missing_ok=True)
        if isinstance(exc, sqlite3.Error):
            raise store_error(path, exc) from None
        raise StoreAccessError(
            f"the state database {path} was deleted while the run used it, and relay cannot "
            f"write it back ({exc.strerror}); `relay resume` continues the goal from the goal "
            "state its branch carries",
            kind="io",
            path=path,
        ) from None
    db.close()
    try:
        return _put_back(copy, path)
    except OSError as exc:
        raise StoreAccessError(
            f"the state database {path} was deleted or replaced while the run used it, and "
            f"relay cannot write it back ({exc.strerror}); its copy is {copy}: move it to "
            f"{path}, then `relay resume` continues the goal",
            kind="io",
            path=path,
        ) from None


def _put_back(copy: Path, path: Path) -> str:
    """Move ``copy`` to ``path``, keeping a file found there beside it; returns the note."""
    note = f"the state database {path} was deleted while the run used it"
    if path.exists():
        aside = path.with_name(f"{path.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(path, aside)
        note = f"the state database {path} was replaced while the run used it (kept as {aside})"
    for suffix in ("-wal", "-shm"):  # the old file's log and index: never the new file's
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(copy, path)
    return note + "; relay wrote it back from its open connection"


RESERVE_BYTES = 256 * 1024
"""Disk space the store keeps in ``<database>.reserve``, freed when the disk is full so that
the goal's pause can still be written (:func:`release_reserve`)."""


def reserve_path(path: Path) -> Path:
    """The reserve file of the database ``path``."""
    return path.with_name(path.name + ".reserve")


def keep_reserve(path: Path) -> None:
    """Make the reserve file of the database ``path`` when it is missing (real blocks, not a
    sparse file); nothing when the disk has no room for it."""
    reserve = reserve_path(path)
    if reserve.exists():
        return
    try:
        with open(reserve, "xb") as fh:
            fh.write(bytes(RESERVE_BYTES))
    except FileExistsError:
        return
    except OSError:
        with contextlib.suppress(OSError):
            reserve.unlink()


def release_reserve(path: Path) -> bool:
    """Delete the reserve file of the database ``path`` (the disk is full); whether there was
    one. It is made again when the store is next opened with room on the disk."""
    try:
        reserve_path(path).unlink()
    except OSError:
        return False
    return True
