"""Orchestrator cost per round beside the physical floor of a round, with the scripted model.

For each ``--tracked-files`` count it builds a repository with that many files and
``--commits`` commits (``git fast-import``), writes a scripted-model script whose rounds each
make ``--calls`` real tool calls (read_file, write_file, edit_file, cheap ``shell`` commands)
and end with ``handoff``, runs the goal in-process through ``relay.runner.run`` for
``--rounds`` rounds and measures, side by side in the same run:

* relay's overhead per round: the round's wall time (from one ``Store.start_round`` to the
  next) minus the time inside ``ScriptedModel.complete``, attributed by timing wrappers to
  git (``GitRepo``), store (``Store``), context (context builders, the progress file, the goal
  state), tools (``relay.tools``) and other (the rest: loop logic, transcripts, supervisor);
* the physical floor of a round, sampled before every other round of the compared windows
  (relay's overhead there is taken from the rounds between) in a copy of the same
  repository: one ``git add -A`` + ``git commit``, one SQLite transaction with fsync, and a
  plain ``bash -c`` spawn per shell command of the round;
* the git objects (and bytes) each round's commit added.

It prints, per file count, the overhead table, the functions whose cost grew from round 10
to the last rounds, the floor and the objects, then the ratios the issue-12 targets name:
overhead / floor at round 10 (≤ 1.5×), the last rounds / round 10 (≤ 1.2×), git objects per
round (constant) and the wall time of ``relay --version`` (≤ 0.3 s); and the cost of one
``shell`` call in each sandbox mode beside a plain spawn.

Usage: ``python bench/overhead.py [--rounds 50] [--tracked-files 1000,20000] [--commits 5000]
[--calls 10] [--calls-per-step 2] [--shell-calls 50] [--keep]``. Exits 0 whether or not the
targets are met: it is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from overhead_profile import (
    CATEGORIES,
    GIT_PROCESS,
    Bucket,
    Profiler,
    install,
    install_shell_probe,
    round_figures,
    wrapper_cost_s,
)
from overhead_repo import (
    FLOOR_PARTS,
    Floor,
    build_repo,
    build_script,
    git,
    objects_per_round,
)

from relay.runner import RunRequest, run
from relay.sandbox import SandboxSession, SandboxUnavailable, resolve_sandbox
from relay.store import Store
from relay.tools import ToolContext, run_shell

TARGETS = {"floor": 1.5, "growth": 1.2, "version_s": 0.3}
EARLY = 10
"""The round the targets compare with: rounds EARLY-5 … EARLY+WINDOW-6 are its window."""
WINDOW = 20
"""Rounds per window. The floor is sampled before every other round of a window (the even
ones) and relay's overhead is taken from the others: a round that starts right after a floor
sample runs slower (about 3 ms of 35 on a 2-CPU VM, measured side by side), so the two
are never measured one right after the other."""


@dataclass
class Setting:
    """What one run (one tracked-file count) measured."""

    tracked: int
    rounds: list[Bucket]
    figs: list[dict[str, float]]
    early: list[int]
    late: list[int]
    floor: Floor
    objects: dict[int, tuple[int, int]]
    warnings: list[str]
    missing: list[str]

    def measured(self, window: list[int]) -> list[int]:
        """The rounds of ``window`` whose overhead counts: those not started right after a
        floor sample (all of them when every one was)."""
        return [n for n in window if n not in self.floor.samples] or window

    def overhead(self, window: list[int]) -> float:
        """Median total overhead (ms) of the measured rounds of ``window`` (1-based)."""
        return statistics.median(self.figs[n - 1]["total"] for n in self.measured(window))


def windows(rounds: int) -> tuple[list[int], list[int]]:
    """The rounds around round EARLY and the last WINDOW rounds but the final one (which
    also holds the run's end); they overlap for short runs."""
    early = [n for n in range(EARLY - 5, EARLY - 5 + WINDOW) if 2 <= n <= rounds] or [rounds]
    late = [n for n in range(rounds - WINDOW, rounds) if n >= 1] or [rounds]
    return early, late


def run_goal(repo: Path, script_path: Path, rounds: int, steps: int) -> Any:
    """Run the bench goal in-process for exactly ``rounds`` rounds; the outcome."""
    return run(
        RunRequest(
            repo=repo,
            goal=(
                "Keep the round notes in work/ and the counter in src/counter.py up to date, "
                "one round at a time."
            ),
            overrides={
                "model": f"scripted:{script_path}",
                "limits": {
                    "max_rounds_total": rounds,
                    "max_no_progress": rounds + 1,
                    "max_steps_per_round": steps + 1,
                },
                # the guard runs (its cost is measured) but scores nothing, so the repetitive
                # benchmark rounds are never terminated
                "guard": {
                    "weights": {
                        "loop": 0,
                        "drift": 0,
                        "tool_failures": 0,
                        "api_errors": 0,
                        "tamper": 0,
                    }
                },
            },
        )
    )


def measure(tracked: int, args: argparse.Namespace, tmp: Path) -> Setting:
    """Build the repository with ``tracked`` files, run the goal and measure it."""
    where = tmp / f"files-{tracked}"
    repo = where / "repo"
    build_s = build_repo(repo, args.commits, tracked)
    script, steps, shells = build_script(args.rounds, args.calls, args.calls_per_step)
    script_path = where / "script.yaml"
    script_path.write_text(yaml.safe_dump(script, sort_keys=False), encoding="utf-8")
    early, late = windows(args.rounds)
    floor = Floor(repo, where, shells)
    sampled = {n for n in set(early) | set(late) if n % 2 == 0} or set(early) | set(late)
    prof = Profiler(between_rounds=lambda n: floor.sample(n) if n in sampled else None)
    install(prof)
    install_shell_probe(prof)
    print(
        f"\n=== {tracked} tracked files, {args.commits} commits (built in {build_s:.1f} s), "
        f"{args.rounds} rounds of {args.calls} real tool calls in {steps} steps (+ handoff)",
        flush=True,
    )
    started = time.perf_counter()
    try:
        outcome = run_goal(repo, script_path, args.rounds, steps)
    finally:
        prof.restore()
        floor.close()
    print(f"run took {time.perf_counter() - started:.0f} s")
    warnings = check_run(repo, outcome.goal_id, args.rounds, args.calls)
    branch = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    done = [b for b in prof.rounds if b.end is not None]
    if not done:
        raise SystemExit("no round was measured: " + "; ".join(warnings))
    return Setting(
        tracked=tracked,
        rounds=done,
        figs=[round_figures(b) for b in done],
        early=[n for n in early if n <= len(done)] or [len(done)],
        late=[n for n in late if n <= len(done)] or [len(done)],
        floor=floor,
        objects=objects_per_round(repo, branch, sorted(sampled)),
        warnings=warnings,
        missing=prof.missing,
    )


def check_run(repo: Path, goal_id: str, rounds: int, calls: int) -> list[str]:
    """Warnings when the run did not do what the benchmark intends."""
    warnings: list[str] = []
    store = Store(repo / ".git" / "relay" / "relay.db")  # the default state folder
    try:
        goal = store.goal(goal_id)
        if goal.rounds != rounds:
            warnings.append(f"{goal.rounds} rounds ran, not {rounds}")
        if (goal.status, goal.reason) != ("limit_reached", "total_rounds"):
            warnings.append(f"the goal ended as {goal.status} ({goal.reason}): {goal.message}")
        bad = [r.n for r in store.rounds(goal_id) if r.real_tool_calls != calls]
        if bad:
            warnings.append(f"rounds without exactly {calls} real tool calls: {bad[:10]}")
        errors = [
            (s["round"], a["name"], str(a.get("result", ""))[:120])
            for s in store.steps(goal_id)
            for a in s["actions"]
            if a["is_error"]
        ]
        if errors:
            warnings.append(f"{len(errors)} tool calls failed, e.g. {errors[0]}")
    finally:
        store.close()
    return warnings


# --------------------------------------------------------------------------------------------
# Figures of one setting
# --------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def print_categories(s: Setting) -> None:
    """The per-round table by category, over every round."""
    figs = s.figs
    print(f"{'per round (ms)':<28}{'median':>8}{'mean':>8}{'p90':>8}{'max':>8}{'share':>8}")
    mean_total = statistics.fmean(f["total"] for f in figs)
    for key in (*CATEGORIES, "other", "total"):
        vals = [f[key] for f in figs]
        name = "total overhead" if key == "total" else key
        share = 100 * statistics.fmean(vals) / mean_total if mean_total else 0.0
        print(
            f"  {name:<26}{statistics.median(vals):8.1f}{statistics.fmean(vals):8.1f}"
            f"{percentile(vals, 90):8.1f}{max(vals):8.1f}{share:7.0f}%"
        )
    print(f"  {'(scripted model, excluded)':<26}{statistics.median(f['model'] for f in figs):8.2f}")


def _per_round(buckets: list[Bucket]) -> tuple[dict[tuple[str, str], float], dict[Any, float]]:
    """Mean exclusive ms and calls per round of each wrapped function over ``buckets``."""
    excl: dict[tuple[str, str], float] = defaultdict(float)
    calls: dict[tuple[str, str], float] = defaultdict(float)
    for b in buckets:
        for key, secs in b.excl.items():
            excl[key] += 1000 * secs / len(buckets)
        for key, count in b.calls.items():
            calls[key] += count / len(buckets)
    return excl, calls


def print_functions(s: Setting) -> None:
    """Exclusive time by function over every round, processes per round."""
    excl, calls = _per_round(s.rounds)
    print(f"\n{'exclusive time by function':<48}{'ms/round':>9}{'calls/round':>12}{'ms/call':>9}")
    for key in sorted(excl, key=lambda k: -excl[k]):
        cat, label = key
        if cat == "model" or excl[key] < 0.05:
            continue
        print(
            f"  {cat + ':':<9}{label:<39}{excl[key]:9.2f}{calls[key]:12.1f}"
            f"{excl[key] / calls[key]:9.3f}"
        )
    unwrapped = [
        f["other"] - 1000 * sum(v for (c, _), v in b.excl.items() if c == "other")
        for f, b in zip(s.figs, s.rounds, strict=True)
    ]
    print(f"  {'other:':<9}{'(not in any wrapped function)':<39}{statistics.fmean(unwrapped):9.2f}")
    git_procs = sum(c for (_, lab), c in calls.items() if lab.startswith(GIT_PROCESS))
    print(
        f"processes per round: {git_procs:.1f} git, "
        f"{calls[('tools', 'tools.run_shell')]:.1f} shell (bash)"
    )
    idle = [1000 * b.idle_s for b in s.rounds]
    if any(idle):
        print(
            f"shell idle waits (pipes at EOF, process not reaped yet): "
            f"{sum(b.idle_n for b in s.rounds) / len(s.rounds):.1f} per round, "
            f"{statistics.fmean(idle):.1f} ms per round (part of tools.run_shell)"
        )


def print_growth(s: Setting) -> None:
    """The wrapped functions (and categories) whose time per round grew most from the rounds
    around round EARLY to the last rounds: where round N's cost grows with N."""
    early = [s.rounds[n - 1] for n in s.measured(s.early)]
    late = [s.rounds[n - 1] for n in s.measured(s.late)]
    before, _ = _per_round(early)
    after, _ = _per_round(late)
    label = f"rounds {s.late[0]}-{s.late[-1]}"
    print(f"\ngrowth from rounds {s.early[0]}-{s.early[-1]} to {label} (ms/round):")
    for key in (*CATEGORIES, "other", "total"):
        a = statistics.fmean(round_figures(b)[key] for b in early)
        z = statistics.fmean(round_figures(b)[key] for b in late)
        print(f"  {key:<36}{a:8.2f} → {z:8.2f}  ({z - a:+.2f})")
    keys = sorted(set(before) | set(after), key=lambda k: before.get(k, 0) - after.get(k, 0))
    grown = [k for k in keys if k[0] != "model" and after.get(k, 0) - before.get(k, 0) >= 0.05]
    for cat, name in grown[:10]:
        a, z = before.get((cat, name), 0.0), after.get((cat, name), 0.0)
        print(f"  {cat + ':':<9}{name:<27}{a:8.2f} → {z:8.2f}  ({z - a:+.2f})")
    if not grown:
        print("  no wrapped function grew by 0.05 ms or more")


def print_floor_and_objects(s: Setting) -> None:
    """The floor's parts at both windows and the git objects per round."""
    for name, window in (("round 10", s.early), (f"round {len(s.rounds)}", s.late)):
        f = s.floor.median(window)
        parts = ", ".join(f"{p} {f[p]:.1f}" for p in FLOOR_PARTS)
        print(f"physical floor at {name} (ms, median): {parts} = {f['total']:.1f}")
    shown = [f"round {n}: {o} objects, {b:,} bytes" for n, (o, b) in sorted(s.objects.items())]
    if shown:
        print("git objects added per round: " + "; ".join([shown[0], shown[-1]]))


# --------------------------------------------------------------------------------------------
# Ratios, start-up, shell calls
# --------------------------------------------------------------------------------------------


def version_wall_s(runs: int = 5) -> float:
    """Median wall time (s) of ``relay --version`` (the console script of this Python, else
    ``python -m relay.cli``), after one warm-up run."""
    script = Path(sys.executable).with_name("relay")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "relay.cli"]
    samples = []
    for i in range(runs + 1):
        started = time.perf_counter()
        subprocess.run([*argv, "--version"], capture_output=True, check=False)
        if i:
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _objects_line(s: Setting) -> str:
    def median(window: list[int]) -> str:
        values = [s.objects[n] for n in window if n in s.objects]
        if not values:
            return "-"
        kb = statistics.median(b for _, b in values) / 1000
        return f"{statistics.median(o for o, _ in values):.0f} ({kb:.1f} kB)"

    return f"{median(s.early)} → {median(s.late)}"


