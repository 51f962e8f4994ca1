"""Issue 28 item 3: with the sandbox off, a shell command's write into a protected folder
(``tests/``, ``tests/**``, ``tests/*.py``) is undone after the command, the command's result
says so and the round records a ``tamper`` finding, as for a protected file. What running the
tests creates there (``__pycache__``) is no change and stays."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from relay import protect
from tests.conftest import call, complete, read_transcript, respond
from tests.test_repairs_alarm import make_repairs

TESTS = {
    "tests/test_calc.py": "def test_add():\n    assert 1 + 1 == 2\n",
    "tests/unit/test_more.py": "def test_more():\n    assert True\n",
}


def _plant(root: Path) -> None:
    for rel, text in TESTS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _attack(root: Path) -> None:
    """What a command does: rewrite one test, delete one, add one, add a bytecode cache."""
    (root / "tests/test_calc.py").write_text("def test_add():\n    assert True\n")
    (root / "tests/unit/test_more.py").unlink()
    (root / "tests/unit/test_new.py").write_text("def test_new():\n    pass\n")
    (root / "tests/__pycache__").mkdir()
    (root / "tests/__pycache__/test_calc.cpython-312.pyc").write_bytes(b"\x00cache")


@pytest.mark.parametrize("entry", ["tests/", "tests", "tests/**"])
def test_a_command_s_writes_into_a_protected_folder_are_undone(tmp_path: Path, entry: str) -> None:
    made, findings, root = make_repairs(tmp_path, sandboxed=False)
    made.protected_paths = (*made.protected_paths, entry)
    _plant(root)
    before = made.before(None)
    _attack(root)
    found = made.after_shell(before, "sed -i ... tests/test_calc.py")
    for rel, text in TESTS.items():
        assert (root / rel).read_text() == text
    assert not (root / "tests/unit/test_new.py").exists()
    assert (root / "tests/__pycache__/test_calc.cpython-312.pyc").exists()  # test runs make it
    assert found == findings.found
    text = "\n".join(found)
    assert "tests/test_calc.py" in text and "restored" in text
    assert "tests/unit/test_more.py" in text and "tests/unit/test_new.py" in text
    assert "__pycache__" not in text


def test_a_file_glob_covers_new_files_it_matches_and_leaves_the_others(tmp_path: Path) -> None:
    made, _findings, root = make_repairs(tmp_path, sandboxed=False)
    made.protected_paths = (*made.protected_paths, "tests/*.py")
    _plant(root)
    before = made.before(None)
    (root / "tests/test_calc.py").write_text("weakened\n")
    (root / "tests/test_planted.py").write_text("planted\n")
    (root / "tests/notes.txt").write_text("not protected\n")
    (root / "tests/unit/test_more.py").write_text("not protected either\n")
    found = made.after_shell(before, "python edit.py")
    assert (root / "tests/test_calc.py").read_text() == TESTS["tests/test_calc.py"]
    assert not (root / "tests/test_planted.py").exists()
    assert (root / "tests/notes.txt").read_text() == "not protected\n"
    assert (root / "tests/unit/test_more.py").read_text() == "not protected either\n"
    assert len(found) == 2, found


def test_a_deleted_protected_folder_comes_back_whole(tmp_path: Path) -> None:
    root = tmp_path
    _plant(root)
    before = protect.snapshot(root, ["tests/**"])
    shutil.rmtree(root / "tests")
    found = protect.restore(root, before)
    for rel, text in TESTS.items():
        assert (root / rel).read_text() == text
    assert "a shell command deleted the protected file tests/test_calc.py; restored" in found


def test_a_mass_change_is_told_in_a_few_lines(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    for n in range(30):
        (tmp_path / f"tests/test_{n:02}.py").write_text(f"n = {n}\n")
    before = protect.snapshot(tmp_path, ["tests/"])
    shutil.rmtree(tmp_path / "tests")
    found = protect.restore(tmp_path, before)
    assert len(list((tmp_path / "tests").iterdir())) == 30
    assert len(found) <= 10 and "more protected paths" in found[-1]


def test_sandbox_off_a_sed_into_a_protected_test_folder_is_undone_and_told(
    make_repo, write_script, relay_run
):
    repo = make_repo(
        {"calc.py": "def add(a, b):\n    return a - b\n", **TESTS},
        config={"tools": {"protected_paths": ["tests/**"]}},
    )
    script = write_script(
        [
            respond(call("shell", command="sed -i 's/1 + 1 == 2/True/' tests/test_calc.py")),
            respond(call("shell", command="python -m pytest -q -p no:cacheprovider tests")),
            respond(call("write_file", path="a.txt", content="a\n")),
            complete(),
        ]
    )
    _code, data, _ = relay_run(repo, script, "Write a.txt.", "--sandbox", "off")
    assert (repo / "tests/test_calc.py").read_text() == TESTS["tests/test_calc.py"]
    results = json.dumps(read_transcript(repo))
    assert "relay undid what this command changed" in results
    assert "protected file tests/test_calc.py" in results
    tampers = [e for e in data["events"] if e["kind"] == "tamper"]
    assert [e["detail"] for e in tampers] == [  # the test run's __pycache__ is no tamper
        "a shell command changed the protected file tests/test_calc.py; restored"
    ]
    assert tampers[0]["round"] == 1


def _outside(tmp_path: Path) -> Path:
    """A folder of the user's outside the repository, holding files named like the tests."""
    home = tmp_path / "home"
    (home / "unit").mkdir(parents=True)
    (home / "test_calc.py").write_text("mine\n")
    (home / "unit/test_more.py").write_text("mine too\n")
    (home / "d").mkdir()
    (home / "d/keep.txt").write_text("keep\n")
    return home


