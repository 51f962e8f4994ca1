"""``relay init`` (SPEC §12, issue 15 item 2): a commented relay.yaml that relay's own loader
reads, with the project's test command as the deliverable, its tests and CI configuration as
protected paths and the sandbox found on this machine, on real project layouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import complete, git

from relay.config import load_config
from relay.data import data_dir
from relay.sandbox import resolve_sandbox

PYTEST_PROJECT = {
    "pyproject.toml": '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n',
    "src/calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "tests/conftest.py": "import sys\nsys.path.insert(0, 'src')\n",
}
NPM_PROJECT = {
    "package.json": json.dumps({"name": "calc", "scripts": {"test": "node --test"}}),
    "index.js": "module.exports = (a, b) => a + b;\n",
    "index.test.js": "const test = require('node:test');\ntest('add', () => {});\n",
    "node_modules/dep/x.test.js": "ignored\n",
}
GO_PROJECT = {
    "go.mod": "module example.com/calc\n\ngo 1.22\n",
    "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    "calc_test.go": 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {}\n',
    ".gitlab-ci.yml": "test:\n  script: go test ./...\n",
}
MAKE_PROJECT = {
    "Makefile": "CC=cc\n\nbuild:\n\t$(CC) -o calc calc.c\n\ntest: build\n\t./run-tests.sh\n",
    "calc.c": "int main(void) { return 0; }\n",
    "run-tests.sh": "#!/bin/sh\nexit 0\n",
    "test/cases.txt": "1 2 3\n",
    ".github/workflows/ci.yml": "on: push\n",
}

LAYOUTS = {
    "pytest": (PYTEST_PROJECT, "python -m pytest -q", ["tests"]),
    "npm": (NPM_PROJECT, "npm test --silent", ["**/*.test.js"]),
    "go": (GO_PROJECT, "go test ./...", ["**/*_test.go", ".gitlab-ci.yml"]),
    "make": (MAKE_PROJECT, "make test", ["test", ".github/workflows"]),
}


def bwrap_works() -> bool:
    return resolve_sandbox("auto").mode == "bwrap"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_init_writes_a_relay_yaml_that_relay_loads(layout, make_repo, run_relay):
    files, command, protected = LAYOUTS[layout]
    repo = make_repo(files)
    code, out, err = run_relay(["init", "--repo", repo])
    assert code == 0, err
    assert out == ""  # messages go to stderr
    assert "written: relay.yaml" in err
    assert f"deliverable: {command} (" in err  # what was found, and why
    text = (repo / "relay.yaml").read_text(encoding="utf-8")
    assert text.startswith("# goal-relay configuration, written by `relay init`")
    cfg = load_config(repo)  # relay's own loader validates it
    assert [d.command for d in cfg.deliverables] == [command]
    assert cfg.tools.protected_paths == protected
    assert cfg.sandbox.mode == ("required" if bwrap_works() else "auto")
    assert cfg.sandbox.network == "deny"
    assert cfg.model is None and "# model: anthropic:" in text
    # the comments name every layer above the file (README, Configuration), not flags alone
    comments = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert "RELAY_* variables and command-line flags override this file" in comments
    assert "your user file" in comments and "RELAY_MODEL" in comments


def test_test_files_of_dependencies_are_not_suggested(make_repo, run_relay):
    repo = make_repo({"package.json": "{}", "node_modules/dep/x.test.js": "x\n", "a.js": "\n"})
    code, _, err = run_relay(["init", "--repo", repo])
    assert code == 0, err
    assert load_config(repo).tools.protected_paths == []


def test_an_npm_placeholder_test_script_gives_no_deliverable(make_repo, run_relay):
    placeholder = 'echo "Error: no test specified" && exit 1'
    repo = make_repo({"package.json": json.dumps({"scripts": {"test": placeholder}})})
    code, _, err = run_relay(["init", "--repo", repo])
    assert code == 0, err
    assert load_config(repo).deliverables == []
    assert "# No test command was found" in (repo / "relay.yaml").read_text()


def test_the_written_deliverable_is_what_the_audit_runs(make_repo, run_relay, relay_run, tmp_path):
    """End to end: after relay init, a goal on a pytest project is accepted because the
    written deliverable (the project's tests) passes."""
    repo = make_repo(PYTEST_PROJECT)
    assert run_relay(["init", "--repo", repo])[0] == 0
    git(repo, "add", "relay.yaml")
    git(repo, "commit", "-q", "-m", "relay init")
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"responses": [complete("tests pass")]}))
    code, data, err = relay_run(repo, script, "Check the tests pass.", "--sandbox", "auto")
    assert code == 0, err
    assert data["status"] == "complete"
    checks = data["audit"]["checks"]
    assert (checks[0]["kind"], checks[0]["target"], checks[0]["passed"]) == (
        "command",
        "python -m pytest -q",
        True,
    )