def _boxed_ratio(s: Setting, window: list[int]) -> str:
    boxed = s.floor.boxed_total(window)
    return "no bwrap" if boxed is None else f"{s.overhead(window) / boxed:.2f}x"


def print_ratios(settings: list[Setting], version_s: float) -> None:
    """The issue-12 targets, one column per tracked-file count."""
    heads = "".join(f"{f'{s.tracked:,} files':>30}" for s in settings)
    last = len(settings[0].rounds)
    print(f"\n{'ratios (medians over 10 rounds each)':<44}{heads}{'target':>12}")
    rows: list[tuple[str, Callable[[Setting], str], str]] = [
        ("overhead at round 10 (ms)", lambda s: f"{s.overhead(s.early):.1f}", ""),
        (
            "physical floor at round 10 (ms)",
            lambda s: f"{s.floor.median(s.early)['total']:.1f}",
            "",
        ),
        (
            "overhead / floor at round 10",
            lambda s: f"{s.overhead(s.early) / s.floor.median(s.early)['total']:.2f}x",
            f"≤ {TARGETS['floor']}x",
        ),
        (
            "overhead / floor, spawns in bwrap, round 10",
            lambda s: _boxed_ratio(s, s.early),
            f"≤ {TARGETS['floor']}x",
        ),
        (
            f"overhead / floor at round {last}",
            lambda s: f"{s.overhead(s.late) / s.floor.median(s.late)['total']:.2f}x",
            "",
        ),
        (
            f"round {last} / round 10 (overhead)",
            lambda s: f"{s.overhead(s.late) / s.overhead(s.early):.2f}x",
            f"≤ {TARGETS['growth']}x",
        ),
        ("git objects per round (10 → last)", _objects_line, "constant"),
    ]
    for name, value, target in rows:
        print(f"  {name:<42}{''.join(f'{value(s):>30}' for s in settings)}{target:>12}")
    met = "met" if version_s <= TARGETS["version_s"] else "NOT met"
    print(f"  {'relay --version (s)':<42}{version_s:>30.2f}{'≤ 0.3 s':>12}  ({met})")