def _untouched(home: Path) -> None:
    assert (home / "test_calc.py").read_text() == "mine\n"
    assert (home / "unit/test_more.py").read_text() == "mine too\n"
    assert (home / "d/keep.txt").read_text() == "keep\n"


@pytest.mark.parametrize("entry", ["tests/", "tests/**", "tests/*.py"])
def test_a_protected_folder_swapped_for_a_link_outside_is_undone_and_the_outside_untouched(
    tmp_path: Path, entry: str
) -> None:
    made, _findings, root = make_repairs(tmp_path, sandboxed=False)
    made.protected_paths = (*made.protected_paths, entry)
    _plant(root)
    home = _outside(tmp_path)
    before = made.before(None)
    shutil.move(root / "tests", root / "moved")  # `mv tests moved; ln -s ~ tests`
    (root / "tests").symlink_to(home)
    found = made.after_shell(before, "mv tests moved; ln -s ~ tests")
    _untouched(home)
    assert not (root / "tests").is_symlink()
    assert (root / "tests/test_calc.py").read_text() == TESTS["tests/test_calc.py"]
    assert found


def test_a_subfolder_swapped_for_a_link_outside_is_undone_and_the_outside_untouched(
    tmp_path: Path,
) -> None:
    made, _findings, root = make_repairs(tmp_path, sandboxed=False)
    made.protected_paths = (*made.protected_paths, "tests/")
    _plant(root)
    home = _outside(tmp_path)
    before = made.before(None)
    shutil.rmtree(root / "tests/unit")
    (root / "tests/unit").symlink_to(home)
    (root / "tests/d").symlink_to(home / "d")  # a new link: removed, its target kept
    made.after_shell(before, "rm -r tests/unit; ln -s ~ tests/unit; ln -s ~/d tests/d")
    _untouched(home)
    assert not (root / "tests/unit").is_symlink() and not os.path.lexists(root / "tests/d")
    assert (root / "tests/unit/test_more.py").read_text() == TESTS["tests/unit/test_more.py"]


def test_a_renamed_protected_folder_is_put_back(tmp_path: Path) -> None:
    made, _findings, root = make_repairs(tmp_path, sandboxed=False)
    made.protected_paths = (*made.protected_paths, "tests/**")
    _plant(root)
    before = made.before(None)
    (root / "tests").rename(root / "t2")
    found = made.after_shell(before, "mv tests t2")
    for rel, text in TESTS.items():
        assert (root / rel).read_text() == text
    assert any("tests/test_calc.py" in f for f in found)


def test_a_path_relay_cannot_put_back_is_a_finding_not_a_crash(tmp_path: Path, monkeypatch) -> None:
    """A command that makes its edit stick (``chattr +i``, a read-only folder as a normal
    user): the round goes on, and the finding says what stayed."""
    made, _findings, root = make_repairs(tmp_path, sandboxed=False)
    made.protected_paths = (*made.protected_paths, "tests/")
    _plant(root)
    before = made.before(None)
    _attack(root)
    (root / "tests/newdir").mkdir()
    (root / "tests/newdir/conftest.py").write_text("import os\n")

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(protect, "_put_back", refuse)
    monkeypatch.setattr(protect.shutil, "rmtree", refuse)
    found = made.after_shell(before, "sed -i ... tests/test_calc.py; chattr +i tests/test_calc.py")
    text = "\n".join(found)
    assert "tests/test_calc.py; relay could not put it back (Operation not permitted)" in text
    assert "tests/newdir in a protected path; relay could not remove it" in text
    assert "tests/newdir in a protected path; removed" not in text
