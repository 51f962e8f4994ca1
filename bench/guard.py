"""Guard benchmark: the stuck suite and the productive suite (SPEC §8, issue 4).

Every case is a YAML file under ``tests/guard_suites/{stuck,productive}/``::

    description: what real agent loop the case reproduces
    goal: the goal text
    files: {path: text}          # optional; committed in the initial commit
    config: {...}                # optional relay.yaml (limits, deliverables; never `guard`)
    script: {responses: [...]}   # the scripted model (SPEC §13)
    expect:
      # stuck cases
      stopped_by: guard          # or: supervisor (a stop by the round limits, see `reason`)
      status: terminated         # the final status (limit_reached for the supervisor)
      reason: guard              # the final reason (no_progress, ...)
      rounds_max: 4              # stopped at this round at the latest
      model_calls_max: 15        # optional: stopped after this many model calls at the latest
      events: [loop]             # guard event kinds that must have been raised
      # productive cases
      status: complete           # the final status; never terminated
      rounds: 20                 # optional: the exact number of rounds
      no_events: [drift]         # optional: guard event kinds that must not be raised

Each case runs through the real command line, in-process (``relay.cli.main(["run", goal,
"--repo", repo, "--model", "scripted:<script>", "--json"])``), on a fresh git repository in a
temporary folder, with the default guard configuration. The script prints, per case, the rounds
and the model calls (the scripted model's ``complete`` calls, counted in-process) until the goal
stopped, the final status and reason, and the guard events; then the summary: the median
rounds-to-stop and the median and maximum model calls to stop of the stuck suite, and the
number of false stops (``terminated``) of the productive suite. Targets: median rounds ≤ 4,
false stops 0.

Usage: ``python bench/guard.py [--suite stuck|productive|all] [-k TEXT] [--drift
lexical|embedding|off] [--keep]``. ``--drift`` overrides ``guard.drift`` to compare the scorers
(the targets are for the default, ``lexical``). Exits 0 whether or not the targets are met, 1
when a case did not do what its ``expect`` says.

``tests/test_guard_suites.py`` imports :func:`load_cases`, :func:`run_case` and
:func:`check_case` from this file, so the test and the benchmark run the same code.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from relay.yaml_load import RelayLoader

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "tests" / "guard_suites"
SUITE_NAMES = ("stuck", "productive")
GUARD_KINDS = ("loop", "drift", "tool_failures", "api_errors", "tamper")
CASE_KEYS = {"description", "goal", "files", "config", "script", "expect"}


@dataclass(frozen=True)
class Case:
    """One scenario file of a suite."""

    suite: str
    name: str
    path: Path
    description: str
    goal: str
    files: dict[str, str]
    config: dict[str, Any] | None
    script: dict[str, Any]
    expect: dict[str, Any]


@dataclass
class Outcome:
    """What a case's run ended with (from the ``--json`` object)."""

    exit_code: int
    status: str
    reason: str | None
    rounds: int
    diagnosis: str | None
    model_calls: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None
    seconds: float = 0.0

    @property
    def guard_events(self) -> list[dict[str, Any]]:
        """The guard's risk events, oldest first."""
        return [e for e in self.events if e["kind"] in GUARD_KINDS]

    @property
    def stopped_by(self) -> str:
        """``guard`` (terminated), ``supervisor`` (limit_reached, blocked, budget_limited) or
        ``-`` (complete, needs_user_input, failed)."""
        if self.status == "terminated":
            return "guard"
        if self.status in ("limit_reached", "blocked", "budget_limited"):
            return "supervisor"
        return "-"


