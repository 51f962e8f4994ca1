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


@pytest.mark.parametrize(
    ("files", "command"),
    [
        # explicit pytest configuration beats a project script
        ({"pytest.ini": "", "package.json": '{"scripts": {"test": "jest"}}'}, PYTEST_COMMAND),
        # a declared script beats bare conventions
        (
            {"package.json": '{"scripts": {"test": "jest"}}', "tests/test_a.py": ""},
            "npm test --silent",
        ),
        ({"go.mod": "", "Cargo.toml": ""}, "go test ./..."),
        ({"Cargo.toml": "", "Makefile": "test:\n\tx\n"}, "cargo test"),
        ({"Makefile": "test:\n\tx\n", "tests/test_a.py": ""}, "make test"),
        # Python test files beat tox and nox (which build environments around them)
        ({"tox.ini": "[tox]\n", "tests/test_a.py": ""}, PYTEST_COMMAND),
        ({"tox.ini": "[tox]\n", "noxfile.py": ""}, "tox"),
    ],
)
def test_order_of_preference(files: dict[str, str], command: str) -> None:
    found = discover(files)
    assert found is not None and found[0] == command


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
