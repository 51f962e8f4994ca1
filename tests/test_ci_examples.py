"""The CI examples and what ``relay init --ci`` writes (issue 28, items 1, 2, 13 and 14): they
validate against the GitHub workflow, GitHub action and GitLab CI schemas; they install relay
from its repository (the GitHub Action from its own checkout: no package index has
goal-relay), with bubblewrap and ``--sandbox required``; no GitHub expression is pasted into a
shell script and every variable there is quoted; relay has no warning for the GitLab example's
variables; and the action's own steps, run as written, run and continue a goal."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_support import (
    ACTION,
    EXAMPLES,
    ROOT,
    SCHEMAS,
    action_inputs,
    action_step,
    expand,
    github_steps,
    gitlab_scripts,
    load,
    repository,
    run_action_step,
    shell_scripts,
    unquoted_expansions,
    validate,
)
from conftest import call, complete, git, respond
from sandbox_support import require_bwrap

CI_FILES = [ACTION, *(EXAMPLES / name for name in SCHEMAS)]
GITHUB_FILES = [p for p in CI_FILES if not p.name.startswith("gitlab")]
GITLAB_FILES = [p for p in CI_FILES if p.name.startswith("gitlab")]


def test_every_ci_example_has_a_schema():
    assert sorted(p.name for p in EXAMPLES.iterdir()) == sorted(SCHEMAS)


@pytest.mark.parametrize("path", CI_FILES, ids=lambda p: p.name)
def test_every_ci_file_is_valid_against_its_schema(path):
    validate(path, SCHEMAS.get(path.name, "vendor.github-actions"))


@pytest.mark.parametrize(
    ("kind", "target", "schema"),
    [
        ("github", ".github/workflows/relay.yml", "vendor.github-workflows"),
        ("gitlab", ".gitlab-ci.yml", "vendor.gitlab-ci"),
    ],
)
def test_what_relay_init_ci_writes_is_valid_and_installs_relay_from_its_repository(
    kind, target, schema, make_repo, run_relay
):
    repo = make_repo({"test_x.py": "def test_x():\n    pass\n"})
    code, _, err = run_relay(["init", "--repo", repo, "--ci", kind])
    assert code == 0, err
    validate(repo / target, schema)
    text = (repo / target).read_text(encoding="utf-8")
    assert "pip install goal-relay" not in text
    name, ref = repository()
    source = f"uses: {name}@{ref}" if kind == "github" else f'"git+https://github.com/{name}@{ref}"'
    assert source in text


def test_the_github_files_use_the_action_of_relays_repository():
    name, ref = repository()
    for path in GITHUB_FILES[1:]:
        uses = [s["uses"] for _, s in github_steps(load(path)) if "uses" in s]
        relay = [u for u in uses if u.split("@")[0].endswith("/goal-relay")]
        assert relay and set(relay) == {f"{name}@{ref}"}, (path.name, uses)
        for where, script in shell_scripts(path):
            assert not re.search(r"pip\S* install", script), (path.name, where, script)


def test_the_gitlab_files_install_relay_from_its_git_repository():
    name, ref = repository()
    source = f"git+https://github.com/{name}@{ref}"
    for path in GITLAB_FILES:
        data = load(path)
        installs = [s for _, s in gitlab_scripts(data) if "pip install" in s]
        assert installs, path.name
        assert all(s == 'pip install "$GOAL_RELAY_PACKAGE"' for s in installs), installs
        values = [data.get("variables", {}).get("GOAL_RELAY_PACKAGE")] + [
            job.get("variables", {}).get("GOAL_RELAY_PACKAGE")
            for job in data.values()
            if isinstance(job, dict) and "script" in job
        ]
        assert source in values, (path.name, values)
        assert {v for v in values if v} == {source}


def test_the_action_installs_relay_from_its_own_checkout():
    step = action_step("Install goal-relay from the action's checkout")
    assert step["run"].strip().endswith('install --disable-pip-version-check "$GITHUB_ACTION_PATH"')
    assert "goal-relay" not in step["run"].replace('"$GITHUB_ACTION_PATH"', "")


def test_the_actions_install_step_works_without_a_package_index(tmp_path):
    """The install step as written, with pip unable to reach any index (PIP_NO_INDEX) and no
    build isolation: it can only succeed by building relay from the action's folder (a copy
    of this checkout's files). The new virtual environment sees this one's packages (the
    dependencies, setuptools) through a .pth file."""
    checkout = tmp_path / "action"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / "bin"
    site = subprocess.run(
        [bindir / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    here = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "parent-env.pth").write_text(here + "\n")
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_ACTION_PATH": str(checkout),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": "",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of --no-build-isolation
    }
    step = action_step("Install goal-relay from the action's checkout")
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    where = subprocess.run(
        [bindir / "relay", "--version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert where.returncode == 0 and where.stdout.startswith("goal-relay "), where.stderr
    found = subprocess.run(
        [bindir / "python", "-c", "import relay; print(relay.__file__)"],
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert found.startswith(site), found


@pytest.mark.parametrize("path", CI_FILES, ids=lambda p: p.name)
def test_no_github_expression_is_pasted_into_a_shell_script(path):
    for where, script in shell_scripts(path):
        assert "${{" not in script, (path.name, where, script)


@pytest.mark.parametrize("path", CI_FILES, ids=lambda p: p.name)
def test_every_variable_in_a_shell_script_is_quoted(path):
    for where, script in shell_scripts(path):
        assert unquoted_expansions(script) == [], (path.name, where, script)


def test_the_quoting_check_finds_what_it_must():
    script = 'echo $a "$b" $(echo $c) "$(x $d)" $? # $e\nexit $code ${x} "$@" $@'
    assert unquoted_expansions(script) == ["$a", "$c", "$d", "$code", "${x}", "$@"]


def test_every_relay_run_requires_the_sandbox_and_the_scripts_install_bubblewrap():
    action = load(ACTION)
    assert action["inputs"]["sandbox"]["default"] == "required"
    steps = " ".join(s.get("run", "") for _, s in github_steps(action))
    assert "apt-get install -y -qq bubblewrap" in steps
    assert "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in steps
    for path in GITHUB_FILES[1:]:
        runs = [s for _, s in github_steps(load(path)) if s.get("id") == "relay"]
        assert runs and all(s["with"]["sandbox"] == "required" for s in runs), path.name
    for path in GITLAB_FILES:
        scripts = [s for _, s in gitlab_scripts(load(path))]
        for script in (s for s in scripts if "relay run" in s):
            assert "--sandbox required" in script, (path.name, script)
            assert any("apt-get install -y -qq bubblewrap" in s for s in scripts), path.name


def test_relay_has_no_warning_for_the_gitlab_examples_variables(make_repo, run_relay):
    variables = {k: str(v) for k, v in load(EXAMPLES / "gitlab-ci.yml")["variables"].items()}
    repo = make_repo()
    env = {**variables, "RELAY_GOAL": "Add a test.", "RELAY_PUSH_TOKEN": "t0ken"}
    code, out, err = run_relay(
        ["config", "show", "--json", "--repo", repo], subprocess=True, env=env
    )
    assert code == 0, err
    assert "warning" not in err and "not a relay setting" not in err
    budget = json.loads(out)["settings"]["limits.time_budget"]
    assert budget == {"value": 3000.0, "source": "env", "from": "RELAY_LIMITS__TIME_BUDGET"}


def _job_clone(tmp_path: Path, repo: Path, name: str) -> tuple[Path, Path]:
    """A bare remote of ``repo`` (once) and a fresh clone of it, as a CI job's checkout."""
    remote = tmp_path / "remote.git"
    if not remote.exists():
        git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    job = tmp_path / name
    git(tmp_path, "clone", "-q", str(remote), str(job))
    return remote, job