def load_cases(suite: str | None = None) -> list[Case]:
    """The cases of one suite (``stuck`` or ``productive``), or of both, sorted by file name.

    Raises:
        ValueError: a case file lacks a key, has an unknown one, or configures the guard (the
            suites measure the default guard configuration).
    """
    cases = []
    for name in [suite] if suite else SUITE_NAMES:
        for path in sorted((SUITES / name).glob("*.yaml")):
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=RelayLoader)
            missing = {"description", "goal", "script", "expect"} - set(data)
            unknown = set(data) - CASE_KEYS
            if missing or unknown:
                raise ValueError(f"{path}: missing {sorted(missing)}, unknown {sorted(unknown)}")
            if "guard" in (data.get("config") or {}):
                raise ValueError(f"{path}: the suites use the default guard configuration")
            cases.append(
                Case(
                    suite=name,
                    name=path.stem,
                    path=path,
                    description=" ".join(str(data["description"]).split()),
                    goal=str(data["goal"]).strip(),
                    files=dict(data.get("files") or {}),
                    config=data.get("config"),
                    script=data["script"],
                    expect=dict(data["expect"]),
                )
            )
    return cases


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)


def build_repo(case: Case, folder: Path, guard: dict[str, Any] | None = None) -> Path:
    """A git repository on ``main`` in ``folder/repo`` with the case's files and relay.yaml
    committed as ``initial`` (``guard`` adds a ``guard`` section, for scorer comparisons)."""
    repo = folder / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "Guard Bench")
    _git(repo, "config", "user.email", "guard-bench@example.invalid")
    _git(repo, "config", "commit.gpgsign", "false")
    files = dict(case.files)
    config = dict(case.config or {})
    if guard:
        config["guard"] = guard
    if config:
        files["relay.yaml"] = yaml.safe_dump(config, sort_keys=False)
    files.setdefault("README.md", f"{case.name}\n")
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "initial")
    return repo


