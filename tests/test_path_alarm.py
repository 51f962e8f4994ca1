"""relay.pathalarm: an alarm on paths rings for every change that could alter what a look at
them finds (made, removed, replaced, renamed on the way, mode, data with ``contents``) and
stays silent for changes elsewhere, even in the same folders."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from relay import pathalarm
from relay.pathalarm import PathAlarm


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".config" / "pip").mkdir(parents=True)
    (tmp_path / "home" / ".config" / "pip" / "pip.conf").write_text("[global]\n")
    (tmp_path / "home" / ".bashrc").write_text("# rc\n")
    return tmp_path


def watched(tree: Path) -> list[str]:
    return [
        str(tree / "home" / ".config" / "pip" / "pip.conf"),
        str(tree / "home" / ".bashrc"),
        str(tree / "home" / ".aws" / "credentials"),  # missing, and so is its folder
    ]


def replace(path: Path, text: str) -> None:
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.replace(fresh, path)


RINGING: dict[str, Callable[[Path], object]] = {
    "a missing folder made": lambda t: (t / "home" / ".aws").mkdir(),
    "a watched file removed": lambda t: (t / "home" / ".bashrc").unlink(),
    "a watched file replaced": lambda t: replace(t / "home" / ".bashrc", "# new\n"),
    "a watched file's mode": lambda t: os.chmod(t / "home" / ".bashrc", 0o600),
    "a watched file's data": lambda t: (t / "home" / ".bashrc").write_text("# more\n"),
    "a folder on the way renamed": lambda t: os.rename(t / "home" / ".config", t / "home" / "c"),
    "a folder on the way made a symlink": lambda t: (
        os.rename(t / "home" / ".config", t / "home" / "c"),
        os.symlink(t / "home" / "c", t / "home" / ".config"),
    ),
    "a folder on the way locked": lambda t: os.chmod(t / "home" / ".config", 0o000),
    "the deepest watched folder removed": lambda t: (
        (t / "home" / ".config" / "pip" / "pip.conf").unlink(),
        (t / "home" / ".config" / "pip").rmdir(),
    ),
}


@pytest.mark.parametrize("change", list(RINGING))
def test_a_change_that_a_look_would_see_rings(tree: Path, change: str) -> None:
    alarm = PathAlarm(watched(tree), contents=True)
    assert alarm.rang() is False
    RINGING[change](tree)
    assert alarm.rang() is True
    assert alarm.rang() is True  # it stays rung
    os.chmod(tree / "home", 0o755)
    if (tree / "home" / ".config").exists():
        os.chmod(tree / "home" / ".config", 0o755)


QUIET: dict[str, Callable[[Path], object]] = {
    "another file of a watched folder": lambda t: (t / "home" / ".lesshst").write_text("x"),
    "another file removed": lambda t: (
        (t / "home" / "x").write_text("x"),
        (t / "home" / "x").unlink(),
    ),
    "a file inside a watched folder's sibling": lambda t: (t / "home" / "work").mkdir(),
    "a file above the watched ones": lambda t: (t / "elsewhere.txt").write_text("x"),
    "a file read": lambda t: (t / "home" / ".bashrc").read_text(),
}


@pytest.mark.parametrize("change", list(QUIET))
def test_a_change_elsewhere_stays_silent(tree: Path, change: str) -> None:
    alarm = PathAlarm(watched(tree), contents=True)
    QUIET[change](tree)
    assert alarm.rang() is False


def test_without_contents_a_data_write_stays_silent_but_a_replacement_rings(tree: Path) -> None:
    db = tree / "home" / ".bashrc"
    alarm = PathAlarm([str(db)], contents=False)
    db.write_text("# appended\n")
    (tree / "home" / ".bashrc-wal").write_text("frames")  # its neighbours, as SQLite's
    assert alarm.rang() is False
    replace(db, "# another file\n")
    assert alarm.rang() is True


def test_an_alarm_that_cannot_watch_rings_at_every_question(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pathalarm, "_libc", False)  # no inotify here
    assert PathAlarm(watched(tree), contents=True).rang() is True
    monkeypatch.setattr(pathalarm, "_libc", None)
    alarm = PathAlarm(watched(tree), contents=True)
    alarm.close()
    assert alarm.rang() is True


def test_a_watch_that_cannot_be_added_makes_it_ring(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    libc = pathalarm._inotify()
    assert libc is not False

    class Full:
        inotify_init1 = staticmethod(libc.inotify_init1)

        @staticmethod
        def inotify_add_watch(fd: int, path: bytes, mask: int) -> int:
            return -1  # ENOSPC: the user's limit of watches is reached

    monkeypatch.setattr(pathalarm, "_libc", Full)
    assert PathAlarm(watched(tree), contents=True).rang() is True


def test_lost_events_ring_every_alarm(tree: Path) -> None:
    alarms = [PathAlarm(watched(tree), contents=True), PathAlarm([str(tree)], contents=False)]
    pathalarm._hub._deliver(-1, pathalarm.IN_Q_OVERFLOW, "")
    assert [a.rang() for a in alarms] == [True, True]


def test_alarms_share_one_instance_and_keep_their_own_interests(tree: Path) -> None:
    """Two alarms on the same folder: the one without ``contents`` ignores a data write the
    other rings for; closing one leaves the other watching."""
    bashrc = str(tree / "home" / ".bashrc")
    data, entries = PathAlarm([bashrc], contents=True), PathAlarm([bashrc], contents=False)
    assert data._hub is entries._hub and data.wds & entries.wds
    (tree / "home" / ".bashrc").write_text("# more\n")
    assert (data.rang(), entries.rang()) == (True, False)
    data.close()
    replace(tree / "home" / ".bashrc", "# replaced\n")
    assert entries.rang() is True


def test_a_child_process_does_not_read_its_parents_events(tree: Path) -> None:
    """After fork the child's alarms use an instance of their own; an alarm the parent armed
    rings in the child (its events go to the parent)."""
    parent_alarm = PathAlarm(watched(tree), contents=True)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        own = PathAlarm(watched(tree), contents=True)
        ok = (
            parent_alarm.rang() is True
            and own.rang() is False
            and own._hub is not parent_alarm._hub
        )
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    assert parent_alarm.rang() is False  # the parent's own queue is untouched


def test_writes_to_a_watched_device_stay_silent(tmp_path: Path) -> None:
    """Every process writes to /dev/null (a hiding mount's source): its data counts for
    nothing, so it must not make the kept sandbox look before each call."""
    alarm = PathAlarm(["/dev/null"], contents=True)
    with open("/dev/null", "w") as sink:
        sink.write("discarded")
    assert alarm.rang() is False


def test_a_reset_keeps_watching_after_a_watched_file_changed(tree: Path) -> None:
    bashrc = tree / "home" / ".bashrc"
    alarm = PathAlarm(watched(tree), contents=True)
    replace(bashrc, "# one\n")
    assert alarm.rang() is True
    assert alarm.reset() is True and alarm.rang() is False
    bashrc.write_text("# two\n")  # its data, after the reset
    assert alarm.rang() is True
    assert alarm.reset() is True
    (tree / "home" / ".aws").mkdir()  # a folder on the way made: the way changed
    assert alarm.rang() is True and alarm.reset() is False


@pytest.mark.parametrize(
    "change", ["a folder on the way renamed", "the deepest watched folder removed"]
)
def test_a_reset_is_refused_when_the_folders_on_the_way_changed(tree: Path, change: str) -> None:
    alarm = PathAlarm(watched(tree), contents=True)
    RINGING[change](tree)
    assert alarm.rang() is True and alarm.reset() is False


def test_a_watched_device_replaced_by_a_file_needs_a_new_alarm(tmp_path: Path) -> None:
    """The data of a device is not watched; once a regular file is there, it must be."""
    link = tmp_path / "hidden"
    os.symlink("/dev/null", link)
    alarm = PathAlarm([str(link)], contents=True)
    fresh = tmp_path / "fresh"
    fresh.write_text("secret")
    os.replace(fresh, link)
    assert alarm.rang() is True and alarm.reset() is False
