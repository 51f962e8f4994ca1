"""Tamper checks against the goal's base commit (SPEC §9 step 4), on real git repositories:
deleted or renamed tests, new skip markers, excluded tests, weakened assertions in protected
tests and changes to protected paths fail; tests added, moved or refactored pass."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import git, write_files

from relay.gitrepo import GitRepo
from relay.tamper import (
    Finding,
    goal_baseline,
    is_test_file,
    is_test_module,
    tamper_checks,
    tamper_findings,
)

CALC_TEST = """from calc import add


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-1, -1) == -2
"""

PROGRESS = ".relay/progress.md"


@pytest.fixture()
def repo(make_repo: Callable[..., Path]) -> Path:
    return make_repo(
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": CALC_TEST,
            "tests/helpers.py": "def helper():\n    return 1\n",
            PROGRESS: "# progress\n",
            "GOAL.md": "Fix add.\n",
        },
        config={"deliverables": [{"file": "calc.py"}]},
    )


def findings(
    repo: Path,
    protected: tuple[str, ...] = (),
    goal_file: str | None = None,
    digest: str | None = None,
) -> list[Finding]:
    gitrepo = GitRepo(repo)
    base = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    baseline = goal_baseline(
        gitrepo,
        base,
        protected=(PROGRESS, "relay.yaml", *protected),
        progress_rel=PROGRESS,
        goal_file=goal_file,
        goal_file_digest=digest,
    )
    return tamper_findings(repo, baseline)


def rules(found: list[Finding]) -> list[tuple[str, str]]:
    return [(f.rule, f.where) for f in found]


def commit(repo: Path, message: str = "work") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


# --- legitimate changes pass --------------------------------------------------------------


def test_no_change_gives_one_passing_check(repo: Path) -> None:
    gitrepo = GitRepo(repo)
    baseline = goal_baseline(gitrepo, "HEAD", protected=("relay.yaml",), progress_rel=PROGRESS)
    (check,) = tamper_checks(repo, baseline)
    assert (check.kind, check.target, check.passed) == ("tamper", "since HEAD", True)
    assert "no skip marker added" in check.evidence


def test_tests_added_and_code_changed_pass(repo: Path) -> None:
    write_files(
        repo,
        {
            "calc.py": "def add(a, b):\n    return b + a\n",
            "tests/test_more.py": "from calc import add\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
        },
    )
    assert findings(repo) == []


def test_test_moved_with_its_assertions_passes(repo: Path) -> None:
    (repo / "tests" / "unit").mkdir()
    git(repo, "mv", "tests/test_calc.py", "tests/unit/test_calc.py")
    commit(repo, "move")
    assert findings(repo) == []


def test_test_split_into_two_files_passes(repo: Path) -> None:
    first, second = CALC_TEST.split("\n\n\ndef test_add_negative")
    write_files(
        repo,
        {
            "tests/test_add.py": first + "\n",
            "tests/test_negative.py": "from calc import add\n\n\ndef test_add_negative" + second,
        },
    )
    (repo / "tests" / "test_calc.py").unlink()
    assert findings(repo) == []


def test_refactored_test_that_keeps_its_file_passes_when_tests_are_not_protected(
    repo: Path,
) -> None:
    (repo / "tests" / "test_calc.py").write_text(
        "import pytest\nfrom calc import add\n\n\n"
        "@pytest.mark.parametrize(('a', 'b', 'total'), [(2, 3, 5), (-1, -1, -2)])\n"
        "def test_add(a, b, total):\n    assert add(a, b) == total\n",
        encoding="utf-8",
    )
    assert findings(repo) == []


def test_skip_marker_that_was_already_there_passes_also_when_moved(
    make_repo: Callable[..., Path],
) -> None:
    repo = make_repo(
        {
            "tests/test_slow.py": "import pytest\n\n\n@pytest.mark.skip(reason='slow')\n"
            "def test_slow():\n    assert True\n\n\ndef test_fast():\n    assert 1\n"
        }
    )
    text = (repo / "tests" / "test_slow.py").read_text()
    (repo / "tests" / "test_slow.py").write_text(text + "\n\ndef test_new():\n    assert 2\n")
    assert findings(repo) == []
    (repo / "tests" / "test_slow.py").rename(repo / "tests" / "test_moved.py")
    assert findings(repo) == []


def test_progress_file_and_generated_files_are_never_findings(repo: Path) -> None:
    write_files(
        repo,
        {
            PROGRESS: "rewritten\n",
            ".relay/goal.json": "{}\n",  # relay's goal state beside the progress file
            "tests/__pycache__/test_calc.cpython-311.pyc": "x",
            "node_modules/pkg/test/test_x.js": "it.skip('x', () => {})\n",
        },
    )
    assert findings(repo, (".relay",)) == []  # even when the folder is protected


def test_skip_text_outside_test_files_is_no_finding(repo: Path) -> None:
    (repo / "calc.py").write_text("# call pytest.skip( in tests only\nX = 'it.skip('\n")
    assert findings(repo) == []


# --- deleted and renamed tests ------------------------------------------------------------


def test_deleted_test_file_fails_naming_file_and_line(repo: Path) -> None:
    (repo / "tests" / "test_calc.py").unlink()
    (found,) = findings(repo)
    assert (found.rule, found.path, found.line) == ("deleted_test", "tests/test_calc.py", 5)
    assert "2 assertions" in found.detail and "test_add" in found.detail
    assert "assert add(2, 3) == 5" in found.detail


def test_deleted_test_file_in_a_commit_fails_too(repo: Path) -> None:
    git(repo, "rm", "-q", "tests/test_calc.py")
    commit(repo, "drop the failing test")
    assert rules(findings(repo)) == [("deleted_test", "tests/test_calc.py:5")]


def test_test_renamed_out_of_collection_fails(repo: Path) -> None:
    git(repo, "mv", "tests/test_calc.py", "tests/calc_checks.py")
    (found,) = findings(repo)
    assert (found.rule, found.path) == ("renamed_test", "tests/test_calc.py")
    assert "renamed to tests/calc_checks.py" in found.detail
    assert "does not collect" in found.detail


def test_deleted_test_whose_assertions_are_kept_only_partly_fails(repo: Path) -> None:
    (repo / "tests" / "test_calc.py").unlink()
    write_files(
        repo,
        {
            "tests/test_new.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
        },
    )
    (found,) = findings(repo)
    assert found.rule == "deleted_test" and found.line == 9
    assert "1 assertion " in found.detail


def test_assertions_of_an_existing_file_do_not_cover_a_deleted_one(
    make_repo: Callable[..., Path],
) -> None:
    same = "def test_one():\n    assert ok()\n"
    repo = make_repo({"test_a.py": same, "test_b.py": same.replace("one", "two")})
    (repo / "test_b.py").unlink()
    assert rules(findings(repo)) == [("deleted_test", "test_b.py:2")]


# --- skip markers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "before", "after", "line"),
    [
        (
            "tests/test_calc.py",
            CALC_TEST,
            CALC_TEST.replace("def test_add():", "@pytest.mark.skip\ndef test_add():"),
            4,
        ),
        (
            "tests/test_calc.py",
            CALC_TEST,
            CALC_TEST.replace("def test_add():", "@pytest.mark.xfail(reason='x')\ndef test_add():"),
            4,
        ),
        (
            "tests/test_calc.py",
            CALC_TEST,
            CALC_TEST.replace(
                "def test_add():", "@pytest.mark.skipif(True, reason='x')\ndef test_add():"
            ),
            4,
        ),
        (
            "tests/test_calc.py",
            CALC_TEST,
            CALC_TEST.replace(
                "    assert add(2, 3)", "    pytest.skip('later')\n    assert add(2, 3)"
            ),
            5,
        ),
        (
            "test_case.py",
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
            "        self.assertEqual(1, 1)\n",
            "import unittest\n\nclass T(unittest.TestCase):\n    @unittest.skip('x')\n"
            "    def test_a(self):\n        self.assertEqual(1, 1)\n",
            4,
        ),
        (
            "src/sum.test.js",
            "it('adds', () => {\n  expect(1 + 1).toBe(2);\n});\n",
            "it.skip('adds', () => {\n  expect(1 + 1).toBe(2);\n});\n",
            1,
        ),
        (
            "src/sum.spec.ts",
            "describe('sum', () => {\n  it('adds', () => {});\n});\n",
            "describe('sum', () => {\n  xit('adds', () => {});\n});\n",
            2,
        ),
        (
            "src/sum.test.ts",
            "test('a', () => {});\ntest('b', () => {});\n",
            "test.only('a', () => {});\ntest('b', () => {});\n",
            1,
        ),
        (
            "pkg/sum_test.go",
            'func TestSum(t *testing.T) {\n\tif Sum(1, 1) != 2 {\n\t\tt.Fatal("no")\n\t}\n}\n',
            'func TestSum(t *testing.T) {\n\tt.Skip("later")\n\tif Sum(1, 1) != 2 {\n'
            '\t\tt.Fatal("no")\n\t}\n}\n',
            2,
        ),
        (
            "src/lib.rs",
            "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(2, 1 + 1); }\n}\n",
            "#[cfg(test)]\nmod tests {\n    #[test]\n    #[ignore]\n"
            "    fn adds() { assert_eq!(2, 1 + 1); }\n}\n",
            4,
        ),
    ],
)
def test_new_skip_markers_fail(
    make_repo: Callable[..., Path], path: str, before: str, after: str, line: int
) -> None:
    repo = make_repo({path: before})
    (repo / path).write_text(after, encoding="utf-8")
    found = findings(repo)
    assert [(f.rule, f.path, f.line) for f in found] == [("skip_marker", path, line)]
    assert "new skip/xfail marker" in found[0].detail


def test_skip_marker_in_a_new_conftest_fails(repo: Path) -> None:
    write_files(
        repo,
        {
            "conftest.py": "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
            "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='x'))\n"
        },
    )
    assert rules(findings(repo)) == [
        ("skip_marker", "conftest.py:6"),
        ("test_infra", "conftest.py"),
    ]


# --- tests excluded from the run ----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "before", "after", "line"),
    [
        ("conftest.py", None, "collect_ignore = ['tests/test_calc.py']\n", 1),
        ("pytest.ini", "[pytest]\n", "[pytest]\naddopts = --deselect tests/test_calc.py\n", 2),
        (
            "pyproject.toml",
            "[project]\nname = 'x'\n",
            "[project]\nname = 'x'\n\n[tool.pytest.ini_options]\naddopts = '--ignore=tests'\n",
            5,
        ),
        ("setup.cfg", "[tool:pytest]\n", '[tool:pytest]\naddopts = -k "not add"\n', 2),
        (
            "package.json",
            '{\n  "scripts": {\n    "test": "jest"\n  }\n}\n',
            '{\n  "scripts": {\n    "test": "jest || true"\n  }\n}\n',
            3,
        ),
    ],
)
def test_tests_excluded_from_the_run_fail(
    make_repo: Callable[..., Path], path: str, before: str | None, after: str, line: int
) -> None:
    repo = make_repo({path: before} if before is not None else {})
    (repo / path).write_text(after, encoding="utf-8")
    found = rules(findings(repo))
    # the line that excludes, and the test infrastructure change it is part of
    assert found[0] == ("tests_excluded", f"{path}:{line}")
    assert [rule for rule, _ in found[1:]] == ["test_infra"]


def test_a_test_script_added_without_tricks_passes(make_repo: Callable[..., Path]) -> None:
    repo = make_repo({"package.json": '{"name": "x"}\n'})
    (repo / "package.json").write_text(
        '{"name": "x", "scripts": {"test": "node --test",\n'
        '"lint": "eslint --ignore-path .gitignore . || true"}}\n'
    )
    assert findings(repo) == []


def test_code_that_looks_like_a_marker_is_no_finding(make_repo: Callable[..., Path]) -> None:
    repo = make_repo({"tests/test_model.py": "def test_fit():\n    assert model.fit(X)\n"})
    (repo / "tests" / "test_model.py").write_text(
        "def test_fit():\n    assert model.fit(X)\n    m = Model().fit(Y)\n    assert m\n"
    )
    assert findings(repo) == []


# --- protected paths ----------------------------------------------------------------------


def test_weakened_assertion_in_protected_tests_names_the_base_line(repo: Path) -> None:
    path = repo / "tests" / "test_calc.py"
    path.write_text(path.read_text().replace("assert add(2, 3) == 5", "assert add(2, 3)"))
    (found,) = findings(repo, ("tests/**",))
    assert (found.rule, found.where) == ("weakened_assertion", "tests/test_calc.py:5")
    assert "`assert add(2, 3) == 5`" in found.detail and "tests/**" in found.detail
    # not protected: the agent may fix a test
    assert findings(repo) == []


def test_removed_assertion_in_protected_tests_fails(repo: Path) -> None:
    path = repo / "tests" / "test_calc.py"
    path.write_text(path.read_text().replace("    assert add(-1, -1) == -2\n", "    pass\n"))
    assert rules(findings(repo, ("tests/test_calc.py",))) == [
        ("weakened_assertion", "tests/test_calc.py:9")
    ]


def test_other_change_of_a_protected_test_names_the_first_different_line(repo: Path) -> None:
    path = repo / "tests" / "test_calc.py"
    path.write_text(path.read_text().replace("def test_add():", "def test_add():  # hm"))
    (found,) = findings(repo, ("tests",))
    assert (found.rule, found.where) == ("protected_path", "tests/test_calc.py:4")
    assert "first difference at line 4" in found.detail


def test_files_created_or_deleted_under_a_protected_glob_fail(repo: Path) -> None:
    (repo / "tests" / "helpers.py").unlink()
    write_files(repo, {"tests/test_new.py": "def test_x():\n    assert 1\n"})
    assert rules(findings(repo, ("tests/**",))) == [
        ("protected_path", "tests/helpers.py"),
        ("protected_path", "tests/test_new.py"),
    ]


def test_skip_marker_in_a_protected_test_is_reported_once(repo: Path) -> None:
    path = repo / "tests" / "test_calc.py"
    path.write_text(CALC_TEST.replace("def test_add():", "@pytest.mark.skip\ndef test_add():"))
    assert rules(findings(repo, ("tests/**",))) == [("skip_marker", "tests/test_calc.py:4")]


def test_relay_yaml_change_fails(repo: Path) -> None:
    (repo / "relay.yaml").write_text("deliverables: []\n")
    (found,) = findings(repo)
    assert (found.rule, found.path) == ("protected_path", "relay.yaml")
    assert found.line == 1


def test_goal_file_edited_by_the_user_is_exempt(repo: Path) -> None:
    (repo / "GOAL.md").write_text("Fix add. Also subtract.\n")
    user = hashlib.sha256((repo / "GOAL.md").read_bytes()).hexdigest()
    assert findings(repo, ("GOAL.md",), "GOAL.md", user) == []
    (repo / "GOAL.md").write_text("Done already.\n")  # not what relay took as the user's
    assert rules(findings(repo, ("GOAL.md",), "GOAL.md", user)) == [("protected_path", "GOAL.md:1")]


def test_finding_check_names_file_and_line(repo: Path) -> None:
    (repo / "tests" / "test_calc.py").unlink()
    gitrepo = GitRepo(repo)
    base = git(repo, "rev-parse", "HEAD").strip()
    baseline = goal_baseline(gitrepo, base, protected=(), progress_rel=PROGRESS)
    (check,) = tamper_checks(repo, baseline)
    assert (check.kind, check.target, check.passed) == ("tamper", "tests/test_calc.py:5", False)
    assert check.evidence.startswith("tests/test_calc.py:5: test file deleted since " + base[:7])


# --- what a test file is -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "module", "test_file"),
    [
        ("tests/test_a.py", True, True),
        ("test_a.py", True, True),
        ("pkg/a_test.py", True, True),
        ("tests/helpers.py", False, True),
        ("test/fixtures.py", False, True),
        ("conftest.py", False, True),
        ("src/a.test.js", True, True),
        ("src/a.spec.tsx", True, True),
        ("src/__tests__/a.js", True, True),
        ("pkg/a_test.go", True, True),
        ("spec/a_spec.rb", True, True),
        ("src/test/java/AppTest.java", True, True),
        ("tests/integration.rs", True, True),
        ("src/app.py", False, False),
        ("tests/data.json", False, False),
        ("tests/README.md", False, False),
        ("node_modules/x/test/test_a.js", False, False),
        (".venv/lib/tests/test_a.py", False, False),
        ("latest.py", False, False),
    ],
)
def test_test_file_rules(path: str, module: bool, test_file: bool) -> None:
    assert is_test_module(path) is module
    assert is_test_file(path) is test_file


def test_rust_files_are_test_files_by_content() -> None:
    assert is_test_module("src/lib.rs", "#[test]\nfn a() {}\n")
    assert is_test_file("src/lib.rs", "#[cfg(test)]\nmod tests {}\n")
    assert not is_test_file("src/lib.rs", "fn a() {}\n")
