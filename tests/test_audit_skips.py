"""Which code skipped a test (SPEC §9 step 4, §14; docs/audit.md "skip marker"): a skip or an
xfail decided by a new line of code that is not a test file is a finding, whatever its
spelling; skips from test files, pytest's markers and code the base commit had are not. Real
pytest runs through the audit's runner and relay's plugin."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from conftest import audit_shell, write_files

from relay.audit_commands import AuditShell, run_check
from relay.audit_skips import skip_findings
from relay.baseline import Baseline

PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"

CALC_TEST = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_ok():\n    assert True\n"
)


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    write_files(
        root, {"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_calc.py": CALC_TEST}
    )
    return root


@pytest.fixture()
def shell(repo: Path, tmp_path: Path) -> AuditShell:
    return audit_shell(repo, tmp_path)


def findings(repo: Path, shell: AuditShell, base: dict[str, str]) -> list[tuple[str, str]]:
    """``(where, detail)`` of the skip findings of one real run, against base files ``base``."""
    check, outcome = run_check(PYTEST, 120, shell, 2000)
    assert outcome.pytest is not None, check.evidence
    baseline = Baseline("1a2b3c4", [], base.get)
    return [(f.where, f.detail) for f in skip_findings(repo, baseline, [outcome.pytest])]


@pytest.mark.parametrize(
    ("calc", "line"),
    [
        ("from pytest import skip\n\n\ndef add(a, b):\n    skip('unsupported')\n", 5),
        ("import pytest as p\n\n\ndef add(a, b):\n    p.skip('unsupported')\n", 5),
        ("from pytest import xfail as known\n\n\ndef add(a, b):\n    known('bug')\n", 5),
        ("import pytest\n\n\ndef add(a, b):\n    raise pytest.skip.Exception('x')\n", 5),
        ("import unittest\n\n\ndef add(a, b):\n    return a - b\n", None),  # no skip: no finding
    ],
)
def test_a_skip_from_new_code_under_test_is_a_finding(
    repo: Path, shell: AuditShell, calc: str, line: int | None
) -> None:
    write_files(repo, {"calc.py": calc})
    base = {"calc.py": "def add(a, b):\n    return a - b\n"}
    found = findings(repo, shell, base)
    if line is None:
        assert found == []
        return
    assert [w for w, _ in found] == [f"calc.py:{line}"]
    assert "tests/test_calc.py::test_add" in found[0][1]
    assert "not at 1a2b3c4" in found[0][1]


def test_a_new_call_into_a_skipping_helper_of_the_base_commit_is_a_finding(
    repo: Path, shell: AuditShell
) -> None:
    helper = "import pytest\n\n\ndef needs_network():\n    pytest.skip('no network')\n"
    calc = "from support import needs_network\n\n\ndef add(a, b):\n    needs_network()\n"
    write_files(repo, {"support.py": helper, "calc.py": calc})
    base = {"support.py": helper, "calc.py": "def add(a, b):\n    return a - b\n"}
    assert [w for w, _ in findings(repo, shell, base)] == ["calc.py:5"]


def test_skips_from_tests_markers_and_base_code_are_no_finding(
    repo: Path, shell: AuditShell
) -> None:
    helper = "import pytest\n\n\ndef needs_network():\n    pytest.skip('no network')\n"
    tests = (
        "import pytest\nfrom helpers import later\nfrom support import needs_network\n\n\n"
        "@pytest.mark.skipif(True, reason='platform')\ndef test_marker():\n    pass\n\n\n"
        "@pytest.mark.xfail(reason='bug')\ndef test_xfail_marker():\n    assert False\n\n\n"
        "def test_import():\n    pytest.importorskip('relay_no_such_module')\n\n\n"
        "def test_helper():\n    later()\n\n\n"
        "def test_fixture(offline):\n    pass\n\n\n"
        "def test_base_helper():\n    needs_network()\n"
    )
    write_files(
        repo,
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "support.py": helper,
            "tests/helpers.py": "import pytest\n\n\ndef later():\n    pytest.xfail('later')\n",
            "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef offline():\n"
            "    pytest.skip('offline')\n",
            "tests/test_more.py": tests,
        },
    )
    assert findings(repo, shell, {"support.py": helper}) == []
