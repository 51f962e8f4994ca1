"""Context growth per round: relay mode against session mode on the same 50-round goal.

Builds a small repository, writes a scripted-model script (SPEC §13) of ``--rounds`` rounds in
which every round reads a source file (~4 KB), greps the sources (~3 KB of output), writes a
note (~1 KB) and hands off, and runs it in both modes with ``relay compare``'s machinery
(:func:`relay.compare.run_compare`: two worktrees, one base commit, the same limits). The
script reports no usage, so the scripted model estimates each request's input tokens as its
characters / 4: the input tokens measure exactly what each mode sends.

Prints, per mode, the input tokens of rounds 5 and 50 (all requests of the round: what the round
costs) and of their first requests (the context a round starts from), with the round-50/round-5
ratios; then, for relay mode, the size of each section of the round message in both rounds, so
that a growing part is named. Target: relay mode's round-50/round-5 ratio of the whole round's
input ≤ 1.1 (the first request's ratio is shown beside it).

Usage: ``python bench/context_growth.py [--rounds 50] [--early 5] [--html FILE] [--keep]``.
Exits 0 whether or not the target is met; it is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from relay.compare import CompareRequest, CompareResult, run_compare
from relay.config import load_config
from relay.gitrepo import GitRepo
from relay.report import GoalReport, compare_html, compare_reports
from relay.statedir import state_dir

TARGET_RATIO = 1.1
MODULES = 8


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _module(k: int) -> str:
    """A Python module of about 4 KB."""
    lines = [f'"""Module {k}: helpers for the benchmark repository."""', "", "import math", ""]
    for j in range(14):
        lines += [
            f"def helper_{k}_{j}(values: list[float], scale: float = {j + 1}.0) -> float:",
            f'    """Scaled root-mean-square of ``values`` (helper {j} of module {k})."""',
            "    if not values:",
            "        return 0.0",
            "    return scale * math.sqrt(sum(v * v for v in values) / len(values))",
            "",
        ]
    return "\n".join(lines) + "\n"


def build_repo(repo: Path) -> None:
    """A repository with ``MODULES`` source files and a README, one commit on ``main``."""
    (repo / "src").mkdir(parents=True)
    for k in range(MODULES):
        (repo / "src" / f"mod_{k}.py").write_text(_module(k), encoding="utf-8")
    (repo / "README.md").write_text("# Benchmark repository\n\nHelpers live in src/.\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "Bench")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "commit.gpgsign", "false")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Initial commit")


def build_script(rounds: int) -> dict[str, Any]:
    """Three steps per round: read + grep, write a note, hand off. No ``usage``: the scripted
    model estimates input tokens as request characters / 4."""
    responses: list[dict[str, Any]] = []
    for r in range(1, rounds + 1):
        k = r % MODULES
        note = "\n".join(
            f"- helper_{k}_{j}: checked; scale {j + 1}.0 keeps the RMS within bounds (round {r})."
            for j in range(12)
        )
        responses += [
            {
                "text": f"Round {r}: reviewing src/mod_{k}.py and the helpers.",
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": f"src/mod_{k}.py"}},
                    {
                        "name": "shell",
                        "arguments": {"command": "grep -n 'def helper' src/*.py | head -60"},
                    },
                ],
            },
            {
                "text": "Writing the review note.",
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {
                            "path": f"notes/round_{r:03d}.md",
                            "content": f"# Review of src/mod_{k}.py (round {r})\n\n{note}\n",
                        },
                    }
                ],
            },
            {
                "tool_calls": [
                    {
                        "name": "handoff",
                        "arguments": {
                            "note": (
                                f"Reviewed src/mod_{k}.py; wrote notes/round_{r:03d}.md.\n"
                                f"Next: review src/mod_{(k + 1) % MODULES}.py the same way."
                            )
                        },
                    }
                ]
            },
        ]
    return {"responses": responses, "when_exhausted": "error"}


def _round_inputs(rep: GoalReport) -> dict[int, int]:
    """Input tokens (uncached + cache writes + cache reads) of every round, all its requests."""
    return {r.n: r.input_tokens for r in rep.rounds}


def _first_requests(worktree: Path) -> dict[int, dict[str, Any]]:
    """The first request of every round, from the run's transcript."""
    first: dict[int, dict[str, Any]] = {}
    runs = state_dir(GitRepo(worktree), load_config(worktree)) / "runs"
    for path in sorted(runs.glob("*/transcript.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row["step"] == 1 and row["round"] not in first and "response" in row:
                first[row["round"]] = row
    return first


def _sections(round_message: str) -> dict[str, int]:
    """Characters of each ``## `` section of a relay-mode round message; the progress file's
    own sections are named ``progress file: <section>``."""
    parts = re.split(r"^## ", round_message, flags=re.M)
    out = {"(heading, round warning)": len(parts[0])}
    inside_progress = False
    for part in parts[1:]:
        title = re.sub(r"\s*\(.*\)$", "", part.splitlines()[0].strip())
        if title == "Progress file":
            inside_progress = True
        elif title == "Recent commits":
            inside_progress = False
        elif inside_progress:
            title = f"progress file: {title}"
        out[title] = len(part) + 3
    return out


def _ratio(late: float, early: float) -> float:
    return late / early if early else float("inf")


def report(result: CompareResult, reports: list[GoalReport], early: int, late: int) -> bool:
    """Print the figures; return whether relay mode met the target."""
    met = True
    print()
    print(
        f"{'mode':<9}{'status':<30}{'whole round':>28}{'ratio':>8}{'first request':>28}{'ratio':>8}"
    )
    sub = f"{f'round {early}':>14}{f'round {late}':>14}{'':>8}"
    print(f"{'':<39}{sub}{sub}")
    details: dict[str, dict[int, dict[str, Any]]] = {}
    for row, rep in zip([r for r in result.runs if r.goal_id], reports, strict=True):
        first = _first_requests(Path(row.worktree))
        details[row.mode] = first
        start = {n: first[n]["response"]["usage"]["uncached_input"] for n in first}
        whole = _round_inputs(rep)
        if early not in start or late not in start:
            print(f"{row.mode:<9}{row.status:<24} ran {row.rounds} rounds: no round {late}")
            met = met and row.mode != "relay"
            continue
        r1 = _ratio(start[late], start[early])
        r2 = _ratio(whole[late], whole[early])
        print(
            f"{row.mode:<9}{row.status + ' (' + str(row.reason) + ')':<30}"
            f"{whole[early]:>14}{whole[late]:>14}{r2:>8.2f}"
            f"{start[early]:>14}{start[late]:>14}{r1:>8.2f}"
        )
        if row.mode == "relay":
            met = r2 <= TARGET_RATIO
    relay = details.get("relay", {})
    if early in relay and late in relay:
        a = _sections(relay[early]["request"]["messages"][0]["content"])
        b = _sections(relay[late]["request"]["messages"][0]["content"])
        system = len(relay[late]["request"]["system"])
        tools = len(json.dumps(relay[late]["request"]["tools"]))
        print()
        print(
            f"relay mode, round message by section (characters; system prompt {system}, "
            f"tool schemas about {tools}, the same every round):"
        )
        print(f"  {'section':<32}{f'round {early}':>10}{f'round {late}':>10}{'growth':>10}")
        for name in dict.fromkeys([*a, *b]):
            print(
                f"  {name:<32}{a.get(name, 0):>10}{b.get(name, 0):>10}"
                f"{b.get(name, 0) - a.get(name, 0):>+10}"
            )
        total_a, total_b = sum(a.values()), sum(b.values())
        print(f"  {'total':<32}{total_a:>10}{total_b:>10}{total_b - total_a:>+10}")
    print()
    verdict = "met" if met else "NOT met"
    print(
        f"target: relay mode round-{late}/round-{early} input ratio (whole round) ≤ "
        f"{TARGET_RATIO}: {verdict}"
    )
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds per mode (the late round)")
    parser.add_argument("--early", type=int, default=5, help="the early round to compare with")
    parser.add_argument("--html", type=Path, help="also write the comparison's HTML report here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    if not 1 <= args.early < args.rounds:
        parser.error("--early must be at least 1 and below --rounds")
    tmp = Path(tempfile.mkdtemp(prefix="relay-growth-"))
    try:
        repo = tmp / "repo"
        build_repo(repo)
        script = tmp / "script.yaml"
        script.write_text(yaml.safe_dump(build_script(args.rounds), sort_keys=False))
        print("goal-relay context growth: relay mode against session mode (scripted model,")
        print(
            f"input estimated at request characters / 4); {args.rounds} rounds of 3 steps; "
            f"folder {tmp}{' (kept)' if args.keep else ''}"
        )
        started = time.monotonic()
        result = run_compare(
            CompareRequest(
                repo=repo,
                goal="Review every module in src/ and keep a review note per round in notes/.",
                overrides={
                    "model": f"scripted:{script}",
                    "limits": {
                        "max_rounds_total": args.rounds,
                        "max_no_progress": args.rounds + 1,
                        "max_steps_per_round": 10,
                    },
                    "guard": {"enabled": False},  # the rounds look alike on purpose
                },
            ),
            show_progress=False,
        )
        print(f"both runs took {time.monotonic() - started:.0f} s")
        reports = compare_reports(result)
        met = report(result, reports, args.early, args.rounds)
        if args.html:
            args.html.write_text(compare_html(result, reports), encoding="utf-8")
            print(f"HTML report: {args.html}")
        print("(the target is reported, not enforced: exit 0 either way)" if not met else "")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
