"""The base commit's tests (SPEC §9 step 4, §14): a test of the goal's base commit that is still
defined but did not run now is a ``tests_not_run`` tamper finding, whatever left it out; moved,
renamed and re-parametrized tests are not; the base collection runs once per commit and command.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import git, write_files

from relay.audit import run_audit
from relay.audit_base import base_tests_not_run, defined_line, repo_ids
from relay.audit_commands import AuditShell, CommandOutcome
from relay.config import Deliverable
from relay.gitrepo import GitRepo
from relay.pytest_report import SessionReport
from relay.tamper import goal_baseline
from relay.tools import ToolContext

PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"

TESTS = """import pytest

from calc import add


def test_add():
    assert add(2, 3) == 5


@pytest.mark.parametrize("n", [1, 2])
def test_zero(n):
    assert add(n, 0) == n


class TestMore:
    def test_negative(self):
        assert add(-1, -1) == -2
"""


class CountingShell(AuditShell):
    """The audit's runner, counting the base collections it runs."""

    collections = 0

    def run(self, command: str, timeout_s: float, *, collect_only: bool = False) -> CommandOutcome:
        if collect_only:
            type(self).collections += 1
        return super().run(command, timeout_s, collect_only=collect_only)

    def in_folder(self, folder: Path) -> AuditShell:
        shell = super().in_folder(folder)
        shell.__class__ = CountingShell
        return shell


@pytest.fixture()
def repo(make_repo: Callable[..., Path]) -> Path:
    return make_repo({"calc.py": "def add(a, b):\n    return a + b\n", "tests/test_calc.py": TESTS})


def shell_for(repo: Path, run_dir: Path) -> CountingShell:
    CountingShell.collections = 0
    ctx = ToolContext(repo_root=repo, state_dir=repo / ".relay" / "state", run_dir=run_dir)
    return CountingShell(ctx, 4000)


def audit(repo: Path, shell: AuditShell, command: str = PYTEST, **extra: object):
    baseline = goal_baseline(GitRepo(repo), "HEAD~0" if False else base_sha(repo), protected=(),
                             progress_rel=".relay/progress.md")  # fmt: skip
    return run_audit(
        repo,
        [Deliverable(command=command, timeout_s=60)],
        run_command=shell,
        baseline=baseline,
        **extra,  # type: ignore[arg-type]
    )


def base_sha(repo: Path) -> str:
    return git(repo, "rev-list", "--max-parents=0", "HEAD").strip()


def tamper(result) -> list[tuple[str, bool, str]]:
    return [(c.target, c.passed, c.evidence) for c in result.checks if c.kind == "tamper"]


def test_every_base_test_ran_passes(repo: Path, tmp_path: Path) -> None:
    result = audit(repo, shell_for(repo, tmp_path / "run"))
    assert result.passed, result.failures_text()
    assert any("every test of" in e and "(4 tests)" in e for _, _, e in tamper(result))


@pytest.mark.parametrize(
    ("files", "missing"),
    [
        ({"pytest.ini": "[pytest]\naddopts = -k negative\n"}, "tests/test_calc.py::test_add"),
        (
            {"pytest.ini": "[pytest]\naddopts = --deselect tests/test_calc.py::test_zero[2]\n"},
            "tests/test_calc.py::test_zero[2]",
        ),
        (
            {"conftest.py": "def pytest_collection_modifyitems(items):\n    del items[1:]\n"},
            "tests/test_calc.py::TestMore::test_negative",
        ),
        (
            {"tests/test_aa.py": "import pytest\n\n\ndef test_stop():\n    pytest.exit('x', 0)\n"},
            "tests/test_calc.py::test_add",
        ),
    ],
)
def test_a_base_test_left_out_of_the_run_is_named(
    repo: Path, tmp_path: Path, files: dict[str, str], missing: str
) -> None:
    write_files(repo, files)
    result = audit(repo, shell_for(repo, tmp_path / "run"))
    assert not result.passed
    findings = [(t, e) for t, ok, e in tamper(result) if not ok and "did not run" in e]
    assert findings and missing in findings[0][1], result.failures_text()
    assert findings[0][0].startswith("tests/test_calc.py:")


def test_moved_and_reparametrized_tests_are_no_finding(repo: Path, tmp_path: Path) -> None:
    git(repo, "mv", "tests/test_calc.py", "tests/test_arith.py")
    write_files(
        repo,
        {
            "tests/test_arith.py": TESTS.replace("[1, 2]", "[3, 4]").replace(
                "class TestMore:", "class TestNegative:"
            )
        },
    )
    result = audit(repo, shell_for(repo, tmp_path / "run"))
    assert all(ok for _, ok, _ in tamper(result)), result.failures_text()


def test_the_base_collection_runs_once_per_commit_and_command(repo: Path, tmp_path: Path) -> None:
    shell = shell_for(repo, tmp_path / "run")
    cache = tmp_path / "state" / "audit-base"
    ctx = ToolContext(
        repo_root=repo, state_dir=tmp_path / "state", run_dir=tmp_path / f"run-{tmp_path.name}"
    )
    for _ in range(2):
        assert audit(repo, shell, tool_ctx=ctx).passed
    assert CountingShell.collections == 1
    assert len(list(cache.glob(f"{base_sha(repo)}-*.json"))) == 1
    assert audit(repo, shell, command=PYTEST + " tests", tool_ctx=ctx).passed
    assert CountingShell.collections == 2  # another command, another collection


