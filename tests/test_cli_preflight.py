"""`relay run` refusals before any work (SPEC §11, §12): repository state, usage and
configuration errors. Each refusal exits 1 with a clear message, makes no model call, creates
no branch and no `.relay/` folder, and leaves the working tree exactly as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, flat, git, respond, state_dir, tree_snapshot

# A script that would change the tree if it ever ran.
WORK = [respond(call("write_file", path="made_by_model.txt", content="x\n")), complete()]


def assert_refused(
    result: tuple[int, str, str], repo: Path | None, before: dict[str, Any] | None, *needles: str
) -> str:
    """Exit 1, every needle in the message, no traceback, and nothing changed in ``repo``."""
    code, out, err = result
    message = flat(err + out)
    assert code == 1, (code, out, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle.lower() in message.lower(), f"{needle!r} not in {message!r}"
    if repo is not None:
        assert not (repo / ".relay").exists(), "a refused run created .relay/"
        assert not (repo / "made_by_model.txt").exists()
        if before is not None:
            assert tree_snapshot(repo) == before
    return message


@pytest.fixture()
def script(write_script):
    return write_script(WORK)


def run_args(repo: Path, script: Path, *extra: str, goal: str | None = "Create the file.") -> list:
    args: list = ["run"]
    if goal is not None:
        args.append(goal)
    return [*args, "--repo", repo, "--model", f"scripted:{script}", "--json", *extra]


# --------------------------------------------------------------------------- repository state


def test_not_a_git_repository(tmp_path, run_relay, script):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "README.md").write_text("no git here\n")
    result = run_relay(run_args(folder, script))
    assert_refused(result, folder, None, "not a git repository")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md"]


def test_repository_without_commits(make_repo, run_relay, script):
    repo = make_repo(commit=False)
    (repo / "draft.txt").write_text("draft\n")
    result = run_relay(run_args(repo, script))
    assert_refused(result, repo, None, "no commits")
    assert git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False) == ""
    assert sorted(p.name for p in repo.iterdir()) == [".git", "draft.txt"]


def test_dirty_tracked_file(make_repo, run_relay, script):
    repo = make_repo({"app.py": "print(1)\n"})
    (repo / "app.py").write_text("print(2)  # work in progress\n")
    before = tree_snapshot(repo)
    msg = assert_refused(run_relay(run_args(repo, script)), repo, before, "app.py")
    assert "--allow-dirty" in msg
    assert (repo / "app.py").read_text() == "print(2)  # work in progress\n"


def test_untracked_file_is_listed(make_repo, run_relay, script):
    repo = make_repo()
    (repo / "notes").mkdir()
    (repo / "notes" / "wip.txt").write_text("uncommitted work\n")
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script)), repo, before, "notes/")
    assert (repo / "notes" / "wip.txt").read_text() == "uncommitted work\n"


def test_staged_file(make_repo, run_relay, script):
    repo = make_repo()
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script)), repo, before, "staged.txt")
    assert git(repo, "diff", "--cached", "--name-only").split() == ["staged.txt"]


def test_allow_dirty_runs_and_carries_the_changes(make_repo, relay_run, script):
    repo = make_repo({"app.py": "print(1)\n"}, {"deliverables": [{"file": "made_by_model.txt"}]})
    (repo / "app.py").write_text("print(2)\n")
    (repo / "wip.txt").write_text("wip\n")
    code, data, _ = relay_run(repo, script, "Create the file.", "--allow-dirty")
    assert code == 0, data
    assert data["status"] == "complete"
    assert (repo / "app.py").read_text() == "print(2)\n"
    assert (repo / "wip.txt").read_text() == "wip\n"
    assert git(repo, "branch", "--show-current").strip() == data["branch"]
    assert data["branch"].startswith("relay/")
    # main is untouched; the uncommitted work lives on the relay branch now.
    assert git(repo, "show", "main:app.py") == "print(1)\n"


def test_detached_head_with_in_place_is_refused(make_repo, run_relay, script):
    repo = make_repo()
    git(repo, "checkout", "-q", "--detach")
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script, "--in-place")), repo, before, "detached")


def test_detached_head_without_in_place_creates_a_relay_branch(make_repo, relay_run, script):
    repo = make_repo(config={"deliverables": [{"file": "made_by_model.txt"}]})
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach")
    code, data, _ = relay_run(repo, script, "Create the file.")
    assert code == 0, data
    branch = data["branch"]
    assert branch.startswith("relay/")
    assert git(repo, "branch", "--show-current").strip() == branch
    assert git(repo, "merge-base", "--is-ancestor", base, branch, check=False) == ""
    assert git(repo, "rev-parse", "main").strip() == base


def _conflicting_branches(repo: Path) -> None:
    """``main`` and ``other`` both change conflict.txt differently."""
    (repo / "conflict.txt").write_text("base\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "conflict.txt").write_text("other side\n")
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "conflict.txt").write_text("main side\n")
    git(repo, "commit", "-q", "-am", "main change")


def test_merge_in_progress_with_conflicts_lists_unmerged_paths(make_repo, run_relay, script):
    repo = make_repo()
    _conflicting_branches(repo)
    git(repo, "merge", "other", check=False)
    assert (repo / ".git" / "MERGE_HEAD").exists()
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script)), repo, before, "merge", "conflict.txt")


def test_rebase_in_progress(make_repo, run_relay, script):
    repo = make_repo()
    _conflicting_branches(repo)
    git(repo, "checkout", "-q", "other")
    git(repo, "rebase", "main", check=False)
    assert (repo / ".git" / "rebase-merge").is_dir() or (repo / ".git" / "rebase-apply").is_dir()
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script)), repo, before, "rebase")


def test_cherry_pick_in_progress(make_repo, run_relay, script):
    repo = make_repo()
    _conflicting_branches(repo)
    git(repo, "cherry-pick", "other", check=False)
    assert (repo / ".git" / "CHERRY_PICK_HEAD").exists()
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script)), repo, before, "cherry-pick")


# --------------------------------------------------------------------------- usage errors


def test_branch_and_in_place_together(make_repo, run_relay, script):
    repo = make_repo()
    before = tree_snapshot(repo)
    result = run_relay(run_args(repo, script, "--branch", "work", "--in-place"))
    assert_refused(result, repo, before, "--branch", "--in-place")


def test_missing_scripted_model_file(make_repo, run_relay, tmp_path):
    repo = make_repo()
    before = tree_snapshot(repo)
    missing = tmp_path / "scripts" / "nowhere.yaml"
    assert_refused(run_relay(run_args(repo, missing)), repo, before, str(missing))


def test_unknown_provider_prefix(make_repo, run_relay):
    repo = make_repo()
    before = tree_snapshot(repo)
    result = run_relay(["run", "Create the file.", "--repo", repo, "--model", "acme:brain-9"])
    assert_refused(result, repo, before, "acme", "scripted:")


def test_open_goal_refuses_another_goal(make_repo, relay_run, run_relay, write_script):
    repo = make_repo()
    question = [
        respond(call("update_goal", status="needs_user_input", summary="?", question="Which port?"))
    ]
    code, data, _ = relay_run(repo, write_script(question), "First goal.")
    assert code == 2 and data["status"] == "needs_user_input"
    before = tree_snapshot(repo)
    calls_before = len(list((state_dir(repo) / "runs").glob("*/transcript.jsonl")))
    script = write_script(WORK)
    code, out, err = run_relay(run_args(repo, script, goal="Another goal."))
    message = flat(err + out)
    assert code == 1, (out, err)
    assert data["goal_id"] in message
    assert "relay resume" in message and "relay clear" in message
    assert tree_snapshot(repo) == before
    assert len(list((state_dir(repo) / "runs").glob("*/transcript.jsonl"))) == calls_before
    assert not (repo / "made_by_model.txt").exists()


def test_run_without_goal_and_no_open_goal(make_repo, run_relay, script):
    repo = make_repo()
    before = tree_snapshot(repo)
    result = run_relay(run_args(repo, script, goal=None))
    msg = assert_refused(result, repo, before, "no open goal")
    assert "relay run" in msg


# --------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("config_text", "needles"),
    [
        pytest.param("bogus: 1\n", ["bogus", "allowed keys", "limits"], id="unknown-top-key"),
        pytest.param(
            "limits: {bogus: 1}\n",
            ["limits.bogus", "allowed keys", "max_rounds_total"],
            id="unknown-nested-key",
        ),
        pytest.param(
            "limits: {max_rounds_total: 0}\n",
            ["limits.max_rounds_total", "= 0", "greater than 0"],
            id="rounds-zero",
        ),
        pytest.param(
            "limits: {max_rounds_total: -1}\n",
            ["limits.max_rounds_total", "-1", "greater than 0"],
            id="rounds-negative",
        ),
        pytest.param(
            "limits: {max_rounds_total: null}\n",
            ["limits.max_rounds_total", "None", "positive whole number"],
            id="rounds-null",
        ),
        pytest.param(
            "limits: {max_rounds_total: abc}\n",
            ["limits.max_rounds_total", "'abc'", "whole number"],
            id="rounds-wrong-type",
        ),
        pytest.param(
            "guard: {loop_similarity: 2}\n",
            ["guard.loop_similarity", "2", "at most 1"],
            id="similarity-too-high",
        ),
        pytest.param(
            "limits: {time_budget: 8x}\n",
            ["limits.time_budget", "'8x'", "90m"],
            id="bad-time-budget",
        ),
        pytest.param(
            "deliverables:\n  - {file: a.txt, command: 'true'}\n",
            ["deliverables", "a.txt", "exactly one of file, command, changed"],
            id="deliverable-two-kinds",
        ),
        pytest.param("limits: [unclosed\n", ["relay.yaml", "not valid YAML"], id="invalid-yaml"),
    ],
)
def test_config_error(make_repo, run_relay, script, config_text, needles):
    repo = make_repo()
    (repo / "relay.yaml").write_text(config_text)
    git(repo, "add", "relay.yaml")
    git(repo, "commit", "-q", "-m", "config")
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script)), repo, before, *needles)


def test_config_error_has_no_traceback_in_a_real_process(make_repo, run_relay, script):
    repo = make_repo(config={"limits": {"max_rounds_total": 0}})
    before = tree_snapshot(repo)
    result = run_relay(run_args(repo, script), subprocess=True)
    assert_refused(result, repo, before, "limits.max_rounds_total", "greater than 0")
    assert result[1].strip() == "", "errors go to stderr, not stdout"


@pytest.mark.parametrize(
    ("goal_file", "needles"),
    [
        pytest.param(
            "---\nlimits: {max_rounds_total: 0}\n---\nDo it.\n",
            ["front matter", "limits.max_rounds_total", "greater than 0"],
            id="bad-value",
        ),
        pytest.param(
            "---\nbogus: 1\n---\nDo it.\n",
            ["front matter", "bogus", "allowed keys"],
            id="unknown-key",
        ),
        pytest.param(
            "---\nlimits: [x\n---\nDo it.\n", ["front matter", "not valid YAML"], id="invalid-yaml"
        ),
        pytest.param("---\nbogus: 1\nDo it.\n", ["never ends"], id="unterminated"),
        pytest.param("---\n- a\n- b\n---\nDo it.\n", ["front matter", "mapping"], id="not-mapping"),
        pytest.param("---\nlimits: {}\n---\n\n", ["empty"], id="empty-goal"),
    ],
)
def test_goal_file_front_matter_error(make_repo, run_relay, script, tmp_path, goal_file, needles):
    repo = make_repo()
    path = tmp_path / "goal.md"
    path.write_text(goal_file)
    before = tree_snapshot(repo)
    result = run_relay(run_args(repo, script, "--goal-file", str(path), goal=None))
    assert_refused(result, repo, before, *needles)


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        pytest.param(
            ["--max-rounds", "0"], ["max_rounds_total", "0", "greater than 0"], id="max-rounds-0"
        ),
        pytest.param(["--max-rounds=-2"], ["max_rounds_total", "-2"], id="max-rounds-negative"),
        pytest.param(["--max-no-progress", "0"], ["max_no_progress", "0"], id="no-progress-0"),
        pytest.param(["--time-budget", "8x"], ["--time-budget", "8x", "90m"], id="time-budget-8x"),
        pytest.param(["--frobnicate"], ["--frobnicate"], id="unknown-flag"),
        pytest.param(
            ["--max-rounds", "many"],
            ["--max-rounds = 'many': expected a whole number"],
            id="max-rounds-not-int",
        ),
    ],
)
def test_flag_error(make_repo, run_relay, script, flags, needles):
    repo = make_repo()
    before = tree_snapshot(repo)
    assert_refused(run_relay(run_args(repo, script, *flags)), repo, before, *needles)


def test_unknown_flag_exits_1_in_a_real_process(make_repo, script):
    """click's usage errors exit 2 by default; relay's contract is 1 (SPEC §12)."""
    repo = make_repo()
    proc = subprocess.run(
        [sys.executable, "-m", "relay.cli", "run", "x", "--repo", str(repo), "--frobnicate"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "--frobnicate" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (repo / ".relay").exists()


def test_invalid_branch_name_is_refused_before_any_change(make_repo, run_relay, script):
    repo = make_repo()
    before = tree_snapshot(repo)
    result = run_relay(run_args(repo, script, "--branch", "bad..name"))
    assert_refused(result, repo, before, "bad..name")
