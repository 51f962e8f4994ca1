"""The state database failing under relay (issue 13, item 15; SPEC §10, §14): a corrupt file, a
file that cannot be written, a full disk, a file deleted while a run uses it. Each is a message
naming the file and what to do, never a traceback; the goal's work is kept (committed, or left
in the tree for `relay resume` to commit) and the goal stays resumable; a full disk pauses it.

The failures are SQLite's own: a read-only file is a connection with ``PRAGMA query_only`` (the
error ``attempt to write a readonly database``, as for ``chattr +i``; root ignores mode bits),
a full disk is a ``max_page_count`` at the database's size (``database or disk is full``)."""

from __future__ import annotations

import errno
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, flat, git, respond, state_dir

from relay.errors import StoreAccessError, StoreError
from relay.store import Store

NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
QUESTION = respond(call("update_goal", status="needs_user_input", summary="?", question="Q?"))
WRITE_NOTES = respond(call("write_file", path="notes.txt", content="hello\n"))


def db_of(repo: Path) -> Path:
    return state_dir(repo) / "relay.db"


def relay_cmd(repo: Path, script: Path, *args: str) -> list[str | Path]:
    return [*args, "--repo", repo, "--model", f"scripted:{script}"]


def no_traceback(code: int, err: str) -> str:
    assert "Traceback" not in err and "sqlite3." not in err, err
    return flat(err)


def status_json(run_relay: Callable[..., Any], repo: Path) -> dict[str, Any]:
    code, out, err = run_relay(["status", "--repo", repo, "--json"])
    assert code == 0, err
    return json.loads(out)


def goal_waiting(make_repo, write_script, run_relay) -> Path:
    """A repository whose goal waits for the user after one round (needs_user_input)."""
    repo = make_repo(config=NOTES)
    script = write_script([respond(call("write_file", path="a.txt", content="a\n")), QUESTION])
    code, _, err = run_relay(relay_cmd(repo, script, "run", "Do it.", "--sandbox", "off"))
    assert code == 2, err
    return repo


# a corrupt file ---------------------------------------------------------------------------------


def zero_second_half(db: Path) -> None:
    """Fill the database with events first (so that its schema and goal row stay readable at
    the start of the file), then zero the second half of the file, as a broken disk would."""
    store = Store(db)
    goal = store.latest_goal()
    assert goal is not None
    for i in range(400):
        store.add_event(goal.id, "warning", f"filler {i} " + "x" * 1000)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the file itself
    store.close()
    data = bytearray(db.read_bytes())
    half = len(data) // 2
    data[half:] = bytes(len(data) - half)
    db.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "command",
    [["status"], ["status", "--json"], ["resume"], ["run"], ["log"], ["say", "more"], ["clear"]],
    ids=" ".join,
)
def test_a_database_whose_second_half_is_zeroed_is_a_message_naming_the_file(
    command, make_repo, write_script, run_relay
):
    repo = goal_waiting(make_repo, write_script, run_relay)
    db = db_of(repo)
    zero_second_half(db)
    head = git(repo, "rev-parse", "HEAD")
    script = write_script([WRITE_NOTES, complete()])
    args: list[str | Path] = [*command, "--repo", repo]
    if command[0] in ("resume", "run"):
        args += ["--model", f"scripted:{script}"]
    code, _, err = run_relay(args)
    said = no_traceback(code, err)
    if command[0] in ("say", "clear") and code == 0:
        return  # what these read and write is in the half that is still whole
    assert code == 1, err
    assert str(db) in said and "corrupt" in said, said
    assert "move it away" in said and "relay resume" in said, said
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_corrupt_database_moved_away_lets_resume_continue_from_the_branch(
    make_repo, write_script, run_relay
):
    repo = goal_waiting(make_repo, write_script, run_relay)
    db = db_of(repo)
    zero_second_half(db)
    code, _, err = run_relay(["status", "--repo", repo])
    said = no_traceback(code, err)
    mv = said.split("(`mv ")[1].split("`")[0].split()
    Path(mv[0]).rename(mv[1])  # what the message says to do
    code, _, err = run_relay(["status", "--repo", repo])
    assert code == 0 and "`relay resume` continues it" in flat(err), err
    script = write_script([WRITE_NOTES, complete()])
    code, _, err = run_relay(relay_cmd(repo, script, "resume"))
    no_traceback(code, err)
    assert code == 0, err
    assert status_json(run_relay, repo)["status"] == "complete"