def test_a_base_collection_that_fails_skips_only_the_comparison(
    make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo({"calc.py": "def add(a, b):\n    return a +\n", "tests/test_calc.py": TESTS})
    write_files(repo, {"calc.py": "def add(a, b):\n    return a + b\n"})
    result = audit(repo, shell_for(repo, tmp_path / "run"))
    assert result.passed, result.failures_text()
    notes = [e for t, ok, e in tamper(result) if t.startswith("base tests")]
    assert notes and "collecting them there failed" in notes[0] and "collection errors" in notes[0]


def test_ids_are_made_relative_to_the_repository(tmp_path: Path) -> None:
    session = SessionReport(
        file="f", session="s", parent=None, worker=None, plugin="", finished=True,
        collect_only=True, exitstatus=0, stopped=None, rootdir=str(tmp_path / "pkg"),
        collected=(), deselected=(), selected=(), collection_errors=(), tests=(),
    )  # fmt: skip
    assert repo_ids(session, tmp_path, ["tests/test_a.py::t"]) == ["pkg/tests/test_a.py::t"]


def test_defined_line_finds_functions_and_methods(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(TESTS, encoding="utf-8")
    assert defined_line(tmp_path, "t.py", "test_add") == 6
    assert defined_line(tmp_path, "t.py", "TestMore::test_negative") == 16
    assert defined_line(tmp_path, "t.py", "test_negative") is None
    (tmp_path / "broken.py").write_text("def test_a(:\n", encoding="utf-8")
    assert defined_line(tmp_path, "broken.py", "test_a") == 1
    assert defined_line(tmp_path, "gone.py", "test_a") is None


def test_tests_not_run_needs_the_base_ids(tmp_path: Path) -> None:
    from relay.audit_base import BaseCollection
    from relay.pytest_report import PytestReport

    assert (
        base_tests_not_run(
            tmp_path, BaseCollection("c", "x", None, "failed"), PytestReport(()), "x"
        )
        == []
    )


def _forged(file: Path, how: str, base: str) -> None:
    """Leave in ``file`` an empty collection of the base commit, as the model's commands can
    write it without the sandbox: without a seal, with a seal of another key, or with relay's
    seal of another content."""
    from relay.audit_base_cache import PURPOSE
    from relay.state_seal import StateKey, seal, sealing_key

    payload = {"command": PYTEST, "commit": base, "ids": []}
    data: dict[str, object] = dict(payload)
    if how == "other_key":
        data["seal"] = seal(payload, PURPOSE, StateKey(b"x" * 40, "another machine"))
    elif how == "forged":
        data["seal"] = seal({**payload, "ids": ["t"]}, PURPOSE, sealing_key())
    elif how == "other_purpose":
        data["seal"] = seal(payload, "goal-state", sealing_key())
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("how", ["unsealed", "other_key", "forged", "other_purpose"])
def test_a_cached_collection_without_relays_seal_is_collected_again(
    repo: Path, tmp_path: Path, how: str
) -> None:
    """Issue 27: an empty base collection written into relay's cache blinded the "tests not
    run" check. A cache file is used only with relay's seal made with this machine's key."""
    from relay import audit_base
    from relay.audit_base_cache import cache_file

    audit_base._cache.clear()
    base = base_sha(repo)
    file = cache_file(tmp_path / "state" / "audit-base", base, PYTEST)
    _forged(file, how, base)
    write_files(repo, {"pytest.ini": "[pytest]\naddopts = -k negative\n"})
    ctx = ToolContext(repo_root=repo, state_dir=tmp_path / "state", run_dir=tmp_path / "run2")
    shell = shell_for(repo, tmp_path / "run")
    result = audit(repo, shell, tool_ctx=ctx)
    findings = [e for _, ok, e in tamper(result) if not ok and "did not run" in e]
    assert findings and "tests/test_calc.py::test_add" in findings[0], result.failures_text()
    assert CountingShell.collections == 1  # collected again
    written = json.loads(file.read_text(encoding="utf-8"))
    assert len(written["ids"]) == 4 and written["seal"]["alg"] == "HMAC-SHA256"


def test_a_sealed_cached_collection_is_used_by_the_next_process(repo: Path, tmp_path: Path) -> None:
    from relay import audit_base

    ctx = ToolContext(repo_root=repo, state_dir=tmp_path / "state", run_dir=tmp_path / "run2")
    audit_base._cache.clear()
    assert audit(repo, shell_for(repo, tmp_path / "run"), tool_ctx=ctx).passed
    audit_base._cache.clear()  # another process: only the file remains
    shell = shell_for(repo, tmp_path / "run")
    assert audit(repo, shell, tool_ctx=ctx).passed
    assert CountingShell.collections == 0