def _run_the_goal(tmp_path: Path, job: Path, given: dict[str, str]) -> dict[str, str]:
    """Run the action's git identity and goal steps in ``job`` with the inputs ``given``;
    returns the goal step's outputs."""
    temp = tmp_path / f"runner-temp-{job.name}"
    temp.mkdir()
    env = {**os.environ, "RUNNER_TEMP": str(temp), "GITHUB_OUTPUT": str(temp / "output")}
    inputs = action_inputs(given)
    for step in ("Git identity for relay's commits", "run"):
        proc = run_action_step(step, inputs, job, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = (temp / "output").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_the_dispatch_workflow_runs_a_goal_then_continues_it_through_the_action(
    make_repo, write_script, tmp_path
):
    require_bwrap()  # the workflow requires the sandbox
    config = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
    repo = make_repo(config=config)
    [step] = [s for _, s in github_steps(load(EXAMPLES / "github-workflow.yml")) if s.get("id")]
    explore = respond(call("shell", command="echo exploring"), call("handoff", note="next"))
    first = write_script([{**explore, "usage": {"input": 1500, "output": 600}}, {"text": "."}])
    inputs = {"branch": "relay/ci-goal", "time_budget": "50m", "goal": "Write notes.txt."}
    given = {
        k: expand(str(v), {"inputs": {**inputs, "model": f"scripted:{first}"}})
        for k, v in step["with"].items()
    }
    remote, job = _job_clone(tmp_path, repo, "job1")
    outputs = _run_the_goal(
        tmp_path, job, {**given, "options": "--token-budget 2000 --max-rounds 3"}
    )
    assert outputs["exit-code"] == "5"  # budget_limited
    assert json.loads(Path(outputs["result"]).read_text())["sandbox"] == "bwrap"
    assert Path(outputs["junit"]).is_file() and Path(outputs["runs"]).is_dir()
    write = respond(call("write_file", path="notes.txt", content="hello\n"))
    second = write_script([write, complete("notes written")])
    inputs = {**inputs, "goal": "", "model": f"scripted:{second}"}
    given = {k: expand(str(v), {"inputs": inputs}) for k, v in step["with"].items()}
    _, job = _job_clone(tmp_path, repo, "job2")
    outputs = _run_the_goal(tmp_path, job, {**given, "options": "--token-budget 100000"})
    assert outputs["exit-code"] == "0"
    assert json.loads(Path(outputs["result"]).read_text())["status"] == "complete"
    assert "# relay: complete" in Path(outputs["summary"]).read_text()
    assert "hello" in git(remote, "show", "relay/ci-goal:notes.txt")
    author = git(remote, "log", "-1", "--format=%an <%ae>", "relay/ci-goal").strip()
    assert author == "relay[bot] <relay-bot@users.noreply.github.com>"  # the action's default


def test_the_readme_names_every_input_and_output_of_the_action():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("#### Installing relay in CI", 1)[1].split("\n### ", 1)[0]
    action = load(ACTION)
    missing = [k for k in (*action["inputs"], *action["outputs"]) if f"`{k}`" not in section]
    assert missing == [] or set(missing) <= {"goal", "branch", "model", "time-budget"}
    for name in ("goal", "branch", "model", "time-budget"):
        assert f"  {name}: " in section  # in the example
