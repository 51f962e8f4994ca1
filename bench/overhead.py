"""Orchestrator overhead per round, measured with the scripted model (no model latency).

Builds a repository with many commits (``git fast-import``), writes a scripted-model script
whose rounds each make ``--calls`` real tool calls (read_file, write_file, edit_file, cheap
``shell`` commands) and end with ``handoff``, runs the goal in-process through
``relay.runner.run`` and attributes the wall time of every round to:

* git      - public methods of ``relay.gitrepo.GitRepo`` (and its ``_run``, the git processes)
* store    - public methods of ``relay.store.Store``
* context  - ``relay.context`` builders, ``Prompts.render``, ``GoalLoop._round_message``,
             ``relay.progress.render_progress``, ``GoalLoop._write_progress``
* tools    - ``relay.tools.execute`` (and the executors and ``check_arguments`` it uses)
* other    - the rest of the round's wall time (loop logic, transcripts, supervisor, ...)

The time inside ``ScriptedModel.complete`` is subtracted, so what remains is the orchestrator's
own overhead. Timing wrappers are installed by monkey-patching at runtime (this script only);
nested calls are counted once, in the innermost wrapped function (a per-thread stack subtracts
the children's time from the parent's).

Then it measures one ``shell`` call in each sandbox mode (relay's reaper without a sandbox,
bubblewrap) beside a plain spawn of ``bash -c true``, side by side in the same run.

Usage: ``python bench/overhead.py [--commits 5000] [--rounds 50] [--calls 10] [--shell-calls 50]
[--keep]``. Prints figures and exits 0 whether or not the target (median <= 50 ms per round) is
met.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import relay.context
import relay.loop
import relay.progress
import relay.tools
import relay.tools.shell
from relay.context import Prompts
from relay.gitrepo import GitRepo
from relay.loop import GoalLoop
from relay.models.scripted import ScriptedModel
from relay.runner import RunRequest, run
from relay.sandbox import SandboxUnavailable, resolve_sandbox
from relay.store import Store
from relay.tools import ToolContext, run_shell

TARGET_MS = 50.0
GIT_PROCESS = "process:"
CATEGORIES = ("git", "store", "context", "tools")
MODULE_FILES = 5
T0 = 1_700_000_000

# --------------------------------------------------------------------------------------------
# The repository
# --------------------------------------------------------------------------------------------


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode(errors="replace")


def _module_text(k: int, version: int) -> bytes:
    lines = [f'"""Module {k} of the benchmark repository."""', "", f"VERSION = {version}", ""]
    for j in range(12):
        lines += [f"def helper_{j}(x):", f"    return x * {j + 1} + VERSION", ""]
    return ("\n".join(lines) + "\n").encode()


def build_repo(repo: Path, commits: int) -> float:
    """Create a repository with ``commits`` commits on ``main``; returns the seconds it took.

    The first commit adds every file; each later commit changes one of the module files.
    """
    started = time.perf_counter()
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "Bench")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "commit.gpgsign", "false")
    out: list[bytes] = []

    def data(payload: bytes) -> None:
        out.append(b"data %d\n" % len(payload))
        out.append(payload)
        out.append(b"\n")

    def inline(path: str, payload: bytes) -> None:
        out.append(f"M 100644 inline {path}\n".encode())
        data(payload)

    for i in range(1, commits + 1):
        out.append(b"commit refs/heads/main\n")
        out.append(b"mark :%d\n" % i)
        out.append(b"committer Bench <bench@example.invalid> %d +0000\n" % (T0 + 60 * i))
        if i == 1:
            data(b"Initial commit\n")
            inline(
                "README.md",
                b"# Benchmark repository\n\nModules live in src/; notes in work/.\n",
            )
            inline("src/counter.py", b"counter = 0\n")
            for k in range(MODULE_FILES):
                inline(f"src/mod_{k}.py", _module_text(k, 1))
        else:
            k = i % MODULE_FILES
            data(f"Change module {k} (commit {i})\n\nTouches src/mod_{k}.py only.\n".encode())
            inline(f"src/mod_{k}.py", _module_text(k, i))
        out.append(b"\n")
    _git(repo, "fast-import", "--quiet", stdin=b"".join(out))
    _git(repo, "reset", "--hard", "-q", "main")
    return time.perf_counter() - started


# --------------------------------------------------------------------------------------------
# The scripted model's script (SPEC §13)
# --------------------------------------------------------------------------------------------


class _CallMaker:
    """Makes the real tool calls of each round: a cycle of ten calls (3 read_file, 2 write_file,
    2 edit_file, 3 shell) that always succeed; cut or repeated to the wanted count."""

    def __init__(self) -> None:
        self.counter = 0  # value of ``counter`` in src/counter.py

    def round_calls(self, r: int, n: int) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        rep = 0
        while len(calls) < n:
            calls += self._cycle(r, rep, n - len(calls))
            rep += 1
        return calls

    def _cycle(self, r: int, rep: int, count: int) -> list[dict[str, Any]]:
        sfx = f"_{rep}" if rep else ""
        note = f"work/round_{r:03d}{sfx}.md"
        old = self.counter
        cycle = [
            {"name": "read_file", "arguments": {"path": f"src/mod_{(r + rep) % MODULE_FILES}.py"}},
            {"name": "shell", "arguments": {"command": f"echo round {r}"}},
            {
                "name": "write_file",
                "arguments": {"path": note, "content": f"# Round {r}\n\nstatus: todo\n"},
            },
            {"name": "read_file", "arguments": {"path": note}},
            {
                "name": "edit_file",
                "arguments": {"path": note, "old": "status: todo", "new": "status: done"},
            },
            {"name": "shell", "arguments": {"command": "true"}},
            {"name": "read_file", "arguments": {"path": "README.md", "limit": 20}},
            {
                "name": "edit_file",
                "arguments": {
                    "path": "src/counter.py",
                    "old": f"counter = {old}\n",
                    "new": f"counter = {old + 1}\n",
                },
            },
            {
                "name": "write_file",
                "arguments": {"path": "work/notes.md", "content": f"Last round: {r}{sfx}\n"},
            },
            {"name": "shell", "arguments": {"command": "ls src"}},
        ][:count]
        if any(c["arguments"].get("path") == "src/counter.py" for c in cycle):
            self.counter += 1
        return cycle


def build_script(rounds: int, calls: int, per_step: int) -> tuple[dict[str, Any], int]:
    """The script and the number of steps (model calls) per round."""
    maker = _CallMaker()
    responses: list[dict[str, Any]] = []
    steps = 0
    for r in range(1, rounds + 1):
        round_calls = maker.round_calls(r, calls)
        chunks = [round_calls[i : i + per_step] for i in range(0, len(round_calls), per_step)]
        if not chunks:
            chunks = [[]]
        note = (
            f"Round {r}: wrote work/round_{r:03d}.md, bumped src/counter.py.\n"
            f"Next: continue with round {r + 1}."
        )
        chunks[-1] = [*chunks[-1], {"name": "handoff", "arguments": {"note": note}}]
        for i, chunk in enumerate(chunks):
            responses.append(
                {
                    "text": f"Round {r}, step {i + 1}: working on the notes and the counter.",
                    "tool_calls": chunk,
                    "usage": {"input": 3000 + 400 * i, "cached": 0, "output": 120},
                }
            )
        steps = len(chunks)
    return {"responses": responses, "when_exhausted": "error"}, steps


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


@dataclass
class Bucket:
    """Exclusive seconds and call counts per (category, label), for one round (or the setup)."""

    start: float
    end: float | None = None
    excl: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    idle_s: float = 0.0  # shell: selector waits with no pipe left to read (diagnostic)
    idle_n: int = 0


class Profiler:
    """Installs timing wrappers and attributes exclusive time to the current round."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._patches: list[tuple[Any, str, Any]] = []
        self.setup = Bucket(start=time.perf_counter())
        self.rounds: list[Bucket] = []
        self.current = self.setup
        self.run_end: float | None = None

    def _stack(self) -> list[list[float]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def begin_round(self) -> None:
        now = time.perf_counter()
        if self.rounds:
            self.rounds[-1].end = now
        else:
            self.setup.end = now
        self.current = Bucket(start=now)
        self.rounds.append(self.current)

    def end_run(self) -> None:
        now = time.perf_counter()
        self.run_end = now
        if self.rounds and self.rounds[-1].end is None:
            self.rounds[-1].end = now

    def wrap(
        self,
        fn: Callable[..., Any],
        category: str,
        label: str | Callable[..., str],
        on_enter: Callable[[], None] | None = None,
    ) -> Callable[..., Any]:
        """A timed ``fn``; ``label`` may be a function of the call's arguments."""
        fixed_key = (category, label) if isinstance(label, str) else None
        stack_of = self._stack

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if on_enter is not None:
                on_enter()
            key = fixed_key or (category, label(*args, **kwargs))  # type: ignore[operator]
            stack = stack_of()
            frame = [0.0]  # time spent in wrapped children
            stack.append(frame)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                stack.pop()
                bucket = self.current
                bucket.excl[key] += elapsed - frame[0]
                bucket.calls[key] += 1
                if stack:
                    stack[-1][0] += elapsed

        return timed

    def patch(
        self,
        owner: Any,
        name: str,
        category: str,
        label: str | Callable[..., str] | None = None,
        on_enter: Callable[[], None] | None = None,
    ) -> bool:
        """Replace ``owner.name`` by a timed wrapper; False when it does not exist."""
        original = (
            owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        )
        if original is None or not callable(original):
            return False
        if label is None:
            label = f"{owner.__name__}.{name}" if isinstance(owner, type) else name
        self._patches.append((owner, name, original))
        setattr(owner, name, self.wrap(original, category, label, on_enter))
        return True

    def patch_public_methods(self, cls: type, category: str) -> None:
        """Wrap every public method of ``cls`` that is not wrapped yet."""
        done = {name for owner, name, _ in self._patches if owner is cls}
        for name, obj in list(vars(cls).items()):
            if not name.startswith("_") and name not in done and inspect.isfunction(obj):
                self.patch(cls, name, category)

    def restore(self) -> None:
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        self._patches.clear()


def _git_process_label(_self: Any, args: Any, *_: Any, **__: Any) -> str:
    sub = next((a for a in args if not a.startswith("-") and "=" not in a), "?")
    return f"{GIT_PROCESS} git {sub}"  # one git process (GitRepo._run)


def install(prof: Profiler) -> None:
    # git: every public method, plus the process runner (so that process time shows apart)
    prof.patch_public_methods(GitRepo, "git")
    prof.patch(GitRepo, "_run", "git", _git_process_label)
    # store: every public method; start_round marks the start of a round
    prof.patch(Store, "start_round", "store", on_enter=prof.begin_round)
    prof.patch_public_methods(Store, "store")
    # context building and the progress file
    for name in ("round_message", "continuation_message", "render_supplements", "format_audit"):
        prof.patch(relay.context, name, "context", f"context.{name}")
        prof.patch(relay.loop, name, "context", f"context.{name}")
    prof.patch(relay.progress, "render_progress", "context", "progress.render_progress")
    prof.patch(relay.loop, "render_progress", "context", "progress.render_progress")
    prof.patch(Prompts, "render", "context")
    prof.patch(GoalLoop, "_round_message", "context")
    prof.patch(GoalLoop, "_write_progress", "context")
    # tools, where the loop looks them up (``tools.execute``), and what execute calls
    prof.patch(relay.tools, "execute", "tools", "tools.execute")
    for name in ("check_arguments", "run_shell", "read_file", "write_file", "edit_file"):
        prof.patch(relay.tools, name, "tools", f"tools.{name}")
    # the model (excluded from the overhead)
    prof.patch(ScriptedModel, "complete", "model")
    # details of "other" (shown in the function table, counted as other)
    for name in (
        "_transcript",
        "_record_step",
        "_account",
        "_restore_progress_if_changed",
        "_auto_handoff",
        "_check_budget",
        "_save",
        "_save_final",
        "_goal_summary",
    ):
        prof.patch(GoalLoop, name, "other")
    # the end of the last round
    original_run = GoalLoop.run

    @functools.wraps(original_run)
    def run_and_mark(self: GoalLoop) -> Any:
        try:
            return original_run(self)
        finally:
            prof.end_run()

    prof._patches.append((GoalLoop, "run", original_run))
    GoalLoop.run = run_and_mark  # type: ignore[method-assign]


def install_shell_probe(prof: Profiler) -> None:
    """Count the shell tool's selector waits while no pipe is registered any more (both at
    EOF, the process not reaped yet): such a wait sleeps its whole poll interval."""
    real = getattr(relay.tools.shell, "selectors", None)
    base = getattr(real, "DefaultSelector", None)
    if real is None or base is None:
        return

    class ProbeSelector(base):  # type: ignore[misc, valid-type]
        def select(self, timeout: float | None = None) -> Any:
            if self.get_map():
                return super().select(timeout)
            t0 = time.perf_counter()
            try:
                return super().select(timeout)
            finally:
                prof.current.idle_s += time.perf_counter() - t0
                prof.current.idle_n += 1

    proxy = types.SimpleNamespace(
        **{k: getattr(real, k) for k in dir(real) if not k.startswith("__")}
    )
    proxy.DefaultSelector = ProbeSelector
    prof._patches.append((relay.tools.shell, "selectors", real))
    relay.tools.shell.selectors = proxy  # type: ignore[assignment]


def wrapper_cost_s() -> float:
    """Seconds one timing wrapper adds to a call (measured on a no-op)."""
    prof = Profiler()
    noop = prof.wrap(lambda: None, "other", "noop")
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        noop()
    wrapped = time.perf_counter() - t0
    bare = lambda: None  # noqa: E731
    t0 = time.perf_counter()
    for _ in range(n):
        bare()
    return max(0.0, (wrapped - (time.perf_counter() - t0)) / n)


# --------------------------------------------------------------------------------------------
# Figures
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


def round_figures(b: Bucket) -> dict[str, float]:
    """Milliseconds of one round: each category, other, model, total overhead."""
    assert b.end is not None
    by_cat: dict[str, float] = defaultdict(float)
    for (cat, _), secs in b.excl.items():
        by_cat[cat] += secs
    wall = (b.end - b.start) * 1000
    model = by_cat["model"] * 1000
    total = wall - model
    figs = {c: by_cat[c] * 1000 for c in CATEGORIES}
    figs["other"] = total - sum(figs[c] for c in CATEGORIES)
    figs["total"] = total
    figs["model"] = model
    return figs


def report(prof: Profiler, warnings: list[str], cost_s: float) -> None:
    """Print the tables and the summary line."""
    rounds = [b for b in prof.rounds if b.end is not None]
    figs = [round_figures(b) for b in rounds]
    n = len(figs)
    for warning in warnings:
        print(f"WARNING: {warning}")
    if not n:
        print("no round was measured")
        return
    print()
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
    model = [f["model"] for f in figs]
    print(f"  {'(scripted model, excluded)':<26}{statistics.median(model):8.2f}")

    # functions by exclusive time
    excl: dict[tuple[str, str], float] = defaultdict(float)
    calls: dict[tuple[str, str], int] = defaultdict(int)
    for b in rounds:
        for key, secs in b.excl.items():
            excl[key] += secs
        for key, count in b.calls.items():
            calls[key] += count
    print()
    print(f"{'exclusive time by function':<48}{'ms/round':>9}{'calls/round':>12}{'ms/call':>9}")
    for key in sorted(excl, key=lambda k: -excl[k]):
        cat, label = key
        if cat == "model":
            continue
        ms_round = 1000 * excl[key] / n
        if ms_round < 0.05:
            continue
        per_call = 1000 * excl[key] / calls[key]
        print(f"  {cat + ':':<9}{label:<39}{ms_round:9.2f}{calls[key] / n:12.1f}{per_call:9.3f}")
    unwrapped = [
        f["other"] - 1000 * sum(s for (c, _), s in b.excl.items() if c == "other")
        for f, b in zip(figs, rounds, strict=True)
    ]
    print(f"  {'other:':<9}{'(not in any wrapped function)':<39}{statistics.fmean(unwrapped):9.2f}")

    git_procs = sum(c for (cat, lab), c in calls.items() if lab.startswith(GIT_PROCESS)) / n
    shells = calls[("tools", "tools.run_shell")] / n
    wrapped_calls = sum(calls.values()) / n
    print()
    print(f"processes per round: {git_procs:.1f} git, {shells:.1f} shell (bash)")
    print(
        f"instrumentation: {wrapped_calls:.0f} wrapped calls per round x {cost_s * 1e6:.1f} us "
        f"= {wrapped_calls * cost_s * 1000:.2f} ms per round (included in the figures above)"
    )
    idle = [1000 * b.idle_s for b in rounds]
    if any(idle):
        print(
            f"shell idle waits (pipes at EOF, process not reaped yet, selector sleeps with no "
            f"fd): {sum(b.idle_n for b in rounds) / n:.1f} per round, "
            f"{statistics.fmean(idle):.1f} ms per round (part of tools.run_shell)"
        )
    setup_ms = ((prof.setup.end or prof.setup.start) - prof.setup.start) * 1000
    print(f"start-up before round 1 (not counted): {setup_ms:.0f} ms")

    med = {k: statistics.median(f[k] for f in figs) for k in (*CATEGORIES, "other", "total")}
    p90 = percentile([f["total"] for f in figs], 90)
    met = "met" if med["total"] <= TARGET_MS else "NOT met"
    print()
    print(f"rounds measured: {n}; total overhead p90: {p90:.1f} ms")
    print(
        f"median overhead per round: {med['total']:.1f} ms (git {med['git']:.1f}, "
        f"store {med['store']:.1f}, context {med['context']:.1f}, tools {med['tools']:.1f}, "
        f"other {med['other']:.1f}) — target ≤ {TARGET_MS:.0f} ms: {met}"
    )
    print("(each part is its own median over the rounds, so the parts need not add up exactly)")
    if any(idle):
        without = statistics.median(f["total"] - i for f, i in zip(figs, idle, strict=True))
        print(f"without the shell's idle waits the median would be {without:.1f} ms")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


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
        bad = [r["n"] for r in store.rounds(goal_id) if r["real_tool_calls"] != calls]
        if bad:
            warnings.append(f"rounds without exactly {calls} real tool calls: {bad[:10]}")
        errors = [
            (s["round"], a["name"], a["result"][:120])
            for s in store.steps(goal_id)
            for a in s["actions"]
            if a["is_error"]
        ]
        if errors:
            warnings.append(f"{len(errors)} tool calls failed, e.g. {errors[0]}")
    finally:
        store.close()
    return warnings


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
    plain = timings["plain spawn (bash -c true)"]
    print()
    print(f"cost of one shell call ({calls} calls each, median):")
    for label, ms in timings.items():
        print(f"  {label:<36}{ms:8.2f} ms   {ms / plain:5.1f}x plain")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5000, help="commits in the repository")
    parser.add_argument("--rounds", type=int, default=50, help="rounds to run")
    parser.add_argument("--calls", type=int, default=10, help="real tool calls per round")
    parser.add_argument(
        "--calls-per-step", type=int, default=2, help="tool calls per model response"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--shell-calls", type=int, default=50, help="shell calls per mode for the sandbox cost"
    )
    args = parser.parse_args(argv)
    if args.commits < 1 or args.rounds < 1 or args.calls < 0 or args.calls_per_step < 1:
        parser.error("--commits, --rounds and --calls-per-step must be positive, --calls >= 0")

    tmp = Path(tempfile.mkdtemp(prefix="relay-bench-"))
    repo = tmp / "repo"
    try:
        build_s = build_repo(repo, args.commits)
        script, steps = build_script(args.rounds, args.calls, args.calls_per_step)
        script_path = tmp / "script.yaml"
        script_path.write_text(yaml.safe_dump(script, sort_keys=False), encoding="utf-8")
        git_version = _git(repo, "--version").strip().removeprefix("git version ")
        print("goal-relay orchestrator overhead per round (scripted model, no model latency)")
        print(
            f"repository: {args.commits} commits (built in {build_s:.1f} s with git fast-import)"
            f"; {args.rounds} rounds; {args.calls} real tool calls per round in {steps} steps "
            f"(+ handoff)"
        )
        print(
            f"git {git_version}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"folder {tmp}{' (kept)' if args.keep else ''}"
        )

        cost_s = wrapper_cost_s()
        prof = Profiler()
        install(prof)
        install_shell_probe(prof)
        try:
            outcome = run(
                RunRequest(
                    repo=repo,
                    goal=(
                        "Keep the round notes in work/ and the counter in src/counter.py up to "
                        "date, one round at a time."
                    ),
                    overrides={
                        "model": f"scripted:{script_path}",
                        "limits": {
                            "max_rounds_total": args.rounds,
                            "max_rounds_without_progress": args.rounds + 1,
                            "max_steps_per_round": steps + 1,
                        },
                        # the guard runs (its cost is measured) but scores nothing, so the
                        # repetitive benchmark rounds are never terminated
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
        finally:
            prof.restore()
        report(prof, check_run(repo, outcome.goal_id, args.rounds, args.calls), cost_s)
        shell_call_cost(repo, args.shell_calls)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
