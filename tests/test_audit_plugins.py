"""pytest plugins that the working tree supplied (SPEC §9 step 4, §14; docs/audit.md "test
infrastructure"): a plugin module of the tree, new or changed since the base commit, is a
finding however it was loaded; the base commit's plugins, conftest.py files, allowed paths and
packages installed in an ignored folder before the goal started are not. Real pytest runs
through the audit's runner and relay's plugin."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest
from conftest import audit_shell, write_files

from relay.audit_commands import AuditShell, run_check
from relay.audit_plugins import plugin_findings, shadow_findings
from relay.baseline import Baseline

PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"
PLUGIN = "def pytest_report_header(config):\n    return 'project plugin'\n"
FIXTURE = "import pytest\n\n\n@pytest.fixture\ndef one():\n    return 1\n"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    write_files(
        root,
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "from calc import add\n\n\ndef test_add(one):\n"
            "    assert add(one, 2) == 3\n",
            "tests/conftest.py": FIXTURE,
            "myplugin.py": PLUGIN,
            "venvlike/.venv/lib/site-packages/installed_plugin.py": PLUGIN,
        },
    )
    return root


@pytest.fixture()
def shell(repo: Path, tmp_path: Path) -> AuditShell:
    return audit_shell(repo, tmp_path)


def findings(
    repo: Path,
    shell: AuditShell,
    base: dict[str, str],
    *,
    allowed: tuple[str, ...] = (),
    started_at: float | None = None,
) -> list[str]:
    """``where: detail`` of the plugin findings of one real run of ``-p myplugin`` and the
    installed plugin, against base files ``base``."""
    site = repo / "venvlike/.venv/lib/site-packages"
    command = f"PYTHONPATH={shlex.quote(str(site))} {PYTEST} -p myplugin -p installed_plugin"
    check, outcome = run_check(command, 120, shell, 2000)
    assert check.passed and outcome.pytest is not None, check.evidence
    baseline = Baseline("1a2b3c4", [], base.get, started_at=started_at)
    return [
        f"{f.where}: {f.detail}" for f in plugin_findings(repo, baseline, [outcome.pytest], allowed)
    ]


def test_a_plugin_of_the_base_commit_unchanged_is_no_finding(repo: Path, shell: AuditShell) -> None:
    assert findings(repo, shell, {"myplugin.py": PLUGIN}) == []


def test_a_new_or_changed_plugin_of_the_tree_is_a_finding(repo: Path, shell: AuditShell) -> None:
    new = findings(repo, shell, {})
    assert new == [
        "myplugin.py: loaded into pytest as a plugin (`myplugin`), new or changed since 1a2b3c4: "
        "a plugin decides how tests are collected, run and reported"
    ]
    assert findings(repo, shell, {"myplugin.py": "# an older version\n"}) == new
    assert findings(repo, shell, {}, allowed=("*.py",)) == []  # a changed: deliverable allows it


def test_plugins_installed_in_ignored_folders_count_only_when_installed_during_the_goal(
    repo: Path, shell: AuditShell
) -> None:
    base = {"myplugin.py": PLUGIN}
    assert findings(repo, shell, base, started_at=time.time() + 60) == []
    found = findings(repo, shell, base, started_at=time.time() - 3600)
    assert [f.split(":")[0] for f in found] == [
        "venvlike/.venv/lib/site-packages/installed_plugin.py"
    ]


def test_a_new_module_of_the_tree_hiding_an_installed_one_is_a_finding(
    repo: Path, shell: AuditShell, tmp_path: Path
) -> None:
    installed = tmp_path / "installed"
    write_files(installed, {"mylib/__init__.py": "def check(x):\n    assert x\n"})
    write_files(repo, {"mylib/__init__.py": "def check(x):\n    pass\n"})
    write_files(
        repo,
        {"tests/test_lib.py": "from mylib import check\n\n\ndef test_check():\n    check(0)\n"},
    )
    command = f"PYTHONPATH={shlex.quote(str(installed))} {PYTEST}"
    check, outcome = run_check(command, 120, shell, 2000)
    assert check.passed and outcome.pytest is not None, check.evidence  # the copy won
    reports = [outcome.pytest]
    new = shadow_findings(repo, Baseline("1a2b3c4", [], {}.get), reports)
    assert [f"{f.where}: {f.detail}" for f in new] == [
        "mylib/__init__.py: new since 1a2b3c4, imported by the tests instead of the installed "
        "`mylib`: it shadows it"
    ]
    # the project's own module, there at the base commit and also installed: no finding
    base = {"mylib/__init__.py": "def check(x):\n    assert x\n"}.get
    assert shadow_findings(repo, Baseline("1a2b3c4", [], base), reports) == []
    assert shadow_findings(repo, Baseline("1a2b3c4", [], {}.get), reports, ("mylib/**",)) == []


def test_package_metadata_at_the_root_declaring_pytest_plugins_is_a_finding(repo: Path) -> None:
    """Read from the tree, outside the test process (whose code could hide a plugin from
    relay's own): a ``*.dist-info`` or ``*.egg-info`` folder at the root whose entry points
    declare ``pytest11`` plugins, new or changed since the base commit."""
    from relay.audit_plugins import metadata_findings

    points = "[pytest11]\ncalc_helpers = calc_helpers\n"
    write_files(repo, {"calc_helpers-1.0.dist-info/entry_points.txt": points})
    write_files(repo, {"other-2.0.dist-info/entry_points.txt": "[console_scripts]\nx = y:z\n"})
    rel = "calc_helpers-1.0.dist-info/entry_points.txt"
    found = metadata_findings(repo, Baseline("1a2b3c4", [], {}.get))
    assert [f.where for f in found] == [rel]
    assert "pytest11" in found[0].detail
    assert metadata_findings(repo, Baseline("1a2b3c4", [], {rel: points}.get)) == []
    assert metadata_findings(repo, Baseline("1a2b3c4", [], {}.get), ("*.dist-info/**",)) == []
