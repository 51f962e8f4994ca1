"""A deliverable command whose program cannot run is refused at start (issue 13, item 11).

Deliverables are frozen with the goal (SPEC §9): a ``command:`` whose program does not exist
(``pytset -q``) could never pass the audit, so relay refuses it before anything changes - no
branch, no state, no model call - and so does a resume of a goal whose frozen command cannot
run any more. The same check refuses a glob relay cannot use (``changed:``,
``tools.protected_paths``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import call, complete, flat, read_transcript, respond, state_dir, tree_snapshot
from sandbox_support import require_bwrap

from relay.preflight import Program, missing_program, program_word
from relay.sandbox import Sandbox

WORK = [respond(call("write_file", path="made_by_model.txt", content="x\n")), complete()]

# --------------------------------------------------------------------------- the pure part


@pytest.mark.parametrize(
    ("command", "word", "after_cd"),
    [
        ("pytset -q", "pytset", False),
        ("FOO=1 BAR='a b' pytest -q", "pytest", False),
        ("cd sub && pytest", "pytest", True),
        ("cd sub; ./run.sh", "./run.sh", True),
        ("set -e; pytset", "pytset", False),
        ("env X=1 Y=2 prog a", "prog", False),
        ("python -m pytest -q", "python", False),
        ("  # a comment\npytset -q", "pytset", False),
        ("scripts/check --all", "scripts/check", False),
        ("make test && ./build/app", "make", False),
        ('"my tool" --x', "my tool", False),
    ],
)
def test_the_program_word(command: str, word: str, after_cd: bool) -> None:
    assert program_word(command) == Program(word, after_cd)


@pytest.mark.parametrize(
    "command",
    [
        "test -f x",  # builtins and keywords
        "[ -f x ]",
        "true",
        "if true; then pytset; fi",
        "(cd x && pytset)",
        "{ pytset; }",
        "! grep -q x y",
        "time pytset",
        "$PYTHON -m pytest",  # expansions: cannot tell
        "`which py` x",
        "~/bin/tool",
        "PATH=/opt/bin:$PATH pytset",  # the command sets its own PATH
        "env -i pytset",  # env options: not parsed
        "source .venv/bin/activate && pytest",
        "cd sub",  # nothing after the cd
        "2>/dev/null pytset",  # a redirection first
        ">log pytset",
        "f() { pytset; }; f",
        "echo 'unterminated",  # not parseable
        "",
        "X=1",
    ],
)
def test_words_that_cannot_be_judged_are_accepted(command: str) -> None:
    assert program_word(command) is None


def test_missing_programs_on_path_and_by_path(tmp_path: Path) -> None:
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (bindir / "plain").write_text("not executable")
    off = Sandbox()
    path = str(bindir)

    def missing(word: str, after_cd: bool = False, sandbox: Sandbox = off) -> object:
        return missing_program(Program(word, after_cd), root, path, sandbox)

    assert missing("tool") is None
    assert missing(str(tool)) is None
    assert "not on the PATH" in str(missing("pytset"))
    assert "not executable" in str(missing(str(bindir / "plain")))
    assert "does not exist" in str(missing(str(bindir / "absent")))
    assert "is a folder" in str(missing(str(bindir)))
    assert "does not exist" in str(missing("../bin/absent"))  # relative: from the repository root
    assert missing("../bin/tool") is None
    assert missing("./run.sh") is None  # inside the repository: the goal may create it
    assert missing("scripts/check") is None
    assert missing("../x/absent", after_cd=True) is None  # relative to an unknown folder
    hidden = Sandbox(mode="bwrap", bwrap="/usr/bin/bwrap")  # /tmp is private inside it
    assert "hides" in str(missing(str(tool), sandbox=hidden))
    assert "hides" in str(missing("tool", sandbox=hidden))
    shown = Sandbox(mode="bwrap", bwrap="/usr/bin/bwrap", visible=(bindir,))
    assert missing("tool", sandbox=shown) is None


# --------------------------------------------------------------------------- relay run / resume


def _args(repo: Path, script: Path, *extra: str) -> list:
    return ["run", "Create the file.", "--repo", repo, "--model", f"scripted:{script}", *extra]


def _refused(result: tuple[int, str, str], repo: Path, before: dict, *needles: str) -> str:
    code, out, err = result
    message = flat(err + out)
    assert code == 1, (code, out, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    assert tree_snapshot(repo) == before  # no branch, no commit, no file
    assert not (repo / "made_by_model.txt").exists()
    return message


def test_a_misspelled_program_is_refused_before_anything_changes(
    make_repo, run_relay, write_script
):
    repo = make_repo(config={"deliverables": [{"file": "x.txt"}, {"command": "pytset -q"}]})
    before = tree_snapshot(repo)
    result = run_relay(_args(repo, write_script(WORK), "--sandbox", "off"))
    message = _refused(result, repo, before, "deliverable 2 (command: pytset -q)", "'pytset'")
    assert "not on the PATH" in message
    assert "install it, fix the spelling, or give its full path" in message
    assert not (state_dir(repo) / "relay.db").exists()
    assert not (state_dir(repo) / "runs").exists()  # no run, so no model call


def test_a_program_the_sandbox_hides_is_refused_with_the_reason(
    make_repo, run_relay, write_script, tmp_path
):
    require_bwrap()
    tools = tmp_path / "private-tools"
    tools.mkdir()
    checker = tools / "check"
    checker.write_text("#!/bin/sh\nexit 0\n")
    checker.chmod(0o755)
    repo = make_repo(config={"deliverables": [{"command": f"{checker} --all"}]})
    before = tree_snapshot(repo)
    result = run_relay(_args(repo, write_script(WORK), "--sandbox", "required"))
    message = _refused(result, repo, before, f"deliverable 1 (command: {checker} --all)")
    assert "the sandbox hides" in message and "/tmp" in message
    code, out, _ = run_relay(_args(repo, write_script(WORK), "--sandbox", "off", "--json"))
    assert code == 0, out  # without the sandbox the program is there: the goal runs


def test_a_bad_glob_is_refused_at_start(make_repo, run_relay, write_script):
    repo = make_repo(config={"tools": {"protected_paths": ["tests\\"]}})
    before = tree_snapshot(repo)
    message = _refused(
        run_relay(_args(repo, write_script(WORK), "--sandbox", "off")),
        repo,
        before,
        "tools.protected_paths: 'tests\\' is not a valid glob",
    )
    assert "cannot end a glob" in message
    repo2 = make_repo(config={"deliverables": [{"changed": "src/[z-a]"}]}, name="repo2")
    before = tree_snapshot(repo2)
    _refused(
        run_relay(_args(repo2, write_script(WORK), "--sandbox", "off")),
        repo2,
        before,
        "deliverable 1 (changed: src/[z-a])",
        "not a valid glob",
    )


def test_a_resumed_goal_whose_frozen_program_is_gone_is_refused(
    make_repo, run_relay, write_script, tmp_path, monkeypatch
):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "lint-all"
    tool.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'pass'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    repo = make_repo(config={"deliverables": [{"command": "lint-all"}]})
    ask = respond(call("update_goal", status="needs_user_input", summary="?", question="Port?"))
    code, out, err = run_relay(_args(repo, write_script([ask]), "--sandbox", "off", "--json"))
    assert code != 1 and "Port?" in out + err, (code, out, err)
    calls = len(read_transcript(repo))
    tool.unlink()  # the program the frozen deliverable needs is gone
    before = tree_snapshot(repo)
    result = run_relay(["resume", "--repo", repo, "--sandbox", "off"])
    message = _refused(result, repo, before, "deliverable 1 (command: lint-all)", "'lint-all'")
    assert "frozen" in message and "`relay clear`" in message and "`relay run`" in message
    assert len(read_transcript(repo)) == calls  # no model call
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    assert '"needs_user_input"' in out  # the goal is as it was
