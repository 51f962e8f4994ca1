"""``relay batch --emit-matrix`` (issue 17, item 5): one CI job per goal. The matrix names each
goal's branch, goal (text or file from the repository's root), model and options; the GitHub
job's step (the goal-relay action, its steps run as written) with a matrix entry runs the goal
on its branch and pushes it. tests/test_ci_examples.py validates the nightly workflows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from ci_support import action_inputs, expand, run_action_step
from conftest import GIT_EMAIL, GIT_NAME, call, complete, git, respond
from sandbox_support import require_bwrap

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


def test_the_github_jobs_action_runs_the_goal_on_its_branch_and_pushes_it(
    make_repo, write_script, tmp_path, run_relay
):
    """The nightly goal job's step, the goal-relay action, with its inputs from a matrix
    entry: the action's own steps run as written (tests/ci_support.py)."""
    require_bwrap()  # the job requires the sandbox
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
    inputs = action_inputs({k: expand(str(v), {"matrix": entry}) for k, v in step["with"].items()})
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    env = {**os.environ, "RUNNER_TEMP": str(temp), "GITHUB_OUTPUT": str(temp / "output")}
    for name in ("Git identity for relay's commits", "run"):
        proc = run_action_step(name, inputs, job, env)
        assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in (temp / "output").read_text().splitlines())
    assert outputs["exit-code"] == "0"
    result = json.loads(Path(outputs["result"]).read_text())
    assert (result["status"], result["sandbox"]) == ("complete", "bwrap")
    assert "# relay: complete" in Path(outputs["summary"]).read_text()
    assert git(remote, "show", "relay/batch-fix:n.txt") == "n"
    author = git(remote, "log", "-1", "--format=%an", "relay/batch-fix").strip()
    assert author == GIT_NAME  # the checkout's identity is kept
