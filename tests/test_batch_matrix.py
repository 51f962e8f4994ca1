"""``relay batch --emit-matrix`` (issue 17, item 5): one CI job per goal. The matrix names each
goal's branch, goal (text or file from the repository's root), model and options; the shipped
nightly workflows are valid against their schemas, and the GitHub job's own shell step, run as
written with a matrix entry, runs the goal on its branch and pushes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import GIT_EMAIL, GIT_NAME, call, complete, git, respond

EXAMPLES = Path(__file__).parents[1] / "examples" / "ci"


def _repo_with_goals(make_repo, write_script) -> Path:
    script = write_script([respond(call("write_file", path="n.txt", content="n")), complete()])
    repo = make_repo(
        files={
            "plans/fix.md": "---\nlimits: {max_rounds_total: 3}\n---\nWrite n.txt.\n",
            "plans/script.yaml": Path(script).read_text(),
        }
    )
    goals = [
        {"goal_file": "plans/fix.md", "name": "fix", "model": "scripted:plans/script.yaml"},
        {"goal": "Say 'hi' twice.", "name": "hi", "max_rounds": 2, "unattended": True},
    ]
    (repo / "relay-goals.yaml").write_text(yaml.safe_dump(goals))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "goals")
    return repo


def test_the_github_matrix_has_one_entry_per_goal(make_repo, write_script, run_relay):
    repo = _repo_with_goals(make_repo, write_script)
    code, out, err = run_relay(
        ["batch", "--emit-matrix", repo / "relay-goals.yaml", "--repo", repo]
    )
    assert code == 0, err
    fix, hi = json.loads(out)["include"]
    assert fix == {
        "name": "fix",
        "branch": "relay/batch-fix",
        "goal": "",
        "goal_file": "plans/fix.md",
        "model": "scripted:plans/script.yaml",
        "options": "",
    }
    assert (hi["goal"], hi["branch"], hi["options"]) == (
        "Say 'hi' twice.",
        "relay/batch-hi",
        "--max-rounds 2 --unattended",
    )


def test_the_gitlab_child_pipeline_has_a_job_per_goal(make_repo, write_script, run_relay):
    repo = _repo_with_goals(make_repo, write_script)
    code, out, _ = run_relay(
        ["batch", "--emit-matrix", "--ci", "gitlab", repo / "relay-goals.yaml", "--repo", repo]
    )
    pipeline = yaml.safe_load(out)
    assert code == 0 and pipeline["include"] == [{"local": "examples/ci/gitlab-relay-goal.yml"}]
    job = pipeline["relay-fix"]
    assert job["extends"] == ".relay-goal"
    assert job["variables"]["BATCH_GOAL_FILE"] == "plans/fix.md"
    assert pipeline["relay-hi"]["variables"]["BATCH_OPTIONS"] == "--max-rounds 2 --unattended"


def test_a_goal_file_outside_the_repository_is_refused(make_repo, tmp_path, run_relay):
    repo = make_repo()
    (tmp_path / "outside.md").write_text("A goal.\n")
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump([{"goal_file": "outside.md"}]))
    code, out, err = run_relay(["batch", "--emit-matrix", batch, "--repo", repo])
    assert code == 1 and not out and "outside the repository" in err


@pytest.mark.parametrize(
    ("example", "schema"),
    [
        ("github-nightly.yml", "vendor.github-workflows"),
        ("gitlab-nightly.yml", "vendor.gitlab-ci"),
        ("gitlab-relay-goal.yml", "vendor.gitlab-ci"),
    ],
)
def test_the_nightly_examples_are_valid_against_their_schemas(example, schema):
    path = EXAMPLES / example
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = path.read_text()
    assert "relay batch --emit-matrix" in text or "relay run" in text


def test_the_github_jobs_step_runs_the_goal_on_its_branch_and_pushes_it(
    make_repo, write_script, tmp_path, run_relay
):
    repo = _repo_with_goals(make_repo, write_script)
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    _, out, _ = run_relay(["batch", "--emit-matrix", repo / "relay-goals.yaml", "--repo", repo])
    entry = json.loads(out)["include"][0]
    job = tmp_path / "job"
    git(tmp_path, "clone", "-q", str(remote), str(job))
    git(job, "config", "user.name", GIT_NAME)
    git(job, "config", "user.email", GIT_EMAIL)
    workflow = yaml.safe_load((EXAMPLES / "github-nightly.yml").read_text())
    [step] = [s for s in workflow["jobs"]["goal"]["steps"] if s.get("id") == "relay"]
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    env = {
        **os.environ,
        **{f"BATCH_{k.upper()}": v for k, v in entry.items() if k != "name"},
        "RUNNER_TEMP": str(temp),
        "GITHUB_OUTPUT": str(temp / "output"),
    }
    proc = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=job, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert (temp / "output").read_text().strip() == "exit_code=0"
    assert json.loads((temp / "relay-result.json").read_text())["status"] == "complete"
    assert "# relay: complete" in (temp / "summary.md").read_text()
    assert git(remote, "show", "relay/batch-fix:n.txt") == "n"