def shell_call_cost(repo: Path, calls: int) -> None:
    """Print the cost of one ``shell`` call (``true``) in each sandbox mode beside a plain spawn
    of ``bash -c true``, measured side by side in this run (SPEC §14)."""
    ctx = ToolContext(repo_root=repo, state_dir=repo / ".git" / "relay", run_dir=repo.parent)
    modes: dict[str, Callable[[], Any]] = {
        "plain spawn (bash -c true)": lambda: subprocess.run(["/bin/bash", "-c", "true"]),
        "shell tool, sandbox off (reaper)": lambda: run_shell(ctx, "true"),
    }
    try:
        sandbox = resolve_sandbox("required", state_dirs=[repo / ".git" / "relay"])
        boxed = dataclasses.replace(ctx, sandbox=sandbox)
        modes["shell tool, bubblewrap sandbox"] = lambda: run_shell(boxed, "true")
        session = SandboxSession(sandbox, repo)
        kept = dataclasses.replace(boxed, session=session)
        modes["shell tool, kept bubblewrap sandbox"] = lambda: run_shell(kept, "true")
    except SandboxUnavailable as exc:
        print(f"bubblewrap not measured: {exc}")
    timings: dict[str, float] = {}
    for label, call in modes.items():
        call()  # warm-up
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            call()
            samples.append(1000 * (time.perf_counter() - started))
        timings[label] = statistics.median(samples)
    if "session" in locals():
        session.close()
    plain = timings["plain spawn (bash -c true)"]
    print(f"\ncost of one shell call ({calls} calls each, median):")
    for label, ms in timings.items():
        print(f"  {label:<36}{ms:8.2f} ms   {ms / plain:5.1f}x plain")