def test_init_refuses_to_overwrite_without_force(make_repo, run_relay):
    mine = "model: openai:gpt-5\n"
    repo = make_repo(PYTEST_PROJECT, commit=True)
    (repo / "relay.yaml").write_text(mine)
    code, _, err = run_relay(["init", "--repo", repo, "--ci", "github"])
    assert code == 1
    assert "relay.yaml exists already and differs" in err and "--force" in err
    assert "nothing was written" in err
    assert (repo / "relay.yaml").read_text() == mine
    assert not (repo / ".github").exists()  # nothing at all was written
    code, _, err = run_relay(["init", "--repo", repo, "--force"])
    assert code == 0, err
    assert "overwritten: relay.yaml" in err
    assert load_config(repo).deliverables[0].command == "python -m pytest -q"


def test_init_is_idempotent(make_repo, run_relay):
    repo = make_repo(GO_PROJECT)
    assert run_relay(["init", "--repo", repo, "--ci", "gitlab", "--force"])[0] == 0
    first = {p: (repo / p).read_bytes() for p in ("relay.yaml", ".gitlab-ci.yml")}
    code, _, err = run_relay(["init", "--repo", repo, "--ci", "gitlab"])
    assert code == 0, err
    assert "unchanged: relay.yaml" in err and "unchanged: .gitlab-ci.yml" in err
    assert {p: (repo / p).read_bytes() for p in first} == first
    code, _, err = run_relay(["init", "--repo", repo, "--ci", "gitlab", "--force"])
    assert code == 0
    assert {p: (repo / p).read_bytes() for p in first} == first


@pytest.mark.parametrize(
    ("kind", "target", "source"),
    [
        ("github", ".github/workflows/relay.yml", "github-workflow.yml"),
        ("gitlab", ".gitlab-ci.yml", "gitlab-ci.yml"),
    ],
)
def test_init_ci_writes_the_shipped_workflow(kind, target, source, make_repo, run_relay):
    repo = make_repo(MAKE_PROJECT if kind == "gitlab" else PYTEST_PROJECT)
    code, _, err = run_relay(["init", "--repo", repo, "--ci", kind])
    assert code == 0, err
    shipped = (data_dir("examples") / "ci" / source).read_text(encoding="utf-8")
    assert (repo / target).read_text(encoding="utf-8") == shipped
    cfg = load_config(repo)
    assert any(target == p or target.startswith(p + "/") for p in cfg.tools.protected_paths)
    # the machine's rule, as without --ci: the workflow installs bubblewrap and requires it
    assert cfg.sandbox.mode == ("required" if bwrap_works() else "auto")
    assert "runs relay\n  # with --sandbox required" in (repo / "relay.yaml").read_text()


def test_init_ci_names_the_allowed_kinds(make_repo, run_relay):
    repo = make_repo(PYTEST_PROJECT)
    code, _, err = run_relay(["init", "--repo", repo, "--ci", "jenkins"])
    assert code == 1
    assert "--ci 'jenkins'" in err and "github or gitlab" in err
    assert not (repo / "relay.yaml").exists()


def test_init_outside_a_git_repository_is_a_clear_error(tmp_path, run_relay):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    code, _, err = run_relay(["init", "--repo", folder])
    assert code == 1
    assert "is not a git repository" in err and "git init" in err
    assert "Traceback" not in err
    assert not (folder / "relay.yaml").exists()


def test_init_without_bubblewrap_writes_auto_with_the_reason(make_repo, run_relay, monkeypatch):
    import relay.sandbox.launcher as launcher

    real_which = shutil.which
    monkeypatch.setattr(
        launcher.shutil, "which", lambda n, *a, **k: None if n == "bwrap" else real_which(n)
    )
    repo = make_repo(PYTEST_PROJECT)
    code, _, err = run_relay(["init", "--repo", repo])
    assert code == 0, err
    text = (repo / "relay.yaml").read_text()
    assert "bubblewrap (bwrap) is not installed" in text
    assert load_config(repo).sandbox.mode == "auto"


def test_init_in_a_repository_without_commits(make_repo, run_relay):
    repo = make_repo(commit=False)
    Path(repo / "Makefile").write_text("test:\n\ttrue\n")
    code, _, err = run_relay(["init", "--repo", repo])
    assert code == 0, err
    assert load_config(repo).deliverables[0].command == "make test"
