"""CI and unattended operation (issue 8): a goal carried by its branch from one CI job to the
next, batches of goals, and CI outputs (the shipped CI examples: tests/test_ci_examples.py)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml
from conftest import GIT_EMAIL, GIT_NAME, call, complete, git, respond, state_dir

NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = respond(call("write_file", path="notes.txt", content="hello\n"))
GOAL = "Create notes.txt saying hello."


def clone(remote: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(where)], check=True)
    git(where, "config", "user.name", GIT_NAME)
    git(where, "config", "user.email", GIT_EMAIL)
    return where


def test_a_second_ci_job_on_a_fresh_clone_continues_the_goal_from_its_branch(
    tmp_path, write_script, run_relay
):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    seed = clone(remote, tmp_path / "seed")
    (seed / "README.md").write_text("project\n")
    (seed / "relay.yaml").write_text(yaml.safe_dump(NOTES))
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "initial")
    git(seed, "push", "-q", "origin", "main")

    script = write_script(
        [
            {
                **respond(
                    call("shell", command="echo exploring"), call("handoff", note="next: notes")
                ),
                "usage": {"input": 1500, "output": 600},
            },
            {"text": "Explored the repository. Next: write notes.txt.", "usage": {"input": 10}},
            WRITE_NOTES,
            complete("notes written"),
        ]
    )
    common = ["--branch", "relay/ci-goal", "--push", "--model", f"scripted:{script}", "--json"]

    job1 = clone(remote, tmp_path / "job1")
    code, out, err = run_relay(["run", GOAL, "--repo", job1, "--token-budget", "2000", *common])
    first = json.loads(out)
    assert (code, first["status"]) == (5, "budget_limited"), err
    remote_log = git(remote, "log", "--format=%s", "relay/ci-goal").splitlines()
    assert remote_log[0].startswith("relay: round 2: budget_limited")

    job2 = clone(remote, tmp_path / "job2")  # a fresh machine: no state database
    assert not state_dir(job2).exists()
    code, out, err = run_relay(["run", "--repo", job2, "--token-budget", "100000", *common])
    second = json.loads(out)
    assert (code, second["status"]) == (0, "complete"), json.dumps(
        [c for c in second["audit"]["checks"] if not c["passed"]]
    )
    assert second["goal_id"] == first["goal_id"]
    assert second["rounds"] == 3, [
        (e["kind"], e["round"], e["detail"][:60]) for e in second["events"]
    ]
    assert any(e["kind"] == "imported" for e in second["events"])
    assert git(job2, "rev-parse", "--abbrev-ref", "HEAD").strip() == "relay/ci-goal"
    remote_log = git(remote, "log", "--format=%s", "relay/ci-goal").splitlines()
    assert remote_log[0].startswith("relay: round 3: complete")
    assert "hello" in git(remote, "show", "relay/ci-goal:notes.txt")
    progress = git(remote, "show", "relay/ci-goal:.relay/progress.md")
    assert "next: notes" in progress and "status: complete" in progress
    # main is untouched
    assert git(remote, "log", "--format=%s", "main").splitlines() == ["initial"]


def test_a_branch_with_an_open_goal_refuses_a_new_goal(
    tmp_path, make_repo, write_script, run_relay
):
    repo = make_repo(config=NOTES)
    question = respond(call("update_goal", status="needs_user_input", summary="?", question="Q?"))
    script = write_script([question])
    assert run_relay(["run", GOAL, "--repo", repo, "--model", f"scripted:{script}"])[0] == 2
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(repo), str(fresh)], check=True)
    code, _, err = run_relay(
        [
            "run",
            "Another goal.",
            "--repo",
            fresh,
            "--branch",
            "relay/create-notes-txt-saying-hello",
            "--model",
            f"scripted:{script}",
        ]
    )
    assert code == 1 and "relay resume" in err


def test_batch_runs_four_goals_with_two_workers(make_repo, write_script, tmp_path, run_relay):
    repo = make_repo()
    goals = []
    for i, word in enumerate(["alpha", "beta", "gamma", "delta"]):
        script = write_script(
            [respond(call("write_file", path=f"{word}.txt", content=word)), complete()]
        )
        goals.append(
            {
                "goal": f"Write {word}.txt.",
                "name": word,
                "model": f"scripted:{script}",
                "max_rounds": 3 + i,
            }
        )
    goals[3]["model"] = f"scripted:{write_script([respond(text='Hmm.')] * 10)}"  # never works
    goals[3]["max_rounds"] = 2
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump(goals))
    code, out, _ = run_relay(["batch", batch, "--repo", repo, "--workers", "2", "--json"])
    data = json.loads(out.splitlines()[-1])
    results = {r["name"]: r for r in data["goals"]}
    assert [results[w]["status"] for w in ("alpha", "beta", "gamma")] == ["complete"] * 3
    assert results["delta"]["status"] == "limit_reached"
    assert code == data["exit_code"] == 4  # the worst of the four
    for word in ("alpha", "beta", "gamma"):
        assert git(repo, "show", f"relay/batch-{word}:{word}.txt") == word
    assert git(repo, "status", "--short") == ""


def test_junit_and_the_job_summary(make_repo, write_script, run_relay, tmp_path, monkeypatch):
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    repo = make_repo(config=NOTES)
    script = write_script([WRITE_NOTES, complete("notes written")])
    junit = tmp_path / "out" / "audit.xml"
    code, out, _ = run_relay(
        ["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--junit", junit, "--json"]
    )
    assert code == 0
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    assert cases[0].get("name") == "goal status" and cases[0].find("failure") is None
    assert any(c.get("name") == "notes.txt" for c in cases)
    text = summary.read_text()
    assert "# relay: complete" in text and "notes.txt" in text
    run_dir = Path(json.loads(out)["run_dir"])
    assert (run_dir / "summary.md").read_text() == text.rstrip("\n") + "\n"


def test_a_failed_goal_is_a_failing_junit_case(make_repo, write_script, run_relay, tmp_path):
    repo = make_repo(config=NOTES)
    script = write_script([respond(text="Thinking.")] * 5)
    junit = tmp_path / "audit.xml"
    code, _, _ = run_relay(
        ["run", GOAL, "--repo", repo, "--model", f"scripted:{script}", "--junit", junit]
    )
    assert code == 4
    failure = ET.parse(junit).getroot().find(".//testcase/failure")
    assert failure is not None and "limit_reached" in failure.get("message", "")
