"""Test-command discovery for the audit's no-deliverables fallback (SPEC §9 step 5): which
command, why, and in which order of preference."""

from __future__ import annotations

import pytest

from relay.testcmd import PYTEST_COMMAND, discover_test_command, is_pytest_command

NPM_PLACEHOLDER = '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'


def discover(files: dict[str, str]) -> tuple[str, str] | None:
    found = discover_test_command(files.get, list(files))
    return (found.command, found.reason) if found else None


@pytest.mark.parametrize(
    ("files", "command", "reason"),
    [
        ({"pytest.ini": "[pytest]\n"}, PYTEST_COMMAND, "pytest.ini exists"),
        (
            {"pyproject.toml": "[project]\nname='x'\n\n[tool.pytest.ini_options]\naddopts='-q'\n"},
            PYTEST_COMMAND,
            "pyproject.toml has [tool.pytest.ini_options]",
        ),
        ({"setup.cfg": "[tool:pytest]\n"}, PYTEST_COMMAND, "setup.cfg has [tool:pytest]"),
        ({"tox.ini": "[tox]\n\n[pytest]\n"}, PYTEST_COMMAND, "tox.ini has [pytest]"),
        (
            {"package.json": '{"scripts": {"test": "jest"}}'},
            "npm test --silent",
            "package.json has scripts.test ('jest')",
        ),
        ({"go.mod": "module x\n"}, "go test ./...", "go.mod exists"),
        ({"Cargo.toml": "[package]\n"}, "cargo test", "Cargo.toml exists"),
        (
            {"Makefile": "all:\n\techo\n\ntest: all\n\t./run\n"},
            "make test",
            "Makefile has a test: target",
        ),
        ({"tests/test_a.py": ""}, PYTEST_COMMAND, "Python test files: tests/test_a.py"),
        (
            {"a_test.py": "", "test_b.py": ""},
            PYTEST_COMMAND,
            "Python test files: a_test.py and 1 more",
        ),
        ({"tox.ini": "[tox]\nenvlist = py311\n"}, "tox", "tox.ini exists"),
        ({"noxfile.py": "import nox\n"}, "nox", "noxfile.py exists"),
    ],
)
def test_each_kind_of_project(files: dict[str, str], command: str, reason: str) -> None:
    assert discover(files) == (command, reason)


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"README.md": "x", "src/app.py": "x"},
        {"package.json": NPM_PLACEHOLDER},
        {"package.json": "{not json"},
        {"package.json": '{"scripts": {"build": "tsc"}}'},
        {"Makefile": "TEST := 1\ntest-all:\n\tx\n"},
        {"pyproject.toml": "[project]\nname = 'x'\n"},
        {"node_modules/x/test_a.py": "", ".venv/lib/tests/test_b.py": "", "tests/__init__.py": ""},
    ],
)
def test_nothing_detected(files: dict[str, str]) -> None:
    assert discover(files) is None


# One project of each kind, in the order of preference (docs/audit.md, README "relay init").
RANKED: list[tuple[str, dict[str, str]]] = [
    ("pytest config", {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-q'\n"}),
    ("npm script", {"package.json": '{"scripts": {"test": "jest"}}'}),
    ("go.mod", {"go.mod": "module x\n"}),
    ("Cargo.toml", {"Cargo.toml": "[package]\n"}),
    ("pytest-named files", {"tests/test_a.py": "def test_a():\n    pass\n"}),
    ("Makefile", {"Makefile": "build:\n\tcc x.c\n\ntest: build\n\t./run\n"}),
    ("other .py under tests/", {"tests/helpers.py": "X = 1\n"}),
    ("tox.ini", {"tox.ini": "[tox]\nenvlist = py\n"}),
    ("noxfile.py", {"noxfile.py": "import nox\n"}),
]

PAIRS = [(RANKED[i], RANKED[j]) for i in range(len(RANKED)) for j in range(i + 1, len(RANKED))]


@pytest.mark.parametrize(("better", "worse"), PAIRS, ids=[f"{b[0]} > {w[0]}" for b, w in PAIRS])
def test_each_pair_of_candidates(
    better: tuple[str, dict[str, str]], worse: tuple[str, dict[str, str]]
) -> None:
    # both kinds of project in one repository: the better one is chosen, for its own reason
    assert discover({**worse[1], **better[1]}) == discover(better[1])


def test_all_candidates_at_once_in_order() -> None:
    files: dict[str, str] = {}
    for _, project in RANKED:
        files.update(project)
    for _, project in RANKED:
        assert discover(files) == discover(project)
        for path in project:
            del files[path]
    assert discover(files) is None


def test_python_tests_beat_a_makefile_and_bare_py_files_do_not() -> None:
    # the README's order: a Python project gets pytest (which the audit reads per test), also
    # when its Makefile has a test: target; .py files pytest would not collect do not count
    makefile = {"Makefile": "test:\n\tpython -m pytest\n"}
    assert discover({**makefile, "tests/test_a.py": ""}) == (
        PYTEST_COMMAND,
        "Python test files: tests/test_a.py",
    )
    assert discover({**makefile, "src/calc_test.py": ""})[0] == PYTEST_COMMAND  # type: ignore[index]
    assert discover({**makefile, "tests/gen_data.py": ""}) == (
        "make test",
        "Makefile has a test: target",
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python -m pytest -q", True),
        ("cd sub && python -m pytest -q", True),
        ("py.test tests", True),
        ("PYTHONPATH=src pytest", True),
        ("npm test", False),
        ("make test", False),
        ("python -m unittest", False),
    ],
)
def test_pytest_commands_are_recognised(command: str, expected: bool) -> None:
    assert is_pytest_command(command) is expected


@pytest.mark.parametrize(
    "command",
    [
        ".venv/bin/pytest -q",
        "sh -c 'pytest -q'",
        "python3 -mpytest",
        "pytest-3 tests",
        "python -c 'import pytest; pytest.main([\"-q\"])'",
    ],
)
def test_pytest_commands_in_other_spellings(command: str) -> None:
    assert is_pytest_command(command)


def test_a_path_that_contains_pytest_is_no_pytest_command() -> None:
    assert not is_pytest_command("test -f '/tmp/pytest-of-root/pytest-1/gate' || sleep 30")
    assert not is_pytest_command("./run-pytest-suite.sh")
