"""Test infrastructure changed since the base commit (SPEC §9 step 4, §14): ``test_infra``
tamper findings for conftest.py, the test runners' configuration, start-up hooks, shadowing
modules and code that reaches into pytest's internals; honest changes next to them pass."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import git, write_files

from relay.gitrepo import GitRepo
from relay.tamper import Finding, goal_baseline, tamper_findings

CALC_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYPROJECT = (
    '[project]\nname = "calc"\nversion = "0.1"\ndependencies = []\n\n'
    '[tool.pytest.ini_options]\naddopts = "-q"\n'
)


def infra(
    repo: Path, allowed: tuple[str, ...] = (), started_at: float | None = None
) -> list[tuple[str, str]]:
    base = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    baseline = goal_baseline(
        GitRepo(repo), base, protected=(), progress_rel=".relay/progress.md", started_at=started_at
    )
    found: list[Finding] = tamper_findings(repo, baseline, allowed)
    return [(f.where, f.detail) for f in found if f.rule == "test_infra"]


@pytest.fixture()
def repo(make_repo: Callable[..., Path]) -> Path:
    return make_repo(
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": CALC_TEST,
            "tests/conftest.py": "import pytest\n\n\n@pytest.fixture()\ndef one():\n    return 1\n",
            "pyproject.toml": PYPROJECT,
            "setup.cfg": "[metadata]\nname = calc\n\n[tool:pytest]\nxfail_strict = true\n",
            "tox.ini": "[tox]\nenvlist = py\n\n[testenv]\ncommands = pytest\n\n[flake8]\nmax-line-length = 100\n",
            "package.json": '{\n  "name": "calc",\n  "scripts": {\n    "test": "jest",\n    "build": "tsc"\n  }\n}\n',
            "Makefile": "build:\n\tcc -o calc calc.c\n\ntest:\n\tpython -m pytest -q\n",
            "go/calc_test.go": "package calc\n\nfunc TestAdd(t *testing.T) {}\n",
            "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\n\n[dependencies]\n',
        }
    )


# --- configuration files --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "text", "where", "what"),
    [
        ("tests/conftest.py", "import pytest\n", "tests/conftest.py:2", "conftest.py changed"),
        ("conftest.py", "collect_ignore = []\n", "conftest.py", "conftest.py created"),
        ("pytest.ini", "[pytest]\n", "pytest.ini", "pytest.ini created"),
        (
            "pyproject.toml",
            PYPROJECT.replace('"-q"', '"-q -x"'),
            "pyproject.toml:6",
            "[tool.pytest…]",
        ),
        ("setup.cfg", "[metadata]\nname = calc\n\n[tool:pytest]\n", "setup.cfg:4", "[tool:pytest]"),
        (
            "tox.ini",
            "[tox]\nenvlist = py\n\n[testenv]\ncommands = true\n",
            "tox.ini:4",
            "[testenv]",
        ),
        (
            "package.json",
            '{\n  "name": "calc",\n  "scripts": {\n    "test": "echo ok",\n    "build": "tsc"\n  }\n}\n',
            "package.json:4",
            "scripts.test of package.json",
        ),
        ("jest.config.js", "module.exports = {testMatch: []};\n", "jest.config.js", "created"),
        ("Makefile", "build:\n\tcc -o calc calc.c\n\ntest:\n\ttrue\n", "Makefile:4", "test: rule"),
        (
            "go/calc_test.go",
            "//go:build never\n\npackage calc\n\nfunc TestAdd(t *testing.T) {}\n",
            "go/calc_test.go:1",
            "build constraint",
        ),
        (
            "go/main_test.go",
            "package calc\n\nfunc TestMain(m *testing.M) {}\n",
            "go/main_test.go:3",
            "TestMain",
        ),
        (
            "Cargo.toml",
            '[package]\nname = "calc"\nversion = "0.1.0"\n\n[lib]\ntest = false\n',
            "Cargo.toml:6",
            "test targets of Cargo.toml",
        ),
        (
            ".cargo/config.toml",
            "[target.x86_64-unknown-linux-gnu]\nrunner = 'true'\n",
            ".cargo/config.toml",
            "created",
        ),
        (".npmrc", "script-shell=/bin/true\n", ".npmrc", "created"),
    ],
)
def test_a_test_configuration_change_is_a_finding(
    repo: Path, path: str, text: str, where: str, what: str
) -> None:
    write_files(repo, {path: text})
    found = infra(repo)
    assert [w for w, _ in found] == [where], found
    assert what in found[0][1] and "allow it with a changed: deliverable" in found[0][1]


def test_other_parts_of_shared_files_stay_free(repo: Path) -> None:
    write_files(
        repo,
        {
            "pyproject.toml": PYPROJECT.replace("dependencies = []", 'dependencies = ["attrs"]'),
            "setup.cfg": "[metadata]\nname = calc2\n\n[tool:pytest]\nxfail_strict = true\n",
            "tox.ini": "[tox]\nenvlist = py\n\n[testenv]\ncommands = pytest\n\n[flake8]\nmax-line-length = 120\n",
            "package.json": '{\n  "name": "calc",\n  "scripts": {\n    "test": "jest",\n    "build": "tsc -b"\n  }\n}\n',
            "Makefile": "build:\n\tcc -O2 -o calc calc.c\n\ntest:\n\tpython -m pytest -q\n",
            "Cargo.toml": '[package]\nname = "calc"\nversion = "0.2.0"\n\n[dependencies]\nserde = "1"\n',
            "go/calc_test.go": "package calc\n\nfunc TestAdd(t *testing.T) {}\n\nfunc TestSub(t *testing.T) {}\n",
        },
    )
    assert infra(repo) == []


def test_a_first_test_script_is_no_finding(make_repo: Callable[..., Path]) -> None:
    repo = make_repo(
        {
            "package.json": '{"name": "x", "scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}\n'
        }
    )
    write_files(repo, {"package.json": '{"name": "x", "scripts": {"test": "node --test"}}\n'})
    assert infra(repo) == []


def test_a_change_the_deliverables_allow_is_free(repo: Path) -> None:
    write_files(repo, {"tests/conftest.py": "import pytest\n", "pytest.ini": "[pytest]\n"})
    assert [w for w, _ in infra(repo, allowed=("tests/conftest.py",))] == ["pytest.ini"]
    assert infra(repo, allowed=("tests/**", "*.ini")) == []


# --- start-up hooks -----------------------------------------------------------------------------


def test_startup_hooks_are_findings(repo: Path) -> None:
    write_files(
        repo,
        {
            "sitecustomize.py": "import os\n",
            "lib/usercustomize.py": "pass\n",
            "site/hook.pth": "import os; os.environ['X'] = '1'\n",
            "site/paths.pth": "/opt/extra\n",  # path lines only: run nothing
        },
    )
    found = dict(infra(repo))
    assert set(found) == {"sitecustomize.py", "lib/usercustomize.py", "site/hook.pth"}
    assert "runs at Python start-up" in found["sitecustomize.py"]
    assert "import line" in found["site/hook.pth"]


def test_startup_hooks_in_ignored_folders_need_the_goal_start(repo: Path) -> None:
    write_files(repo, {".gitignore": ".venv/\n", ".venv/lib/site-packages/old.pth": "import os\n"})
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore the venv")
    started = time.time()
    time.sleep(0.05)  # ctime resolution: a file changed after the start is newer
    write_files(repo, {".venv/lib/site-packages/zz_evil.pth": "import os; os._exit(0)\n"})
    where = [w for w, _ in infra(repo, started_at=started)]
    assert where == [".venv/lib/site-packages/zz_evil.pth"]
    assert infra(repo) == []  # without the goal's start, ignored files are not looked at
    os.utime(repo / ".venv/lib/site-packages/zz_evil.pth", (started - 3600, started - 3600))
    assert [w for w, _ in infra(repo, started_at=started)] == where  # touch cannot hide it


# --- shadowing modules --------------------------------------------------------------------------


def test_modules_that_shadow_the_runner_or_its_standard_library_are_findings(repo: Path) -> None:
    write_files(
        repo,
        {
            "pytest/__init__.py": "",
            "pytest/__main__.py": "print('5 passed')\n",
            "statistics.py": "def mean(v):\n    return 2\n",  # the runner never imports it
            "queue.py": "",
            "json.py": "",  # the runner (and relay's plugin) import json: a forged report
            "tests/json.py": "",
            "pluggy.pyc": "",
            "src/app/__init__.py": "",
            "src/app/json.py": "",  # app.json: inside a package, shadows nothing
            "src/app/types/__init__.py": "",
        },
    )
    found = [w for w, _ in infra(repo)]
    assert sorted(found) == [
        "json.py",
        "pluggy.pyc",
        "pytest/__init__.py",
        "pytest/__main__.py",
        "tests/json.py",
    ]


# --- pytest internals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("from _pytest import runner", "_pytest"),
        ("pytest_plugins = ['helpers']", "pytest_plugins"),
        ("@pytest.hookimpl(hookwrapper=True)", "plugin machinery"),
        (
            "def pytest_collection_modifyitems(items):\n    pass",
            "pytest hook pytest_collection_modifyitems",
        ),
        ("sys.modules['pytest'] = fake", "replaces pytest in sys.modules"),
        ("pytest.skip = lambda *a: None", "patches the pytest module"),
        ("pytest.exit('done', returncode=0)", "ends the pytest session"),
        ("os.environ.pop('RELAY_AUDIT_REPORT_DIR')", "relay's pytest plugin"),
    ],
)
def test_new_code_reaching_into_pytest_is_a_finding(repo: Path, line: str, what: str) -> None:
    write_files(repo, {"tests/test_calc.py": CALC_TEST + f"\n\n{line}\n"})
    found = infra(repo)
    assert len(found) == 1 and found[0][0].startswith("tests/test_calc.py:"), found
    assert what in found[0][1]


def test_skipping_from_code_under_test_is_a_finding(repo: Path) -> None:
    write_files(repo, {"calc.py": "import pytest\n\n\ndef add(a, b):\n    pytest.skip('no')\n"})
    assert [w for w, _ in infra(repo)] == ["calc.py:5"]


def test_honest_test_code_is_no_finding(repo: Path) -> None:
    write_files(
        repo,
        {
            "tests/test_calc.py": CALC_TEST
            + "\n\n# we do not use _pytest or hookwrapper here\n"
            + "def test_doc():\n    assert 'pytest_runtest_setup' in 'pytest_runtest_setup docs'\n\n\n"
            + "def test_mocked(monkeypatch):\n    monkeypatch.setitem(sys.modules, 'requests', None)\n\n\n"
            + "def pytest_generate_tests(metafunc):\n    pass\n\n\n"
            + "def test_skip_here():\n    pytest.importorskip('numpy')\n",
            "tests/test_extra.py": "import pytest\n\n\ndef test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n",
        },
    )
    assert infra(repo) == []


def test_code_the_base_commit_had_is_no_finding(make_repo: Callable[..., Path]) -> None:
    plugin = "import pytest\n\n\n@pytest.hookimpl\ndef pytest_configure(config):\n    pass\n"
    repo = make_repo({"src/plugin.py": plugin})
    write_files(repo, {"src/plugin.py": plugin + "\n\ndef helper():\n    return 1\n"})
    assert infra(repo) == []