def _file_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of file counts: {text!r}") from None
    if not counts or min(counts) < 7:
        raise argparse.ArgumentTypeError("each file count must be at least 7")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5000, help="commits in the repository")
    parser.add_argument("--rounds", type=int, default=50, help="rounds to run (up to 1000)")
    parser.add_argument(
        "--tracked-files",
        type=_file_counts,
        default=[1000, 20000],
        help="comma-separated tracked-file counts, one run each (default 1000,20000)",
    )
    parser.add_argument("--calls", type=int, default=10, help="real tool calls per round")
    parser.add_argument("--calls-per-step", type=int, default=2, help="tool calls per response")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--shell-calls", type=int, default=50, help="shell calls per mode")
    args = parser.parse_args(argv)
    if args.commits < 1 or not 1 <= args.rounds <= 1000 or args.calls < 1:
        parser.error("--commits and --calls must be positive, --rounds 1 to 1000")
    if args.calls_per_step < 1:
        parser.error("--calls-per-step must be positive")
    tmp = Path(tempfile.mkdtemp(prefix="relay-bench-"))
    try:
        print("goal-relay cost per round beside the physical floor (scripted model)")
        print(
            f"git {git(tmp, '--version').strip().removeprefix('git version ')}, Python "
            f"{platform.python_version()}, {os.cpu_count()} CPUs, folder {tmp}"
            f"{' (kept)' if args.keep else ''}"
        )
        cost_s = wrapper_cost_s()
        settings = []
        for tracked in args.tracked_files:
            s = measure(tracked, args, tmp)
            settings.append(s)
            for warning in s.warnings:
                print(f"WARNING: {warning}")
            if s.missing:
                print("not wrapped (no such name any more): " + ", ".join(s.missing))
            print_categories(s)
            print_functions(s)
            print_growth(s)
            print_floor_and_objects(s)
        wrapped = statistics.fmean(sum(b.calls.values()) for b in settings[0].rounds)
        print(
            f"\ninstrumentation: {wrapped:.0f} wrapped calls per round x {cost_s * 1e6:.1f} us "
            f"= {wrapped * cost_s * 1000:.2f} ms per round (included in the figures)"
        )
        print_ratios(settings, version_wall_s())
        shell_call_cost(tmp / f"files-{args.tracked_files[0]}" / "repo", args.shell_calls)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