@contextlib.contextmanager
def _counting_model_calls() -> Iterator[list[int]]:
    """Counts the calls of :meth:`ScriptedModel.complete` (each one model call, answered or
    failed) while active, in the one-element list it yields."""
    from relay.models.scripted import ScriptedModel

    count = [0]
    original = ScriptedModel.complete

    def complete(self: ScriptedModel, request: Any) -> Any:
        count[0] += 1
        return original(self, request)

    ScriptedModel.complete = complete  # type: ignore[method-assign]
    try:
        yield count
    finally:
        ScriptedModel.complete = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _isolated_env(home: Path) -> Iterator[None]:
    """No global or system git configuration, an empty HOME, this interpreter's folder first
    on PATH (``python -m pytest`` in the cases), pytest without third-party plugins; restored
    afterwards."""
    saved = dict(os.environ)
    os.environ.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
            # the cases' pytest runs need none of the dev plugins (hypothesis alone costs ~1 s)
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
    )
    # a terminal width inherited from a test harness (COLUMNS=4000) would pad pytest's output
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "COLUMNS", "LINES"):
        os.environ.pop(name, None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_case(
    case: Case, folder: Path, *, guard: dict[str, Any] | None = None
) -> tuple[Outcome, Path]:
    """Run a case through ``relay.cli.main`` in-process in ``folder`` (which must be empty or
    missing); returns the outcome and the repository."""
    from relay import cli

    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    home.mkdir()
    with _isolated_env(home):
        repo = build_repo(case, folder, guard)
        script = folder / "script.yaml"
        script.write_text(yaml.safe_dump(case.script, sort_keys=False), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        started = time.perf_counter()
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            _counting_model_calls() as model_calls,
        ):
            code = cli.main(
                ["run", case.goal, "--repo", str(repo), "--model", f"scripted:{script}", "--json"]
            )
        seconds = time.perf_counter() - started
    try:
        data = json.loads(out.getvalue())
    except ValueError:
        raise AssertionError(
            f"{case.name}: exit {code}, no JSON on stdout; stderr: {err.getvalue()[-3000:]}"
        ) from None
    outcome = Outcome(
        exit_code=code,
        status=data["status"],
        reason=data["reason"],
        rounds=data["rounds"],
        diagnosis=data["diagnosis"],
        model_calls=model_calls[0],
        events=data["events"],
        message=data["message"],
        seconds=seconds,
    )
    return outcome, repo


def check_case(case: Case, outcome: Outcome) -> list[str]:
    """What is wrong with a case's outcome against its ``expect`` (empty: as expected).

    A stuck case must be stopped (by the guard: ``terminated``; or by the supervisor where
    ``stopped_by: supervisor``) with the expected status and reason, at ``rounds_max`` at the
    latest (and after ``model_calls_max`` model calls at the latest, if given), having raised
    the listed guard ``events``. A productive case must never be
    ``terminated``, must end with its expected status (and ``rounds``, if given) and must not
    have raised a guard event of a kind listed in ``no_events``."""
    exp = case.expect
    problems = []
    if case.suite == "stuck":
        want_by = exp.get("stopped_by", "guard")
        if outcome.stopped_by != want_by:
            problems.append(f"stopped by {outcome.stopped_by}, expected {want_by}")
        want_status = exp.get("status", "terminated" if want_by == "guard" else None)
        if want_status and outcome.status != want_status:
            problems.append(f"status {outcome.status}, expected {want_status}")
        want_reason = exp.get("reason", "guard" if want_by == "guard" else None)
        if want_reason and outcome.reason != want_reason:
            problems.append(f"reason {outcome.reason}, expected {want_reason}")
        if outcome.rounds > exp["rounds_max"]:
            problems.append(
                f"stopped after {outcome.rounds} rounds, expected ≤ {exp['rounds_max']}"
            )
        if outcome.model_calls > exp.get("model_calls_max", outcome.model_calls):
            problems.append(
                f"stopped after {outcome.model_calls} model calls, "
                f"expected ≤ {exp['model_calls_max']}"
            )
        kinds = {e["kind"] for e in outcome.guard_events}
        for kind in exp.get("events", []):
            if kind not in kinds:
                problems.append(f"no {kind} event (events: {sorted(kinds) or 'none'})")
        if want_by == "guard" and not (outcome.diagnosis or "").startswith("Terminated: "):
            problems.append(f"diagnosis {outcome.diagnosis!r}")
    else:
        if outcome.status == "terminated":
            problems.append(f"FALSE STOP by the guard: {outcome.diagnosis}")
        want_status = exp.get("status", "complete")
        if outcome.status != want_status:
            problems.append(
                f"status {outcome.status} ({outcome.reason}: {outcome.message}), "
                f"expected {want_status}"
            )
        if "rounds" in exp and outcome.rounds != exp["rounds"]:
            problems.append(f"{outcome.rounds} rounds, expected {exp['rounds']}")
        for e in outcome.guard_events:
            if e["kind"] in exp.get("no_events", []):
                problems.append(f"unexpected {e['kind']} event (round {e['round']}): {e['detail']}")
    return problems


def _events_text(outcome: Outcome) -> str:
    by_round: dict[int, list[str]] = {}
    for e in outcome.guard_events:
        by_round.setdefault(e["round"] or 0, []).append(e["kind"])
    return "; ".join(f"r{n}: {', '.join(kinds)}" for n, kinds in sorted(by_round.items())) or "-"


@dataclass(frozen=True)
class StuckFigures:
    """The stuck suite's summary: how many cases were stopped (by the guard), and the rounds
    and model calls until they were (median and maximum over the stopped cases; NaN and 0
    when none was)."""

    cases: int
    stopped: int
    by_guard: int
    median_rounds: float
    median_model_calls: float
    max_model_calls: int

    @property
    def target_met(self) -> bool:
        """Every case stopped, at a median of 4 rounds at most."""
        return self.stopped == self.cases and self.median_rounds <= 4


def stuck_figures(outcomes: list[Outcome]) -> StuckFigures:
    """The summary of the stuck suite's outcomes."""
    stopped = [o for o in outcomes if o.stopped_by != "-"]
    calls = [o.model_calls for o in stopped]
    return StuckFigures(
        cases=len(outcomes),
        stopped=len(stopped),
        by_guard=sum(1 for o in stopped if o.stopped_by == "guard"),
        median_rounds=statistics.median(o.rounds for o in stopped) if stopped else float("nan"),
        median_model_calls=statistics.median(calls) if calls else float("nan"),
        max_model_calls=max(calls, default=0),
    )


def summary_lines(results: list[tuple[Case, Outcome, list[str]]]) -> list[str]:
    """The summary printed after the cases: stuck-suite figures, false stops, cases not as
    expected."""
    lines = []
    stuck = [o for c, o, _ in results if c.suite == "stuck"]
    if stuck:
        f = stuck_figures(stuck)
        lines.append(
            f"  stuck: {f.stopped}/{f.cases} stopped ({f.by_guard} by the guard, "
            f"{f.stopped - f.by_guard} by the supervisor); median rounds-to-stop "
            f"{f.median_rounds:g} (target ≤ 4: {'met' if f.target_met else 'NOT met'}); "
            f"model calls to stop: median {f.median_model_calls:g}, max {f.max_model_calls}"
        )
    productive = [o for c, o, _ in results if c.suite == "productive"]
    if productive:
        false_stops = sum(1 for o in productive if o.status == "terminated")
        lines.append(
            f"  productive: {false_stops} false stops of {len(productive)} "
            f"(target 0: {'met' if false_stops == 0 else 'NOT met'})"
        )
    failed = [c.name for c, _, p in results if p]
    if failed:
        lines.append(f"  cases not as expected: {', '.join(failed)}")
    return lines


def _print_case(case: Case, outcome: Outcome, problems: list[str], verbose: bool) -> None:
    status = f"{outcome.status} ({outcome.reason})"
    print(
        f"  {case.name:<34} {outcome.rounds:>6} {outcome.model_calls:>5}  "
        f"{outcome.stopped_by:<10} {status:<32} {_events_text(outcome)}   "
        f"[{outcome.seconds:.1f} s]"
    )
    if verbose:
        for e in outcome.guard_events:
            print(f"      round {e['round']} {e['kind']}: {e['detail']}")
        if outcome.diagnosis:
            print(f"      diagnosis: {outcome.diagnosis}")
    for problem in problems:
        print(f"      !! {problem}")


def run_suites(
    cases: list[Case], base: Path, *, guard: dict[str, Any] | None, verbose: bool
) -> list[tuple[Case, Outcome, list[str]]]:
    """Run ``cases`` suite by suite in folders under ``base``, printing a line per case;
    returns each case with its outcome and its problems (:func:`check_case`)."""
    results = []
    for suite in SUITE_NAMES:
        chosen = [c for c in cases if c.suite == suite]
        if not chosen:
            continue
        print(f"\n{suite} suite ({len(chosen)} cases)")
        print(
            f"  {'case':<34} {'rounds':>6} {'calls':>5}  {'stopped by':<10} "
            f"{'status (reason)':<32} events"
        )
        for case in chosen:
            outcome, _ = run_case(case, base / suite / case.name, guard=guard)
            problems = check_case(case, outcome)
            results.append((case, outcome, problems))
            _print_case(case, outcome, problems, verbose)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=[*SUITE_NAMES, "all"], default="all")
    parser.add_argument("-k", dest="pattern", default="", help="only cases whose name has TEXT")
    parser.add_argument(
        "--drift",
        choices=["lexical", "embedding", "off"],
        default=None,
        help="override guard.drift (default: the default configuration)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument("-v", "--verbose", action="store_true", help="print event details")
    args = parser.parse_args(argv)
    guard = {"drift": args.drift} if args.drift else None
    cases = [
        c for c in load_cases(None if args.suite == "all" else args.suite) if args.pattern in c.name
    ]
    base = Path(tempfile.mkdtemp(prefix="relay-guard-bench-"))
    try:
        results = run_suites(cases, base, guard=guard, verbose=args.verbose)
    finally:
        if args.keep:
            print(f"\nkept: {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print("\nsummary" + (f" (guard.drift = {args.drift})" if args.drift else " (default guard)"))
    for line in summary_lines(results):
        print(line)
    return 1 if any(problems for _, _, problems in results) else 0


if __name__ == "__main__":
    sys.exit(main())