def test_a_folder_where_the_database_should_be_is_a_message_naming_it(tmp_path):
    path = tmp_path / "state" / "relay.db"
    path.mkdir(parents=True)
    (path / "x").write_text("x")
    with pytest.raises(StoreError) as caught:
        Store(path)
    assert str(path) in str(caught.value)


# a file that cannot be written ------------------------------------------------------------------


@pytest.fixture()
def read_only(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """``read_only()``: every connection the store opens from now on cannot write (SQLite's
    ``attempt to write a readonly database``)."""
    from relay.store import base

    def make() -> None:
        real = base.connect

        def connect(path: Path) -> Any:
            db = real(path)
            db.execute("PRAGMA query_only=ON")
            return db

        monkeypatch.setattr(base, "connect", connect)

    return make


def test_resume_refuses_a_read_only_database_before_any_change(
    make_repo, write_script, run_relay, read_only
):
    repo = goal_waiting(make_repo, write_script, run_relay)
    git(repo, "checkout", "-q", "main")
    before = (git(repo, "rev-parse", "HEAD"), (repo / ".git" / "info" / "exclude").read_bytes())
    read_only()
    script = write_script([WRITE_NOTES, complete()])
    code, _, err = run_relay(relay_cmd(repo, script, "resume"))
    said = no_traceback(code, err)
    assert code == 1
    assert str(db_of(repo)) in said and "cannot be written" in said, said
    assert "readonly" in said and "chattr -i" in said and "relay resume" in said, said
    after = (git(repo, "rev-parse", "HEAD"), (repo / ".git" / "info" / "exclude").read_bytes())
    assert after == before
    assert git(repo, "branch", "--show-current").strip() == "main"


@pytest.mark.parametrize("command", [["say", "more"], ["clear"]], ids=" ".join)
def test_a_control_command_on_a_read_only_database_names_the_file(
    command, make_repo, write_script, run_relay, read_only
):
    repo = goal_waiting(make_repo, write_script, run_relay)
    read_only()
    code, _, err = run_relay([*command, "--repo", repo])
    said = no_traceback(code, err)
    assert code == 1 and str(db_of(repo)) in said and "cannot be written" in said, said


def test_status_reads_a_read_only_database(make_repo, write_script, run_relay, read_only):
    repo = goal_waiting(make_repo, write_script, run_relay)
    read_only()
    data = status_json(run_relay, repo)
    assert data["status"] == "needs_user_input"


def test_a_database_that_becomes_read_only_mid_run_stops_the_run_with_the_work_committed(
    make_repo, write_script, run_relay, monkeypatch
):
    from relay.store import base

    repo = make_repo(config=NOTES)
    marker = repo.parent / "lock-the-store"
    real_tx = base.Connection._tx

    def tx(self: Any) -> Any:
        if marker.exists():  # the model's command "made the file read-only"
            self._db.execute("PRAGMA query_only=ON")
        return real_tx(self)

    monkeypatch.setattr(base.Connection, "_tx", tx)
    script = write_script(
        [
            WRITE_NOTES,
            respond(call("shell", command=f"touch '{marker}'")),
            complete(),
        ]
    )
    code, _, err = run_relay(relay_cmd(repo, script, "run", "Do it.", "--sandbox", "off"))
    said = no_traceback(code, err)
    assert code == 1
    assert str(db_of(repo)) in said and "cannot be written" in said, said
    assert "its work is committed" in said, said
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    assert git(repo, "status", "--porcelain") == ""
    monkeypatch.setattr(base.Connection, "_tx", real_tx)  # the user made it writable again
    marker.unlink()
    code, _, err = run_relay(relay_cmd(repo, script, "resume"))
    no_traceback(code, err)
    assert code == 0, err
    data = status_json(run_relay, repo)
    assert data["status"] == "complete"


# a full disk ------------------------------------------------------------------------------------


def test_a_full_disk_while_the_model_writes_a_big_file_pauses_the_goal(
    make_repo, write_script, run_relay, monkeypatch
):
    from relay.store import base

    real = base.connect

    def connect(path: Path) -> Any:  # the disk has room for 64 more pages of the database
        db = real(path)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count={pages + 64}")
        return db

    monkeypatch.setattr(base, "connect", connect)
    repo = make_repo(config=NOTES)
    big = "0123456789abcdef" * 40_000  # 640 kB: its step record does not fit
    script = write_script(
        [WRITE_NOTES, respond(call("write_file", path="big.txt", content=big)), complete()]
    )
    code, _, err = run_relay(relay_cmd(repo, script, "run", "Do it.", "--sandbox", "off"))
    said = no_traceback(code, err)
    assert code == 1
    assert str(db_of(repo)) in said and "disk is full" in said, said
    assert "free disk space" in said and "relay resume" in said, said
    assert "is paused" in said and "its work is committed" in said, said
    assert git(repo, "show", "HEAD:big.txt") == big
    data = status_json(run_relay, repo)
    assert (data["status"], data["reason"]) == ("paused", "interrupted")
    assert "disk" in data["message"] and "is full" in data["message"]
    monkeypatch.setattr(base, "connect", real)  # space was freed
    code, _, err = run_relay(relay_cmd(repo, script, "resume"))
    no_traceback(code, err)
    assert code == 0, err
    assert status_json(run_relay, repo)["status"] == "complete"


def test_a_full_disk_for_the_transcript_pauses_the_goal_and_names_the_file(
    make_repo, write_script, run_relay, monkeypatch
):
    from relay.transcript import Transcript

    real_write = Transcript.write
    calls = {"n": 0}

    def write(self: Transcript, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        real_write(self, *args, **kwargs)

    monkeypatch.setattr(Transcript, "write", write)
    repo = make_repo(config=NOTES)
    script = write_script([WRITE_NOTES, complete()])
    code, _, err = run_relay(relay_cmd(repo, script, "run", "Do it.", "--sandbox", "off"))
    said = no_traceback(code, err)
    assert code == 1
    assert "transcript.jsonl" in said and "disk is full" in said and "relay resume" in said
    assert status_json(run_relay, repo)["status"] == "paused"


def test_the_store_keeps_disk_space_for_a_pause(tmp_path):
    path = tmp_path / "relay.db"
    store = Store(path)
    reserve = path.with_name("relay.db.reserve")
    assert reserve.stat().st_size >= 64 * 1024
    assert store.release_reserve() and not reserve.exists()
    store.close()
    Store(path).close()
    assert reserve.exists()


# a file deleted or replaced while a run uses it -------------------------------------------------


@pytest.mark.parametrize(
    ("command", "note"),
    [
        ("rm -f {db}", "was deleted"),
        ("rm -f {db}*", "was deleted"),
        ("rm -f {db} && echo junk > {db}", "was replaced"),
    ],
)
def test_a_database_deleted_mid_run_is_written_back_and_the_goal_goes_on(
    command, note, make_repo, write_script, run_relay
):
    repo = make_repo(config=NOTES)
    db = db_of(repo)
    shell = command.format(db=f"'{db}'")
    script = write_script(
        [
            respond(call("write_file", path="a.txt", content="a\n")),
            respond(call("handoff", note="round 1 done")),
            respond(call("shell", command=shell)),
            WRITE_NOTES,
            complete(),
        ]
    )
    code, _, err = run_relay(relay_cmd(repo, script, "run", "Do it.", "--sandbox", "off"))
    no_traceback(code, err)
    assert code == 0, err
    data = status_json(run_relay, repo)
    assert (data["status"], data["rounds"]) == ("complete", 2)
    tamper = [e for e in data["events"] if e["kind"] == "tamper"]
    assert [e["round"] for e in tamper] == [2], tamper
    assert note in tamper[0]["detail"] and "wrote it back" in tamper[0]["detail"], tamper
    assert [c["round"] for c in data["commits"]] == [1, 2]
    if note == "was replaced":
        (kept,) = db.parent.glob("relay.db.replaced-*")
        assert kept.read_text() == "junk\n"


def test_store_errors_are_relay_errors_naming_the_file(tmp_path):
    path = tmp_path / "relay.db"
    store = Store(path)
    store._db.execute("PRAGMA query_only=ON")
    with pytest.raises(StoreAccessError) as caught:
        store.add_event("g", "warning", "x")
    assert caught.value.kind == "readonly" and caught.value.path == path
    assert str(path) in str(caught.value)
    store._db.execute("PRAGMA query_only=OFF")
    with pytest.raises(StoreError):  # a broken statement, too, is never a sqlite3 exception
        store._db.execute("SELECT * FROM no_such_table")
    assert not isinstance(StoreAccessError("x", kind="io", path=path), sqlite3.Error)
