"""`relay compare`: the same goal in both modes, from one base commit, in two worktrees."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, git, load_json, respond, state_dir

import relay.report  # noqa: F401  (matplotlib's font cache is built under the real HOME)
from relay import runner
from relay.compare import TABLE_ROWS, RunRow, format_cell
from relay.data import data_dir
from relay.store import Store


def _fizzbuzz_repo(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The shipped fizzbuzz example as a fresh repository: (repo, goal file, script)."""
    src = data_dir("examples") / "fizzbuzz"
    repo = tmp_path / "fizz repo"  # a space in the path, on purpose
    shutil.copytree(src / "repo", repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Relay Test")
    git(repo, "config", "user.email", "relay-test@example.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fizzbuzz example")
    return repo, src / "goal.md", src / "script.yaml"


def _markdown_table(text: str) -> dict[str, list[str]]:
    """The first Markdown table of ``text`` as ``{row label: cells}`` (header under "")."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(cells[1]) <= {"-", ":"}:
            continue
        rows[cells[0]] = cells[1:]
    return rows


def _store_figures(run: dict[str, Any]) -> dict[str, Any]:
    """The figures of one compared run, read straight from its store."""
    store = Store(Path(run["store_path"]))
    try:
        data = runner.goal_json(store, run["goal_id"])
        goal = store.goal(run["goal_id"])
        tool_calls = sum(r.tool_calls for r in store.rounds(run["goal_id"]))
    finally:
        store.close()
    return {
        "status": data["status"],
        "reason": data["reason"],
        "rounds": data["rounds"],
        "model_calls": goal.model_calls,
        "tool_calls": tool_calls,
        **data["tokens"],
        "cost_usd": data["cost_usd"],
        "elapsed_s": data["elapsed_s"],
        "audit": "passed" if data["audit"]["passed"] else "failed",
        "mode": goal.mode,
        "branch": data["branch"],
        "base_commit": data["base_commit"],
    }


def test_compare_fizzbuzz_table_json_markdown_html_match_the_stores(
    tmp_path: Path, run_relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The example's pytest runs (8 of them) start faster without this suite's plugins.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    repo, goal_file, script = _fizzbuzz_repo(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    out_dir = tmp_path / "compare out"
    code, stdout, stderr = run_relay(
        [
            "compare",
            "--goal-file",
            goal_file,
            "--repo",
            repo,
            "--model",
            f"scripted:{script}",
            "--max-rounds",
            "6",
            "--html",
            "--out",
            out_dir,
        ]
    )
    assert code == 0, stderr
    assert "Traceback" not in stderr
    data = json.loads((out_dir / "compare.json").read_text(encoding="utf-8"))
    markdown = (out_dir / "compare.md").read_text(encoding="utf-8")
    html = (out_dir / "report.html").read_text(encoding="utf-8")
    assert data["base_commit"] == base
    assert [r["mode"] for r in data["runs"]] == ["relay", "session"]
    assert data["limits"]["max_rounds_total"] == 6

    md_table = _markdown_table(markdown)
    assert md_table[""] == ["relay", "session"]
    for col, run in enumerate(data["runs"]):
        fig = _store_figures(run)
        # each run is an ordinary goal of its mode, on its own branch, from the same commit
        assert fig["mode"] == run["mode"]
        assert fig["branch"] == run["branch"] == f"relay/compare-{data['compare_id']}-{run['mode']}"
        assert fig["base_commit"] == base
        assert Path(run["worktree"]).is_dir()
        assert fig["status"] == "complete" and fig["audit"] == "passed"
        # the JSON's numbers are the store's
        for key in (
            "status",
            "rounds",
            "model_calls",
            "tool_calls",
            "uncached_input",
            "cache_write",
            "cached_input",
            "output",
            "cost_usd",
            "elapsed_s",
            "audit",
        ):
            assert run[key] == fig[key], key
        # and so are the table's, in compare.md and on stdout
        row = RunRow(**{k: v for k, v in run.items() if k in RunRow.__dataclass_fields__})
        for label, key in TABLE_ROWS:
            cell = md_table[label][col]
            assert cell == format_cell(row, key), label
            assert cell in stdout
        assert md_table["rounds"][col] == str(fig["rounds"])
        assert md_table["model calls"][col] == str(fig["model_calls"])
        assert md_table["tool calls"][col] == str(fig["tool_calls"])
        assert md_table["uncached input tokens"][col] == str(fig["uncached_input"])
        assert md_table["cache reads (tokens)"][col] == str(fig["cached_input"])
        assert md_table["output tokens"][col] == str(fig["output"])
        assert float(md_table["cost (USD)"][col]) == pytest.approx(fig["cost_usd"], abs=5e-5)
        assert float(md_table["wall time (s)"][col]) == pytest.approx(fig["elapsed_s"], abs=0.05)
        assert md_table["audit"][col] == fig["audit"]
        # lines changed: git's own count of the branch against the base, without relay's files
        numstat = git(
            repo, "diff", "--numstat", f"{base}..{run['branch']}", "--", ".", ":(exclude).relay"
        )
        added = sum(int(line.split("\t")[0]) for line in numstat.splitlines())
        removed = sum(int(line.split("\t")[1]) for line in numstat.splitlines())
        assert (run["lines_added"], run["lines_removed"]) == (added, removed) != (0, 0)
        assert md_table["lines changed (+/-)"][col] == f"+{added} -{removed}"
    # the HTML report has both modes' charts inline
    assert "<svg" in html and html.count("<svg") >= 3
    assert "http://" not in html and "https://" not in html
    assert "relay" in html and "session" in html
    # the main tree is untouched: same branch, clean
    assert git(repo, "branch", "--show-current").strip() == "main"
    assert git(repo, "status", "--porcelain").strip() == ""


def test_compare_repeat_parallel_and_json(make_repo, write_script, run_relay, tmp_path) -> None:
    repo = make_repo(config={"deliverables": [{"file": "t.txt", "contains": "hello"}]})
    script = write_script(
        [
            respond(call("shell", command="echo working"), text="Writing the file."),
            respond(call("write_file", path="t.txt", content="hello\n")),
            complete("t.txt written"),
        ]
    )
    code, stdout, stderr = run_relay(
        [
            "compare",
            "Write hello into t.txt.",
            "--repo",
            repo,
            "--model",
            f"scripted:{script}",
            "--repeat",
            "2",
            "--parallel",
            "--json",
        ]
    )
    assert code == 0, stderr
    data = load_json(stdout)
    labels = [r["label"] for r in data["runs"]]
    assert labels == ["relay #1", "relay #2", "session #1", "session #2"]
    assert len({r["branch"] for r in data["runs"]}) == 4
    for run in data["runs"]:
        fig = _store_figures(run)
        assert run["status"] == fig["status"] == "complete"
        assert run["model_calls"] == fig["model_calls"] == 3  # each run read the whole script
        assert run["uncached_input"] == fig["uncached_input"] > 0
        assert run["final_response"] == "Writing the file."
    assert data["summary"]["relay"]["complete"] == 2
    assert data["summary"]["session"]["runs"] == 2
    md = (Path(data["out_dir"]) / "compare.md").read_text(encoding="utf-8")
    assert "relay (mean)" in md and "2 of 2 complete" in md
    # relay report --compare renders the saved comparison, also as HTML
    code, report_md, stderr = run_relay(["report", "--compare", data["out_dir"]])
    assert code == 0, stderr
    assert "relay #2" in report_md and "## Tokens per round" in report_md
    out = tmp_path / "cmp.html"
    code, _, stderr = run_relay(["report", "--compare", data["out_dir"], "--html", "--out", out])
    assert code == 0, stderr
    assert "<svg" in out.read_text(encoding="utf-8")


def test_compare_refuses_before_creating_anything(make_repo, write_script, run_relay) -> None:
    repo = make_repo()
    script = write_script([complete()])
    (repo / "dirty.txt").write_text("uncommitted\n")
    code, _, stderr = run_relay(
        ["compare", "Do it.", "--repo", repo, "--model", f"scripted:{script}"]
    )
    assert code == 1 and "dirty.txt" in stderr
    assert git(repo, "branch", "--list", "relay/*").strip() == ""
    assert len(git(repo, "worktree", "list").splitlines()) == 1
    assert not (state_dir(repo) / "compare").exists()
    (repo / "dirty.txt").unlink()
    code, _, stderr = run_relay(["compare", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 1 and "needs a goal" in stderr
    code, _, stderr = run_relay(
        ["compare", "Do it.", "--repo", repo, "--model", f"scripted:{script}", "--repeat", "0"]
    )
    assert code == 1 and "--repeat" in stderr
    code, _, stderr = run_relay(["compare", "Do it.", "--repo", repo])
    assert code == 1 and "no model" in stderr
