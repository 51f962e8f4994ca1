"""``relay compare``: the same goal in relay mode and in session mode, side by side (SPEC §3).

Both modes start from the same base commit, each in a git worktree of its own on a branch of
its own (``relay/compare-<id>-relay``, ``relay/compare-<id>-session``; with ``--repeat N`` a
``-<k>`` suffix per repetition), with the same model, configuration and limits. Each run is an
ordinary goal run (:func:`relay.runner.run` with ``mode`` overridden) in its worktree, so it has
its own state directory, store, transcript and run lock; a scripted model's script is read
afresh by every run. Runs go one after another, or at the same time in processes of their own
with ``parallel``.

Every figure of the comparison is read back from the runs' stores afterwards (never from
what the runs printed), and written as ``compare.json`` and ``compare.md`` into the output
folder (default ``compare/<id>/`` in the state folder of the main worktree, beside the
worktrees: ``.git/relay/compare/<id>/``, see :mod:`relay.statedir`).
"""

from __future__ import annotations

import json
import multiprocessing
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from relay import runner
from relay.config import flag_overrides, load_config
from relay.errors import ConfigError, RelayError
from relay.gitrepo import GitRepo
from relay.loop import Display
from relay.statedir import exclude_state_dir, ready_state_dir, state_dir, store_path
from relay.store import Store, new_id
from relay.terminal import printable

MODES: tuple[str, ...] = ("relay", "session")
"""The memory strategies compared, in column order."""

COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"
COMPARE_HTML = "report.html"

INTERRUPTED_EXIT_CODES = frozenset({130, 143})
"""Exit codes of a run paused by Ctrl+C or SIGTERM: the comparison starts no further run."""


@dataclass
class CompareRequest:
    """What ``relay compare`` was asked for.

    Attributes:
        repo: a folder inside the repository to compare in (its HEAD is the base commit).
        goal: the goal text, or None with ``goal_file``.
        goal_file: a Markdown goal file (front matter allowed), or None.
        config_path: ``--config``; default ``relay.yaml`` of each worktree.
        overrides: configuration from flags as nested dicts (model, limits, …); ``mode`` is set
            per run and must not be given.
        repeat: runs per mode (≥ 1).
        parallel: run all runs at the same time, each in a process of its own.
        out_dir: where ``compare.json``/``compare.md`` go; default beside the worktrees.
    """

    repo: Path
    goal: str | None = None
    goal_file: Path | None = None
    config_path: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    repeat: int = 1
    parallel: bool = False
    out_dir: Path | None = None


@dataclass
class RunRow:
    """One run of a comparison, with every figure read from its store.

    Token counts are tokens; ``cost_usd`` is USD; ``elapsed_s`` is the goal's active wall time
    in seconds as the store has it; ``lines_added``/``lines_removed``/``files_changed`` come
    from ``git diff --shortstat base..branch`` without relay's own committed files.
    ``audit`` is ``passed``, ``failed`` or ``none`` (never audited).
    """

    mode: str
    repetition: int
    label: str
    branch: str
    worktree: str
    store_path: str
    goal_id: str | None = None
    run_id: str | None = None
    exit_code: int | None = None
    error: str | None = None
    status: str = "error"
    reason: str | None = None
    message: str | None = None
    rounds: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    uncached_input: int = 0
    cache_write: int = 0
    cached_input: int = 0
    output: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    audit: str = "none"
    lines_added: int = 0
    lines_removed: int = 0
    files_changed: int = 0
    final_response: str = ""


@dataclass
class CompareResult:
    """A finished comparison (what ``compare.json`` holds).

    ``created_at`` is a UNIX time in seconds; ``runs`` are ordered by mode, then repetition.
    """

    compare_id: str
    repo: str
    base_commit: str
    goal: str
    model: str
    limits: dict[str, Any]
    out_dir: str
    created_at: float
    parallel: bool
    repeat: int
    runs: list[RunRow]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the comparison (``runs`` as objects, plus ``summary``: the mean
        of every numeric figure per mode)."""
        data = asdict(self)
        data["summary"] = {mode: mode_means(self.runs, mode) for mode in MODES}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompareResult:
        """Rebuild a result from :meth:`to_dict` output (``summary`` is recomputed)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["runs"] = [
            RunRow(**{k: v for k, v in r.items() if k in RunRow.__dataclass_fields__})
            for r in data["runs"]
        ]
        return cls(**fields)


NUMERIC_FIELDS: tuple[str, ...] = (
    "rounds",
    "model_calls",
    "tool_calls",
    "uncached_input",
    "cached_input",
    "cache_write",
    "output",
    "cost_usd",
    "elapsed_s",
    "lines_added",
    "lines_removed",
)


def mode_means(runs: Sequence[RunRow], mode: str) -> dict[str, float]:
    """Mean of every numeric figure over the runs of ``mode`` (empty without runs), plus
    ``runs`` and ``complete`` (how many ended complete)."""
    rows = [r for r in runs if r.mode == mode]
    if not rows:
        return {}
    out: dict[str, float] = {
        k: statistics.fmean(getattr(r, k) for r in rows) for k in NUMERIC_FIELDS
    }
    out["runs"] = len(rows)
    out["complete"] = sum(1 for r in rows if r.status == "complete")
    return out


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

TABLE_ROWS: tuple[tuple[str, str], ...] = (
    ("status", "status"),
    ("rounds", "rounds"),
    ("model calls", "model_calls"),
    ("tool calls", "tool_calls"),
    ("uncached input tokens", "uncached_input"),
    ("cache reads (tokens)", "cached_input"),
    ("cache writes (tokens)", "cache_write"),
    ("output tokens", "output"),
    ("cost (USD)", "cost_usd"),
    ("wall time (s)", "elapsed_s"),
    ("audit", "audit"),
    ("lines changed (+/-)", "lines"),
)
"""``(label, field)`` of each table row, in order."""


def format_cell(row: RunRow, key: str) -> str:
    """One table cell of ``row``: integers plain, cost with 4 decimals, seconds with 1."""
    if key == "status":
        return row.status + (f" ({row.reason})" if row.reason and row.reason != row.status else "")
    if key == "lines":
        return f"+{row.lines_added} -{row.lines_removed}"
    if key == "cost_usd":
        return f"{row.cost_usd:.4f}"
    if key == "elapsed_s":
        return f"{row.elapsed_s:.1f}"
    if key == "audit":
        return row.audit
    return str(getattr(row, key))


def _format_mean(means: dict[str, float], key: str) -> str:
    if not means:
        return "-"
    if key == "status":
        return f"{int(means['complete'])} of {int(means['runs'])} complete"
    if key == "lines":
        return f"+{means['lines_added']:.1f} -{means['lines_removed']:.1f}"
    if key == "cost_usd":
        return f"{means['cost_usd']:.4f}"
    if key == "audit":
        return "-"
    return f"{means[key]:.1f}"


def table(result: CompareResult) -> tuple[list[str], list[list[str]]]:
    """The side-by-side table: ``(header, rows)``. One column per run (``relay``/``session``,
    or ``relay #k`` with repetitions), then with repetitions a mean column per mode."""
    header = ["", *(r.label for r in result.runs)]
    means = {m: mode_means(result.runs, m) for m in MODES}
    if result.repeat > 1:
        header += [f"{m} (mean)" for m in MODES]
    rows = []
    for label, key in TABLE_ROWS:
        cells = [label, *(format_cell(r, key) for r in result.runs)]
        if result.repeat > 1:
            cells += [_format_mean(means[m], key) for m in MODES]
        rows.append(cells)
    return header, rows


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""
    lines = [
        "| " + " | ".join(_md_cell(h) or " " for h in header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def compare_markdown(result: CompareResult) -> str:
    """``compare.md``: what was compared, the table, and each run's branch, worktree and final
    word (its stop message and last response)."""
    header, rows = table(result)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(result.created_at))
    limits = ", ".join(f"{k} {v}" for k, v in result.limits.items() if v is not None)
    parts = [
        f"# relay compare {result.compare_id}",
        "",
        f"- goal: {_md_cell(result.goal)[:500]}",
        f"- model: `{result.model}`",
        f"- base commit: `{result.base_commit[:12]}` in `{result.repo}`",
        f"- limits: {limits}",
        f"- runs: {result.repeat} per mode, {'in parallel' if result.parallel else 'one after another'}; {stamp}",
        "",
        markdown_table(header, rows),
        "",
        "Tokens as reported by the provider (or estimated at characters / 4 where it reports "
        "none); wall time is the goal's active time; lines changed exclude relay's own files.",
        "",
        "## Runs",
        "",
    ]
    for r in result.runs:
        parts.append(f"### {r.label}")
        parts.append("")
        parts.append(f"- branch `{r.branch}`, worktree `{r.worktree}`")
        parts.append(f"- goal `{r.goal_id}`, run `{r.run_id}`, exit code {r.exit_code}")
        if r.error:
            parts.append(f"- error: {_md_cell(r.error)}")
        if r.message:
            parts.append(f"- stop message: {_md_cell(r.message)[:600]}")
        if r.final_response:
            parts.append(f"- final response: {_md_cell(r.final_response)[:600]}")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def compare_overrides(
    *,
    model: str | None = None,
    base_url: str | None = None,
    max_rounds: int | None = None,
    max_no_progress: int | None = None,
    token_budget: int | None = None,
    time_budget: str | None = None,
    unattended: bool = False,
) -> dict[str, Any]:
    """Configuration overrides from ``relay compare`` flags (only the flags given).

    Args:
        model: ``PROVIDER:MODEL``; a relative ``scripted:`` path is made absolute against
            the current folder.
        time_budget: seconds, or a duration such as ``90m``.

    Raises:
        ConfigError: a time budget that is not a duration.
    """
    if model is not None:
        model = runner.resolve_model_spec(model, Path.cwd())
    return flag_overrides(
        model=model,
        base_url=base_url,
        max_rounds=max_rounds,
        max_no_progress=max_no_progress,
        token_budget=token_budget,
        time_budget=time_budget,
        unattended=unattended,
    )


@dataclass(frozen=True)
class _RunSpec:
    """One run to make: picklable, for a worker process."""

    mode: str
    repetition: int
    label: str
    branch: str
    worktree: Path
    request: runner.RunRequest
    show_progress: bool


@dataclass(frozen=True)
class _RunDone:
    goal_id: str | None
    run_id: str | None
    exit_code: int | None
    store_path: str | None
    error: str | None


class _LineDisplay(Display):
    """One line per round on stderr, prefixed with the run's label."""

    def __init__(self, label: str) -> None:
        self.label = label

    def round_ended(self, round_n: int, reason: str, commit: str | None) -> None:
        sha = f", commit {commit[:7]}" if commit else ""
        line = printable(f"[{self.label}] round {round_n} ended: {reason}{sha}")
        print(line, file=sys.stderr, flush=True)

    def event(self, kind: str, detail: str) -> None:
        if kind == "goal_ended":
            print(printable(f"[{self.label}] {detail}"), file=sys.stderr, flush=True)


def _run_one(spec: _RunSpec) -> _RunDone:
    """Run one mode's goal in its worktree (in this process); errors become a result."""
    display = _LineDisplay(spec.label) if spec.show_progress else None
    try:
        outcome = runner.run(spec.request, display)
    except RelayError as exc:
        return _RunDone(None, None, exc.exit_code, None, f"{type(exc).__name__}: {exc}")
    except SystemExit as exc:  # a second Ctrl+C: the goal stays resumable in its worktree
        return _RunDone(None, None, int(exc.code or 130), None, "interrupted")
    return _RunDone(
        outcome.goal_id,
        outcome.run_dir.name,
        outcome.exit_code,
        str(outcome.store_path),
        None,
    )


_SHORTSTAT = re.compile(
    r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?"
)


def diff_shortstat(
    root: Path, base: str, branch: str, exclude: Sequence[str]
) -> tuple[int, int, int]:
    """``(files changed, lines added, lines removed)`` between ``base`` and ``branch``
    (``git diff --shortstat base..branch``), leaving out the ``exclude`` paths."""
    git = GitRepo(root)
    try:
        out = git.shortstat(base, branch, exclude)
    finally:
        git.close()
    m = _SHORTSTAT.search(out)
    if not m:
        return 0, 0, 0
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def _mapped(root: Path, worktree: Path, path: Path | None) -> Path | None:
    """``path`` inside the main tree → the same path inside ``worktree``; else unchanged."""
    rel = runner.rel_inside(root, path)
    if path is None or rel is None:
        return path.resolve() if path is not None else None
    return worktree / rel


def read_row(
    row: RunRow, done: _RunDone, git_root: Path, base: str, exclude: Sequence[str]
) -> RunRow:
    """Fill ``row`` with the figures of its finished run, read from the run's store and git.

    Args:
        row: the run's row (mode, label, branch, worktree already set).
        done: how the run ended (goal id, store path, exit code or error).
        git_root: the main working tree (branches are shared by all worktrees).
        base: the base commit.
        exclude: repository paths left out of the line counts (relay's committed files).
    """
    row.exit_code, row.error, row.run_id = done.exit_code, done.error, done.run_id
    if done.goal_id is None or done.store_path is None:
        return row
    row.goal_id, row.store_path = done.goal_id, done.store_path
    store = Store(Path(done.store_path))
    try:
        data = runner.goal_json(store, done.goal_id)
        goal = store.goal(done.goal_id)
        rounds = store.rounds(done.goal_id)
        steps = store.steps(done.goal_id)
    finally:
        store.close()
    row.status, row.reason, row.message = data["status"], data["reason"], data["message"]
    row.rounds = data["rounds"]
    row.model_calls = goal.model_calls
    row.tool_calls = sum(r["tool_calls"] for r in rounds)
    tokens = data["tokens"]
    row.uncached_input, row.cache_write = tokens["uncached_input"], tokens["cache_write"]
    row.cached_input, row.output = tokens["cached_input"], tokens["output"]
    row.cost_usd, row.elapsed_s = data["cost_usd"], data["elapsed_s"]
    audit = data["audit"]
    row.audit = "none" if not audit else ("passed" if audit["passed"] else "failed")
    row.final_response = next((s["text"] for s in reversed(steps) if (s["text"] or "").strip()), "")
    row.files_changed, row.lines_added, row.lines_removed = diff_shortstat(
        git_root, base, row.branch, exclude
    )
    return row


def run_compare(
    request: CompareRequest,
    *,
    show_progress: bool = True,
    on_run_done: Callable[[RunRow], None] | None = None,
) -> CompareResult:
    """Run the comparison and write ``compare.json`` and ``compare.md``.

    Checks the configuration and the repository (clean tree, a commit) before creating
    anything; then adds one worktree and branch per run from HEAD, runs the goal in each mode
    (``request.repeat`` times), reads every figure back from the stores and writes the outputs.

    Args:
        request: what to compare.
        show_progress: print a line per round of each run to stderr.
        on_run_done: called with each finished run's row, in the order of the runs.

    Returns:
        The result; its ``out_dir`` holds ``compare.json`` and ``compare.md``.

    Raises:
        ConfigError, RepoStateError: before anything was created (exit code 1).
    """
    if request.repeat < 1:
        raise ConfigError(f"--repeat {request.repeat}: give a positive number of runs per mode")
    if "mode" in request.overrides:
        raise ConfigError("relay compare runs both modes; do not give --mode")
    if request.goal and request.goal_file is not None:
        raise ConfigError("give the goal either as text or with --goal-file, not both")
    if not (request.goal and request.goal.strip()) and request.goal_file is None:
        raise ConfigError('relay compare needs a goal: relay compare "GOAL" or --goal-file FILE')
    git = GitRepo(request.repo)
    root = git.root
    goal_text = request.goal
    front: dict[str, Any] = {}
    if request.goal_file is not None:
        goal_text, front = runner.parse_goal_file(request.goal_file)
    config = load_config(root, request.config_path, front, request.overrides)
    if config.model is None:
        raise ConfigError(
            "no model is configured: pass --model PROVIDER:MODEL (or scripted:FILE.yaml to run "
            "offline) or set model in relay.yaml"
        )
    git.preflight(allow_dirty=False)
    base = git.head_sha()
    compare_id = new_id()[:8]
    state = ready_state_dir(git, config)
    exclude_state_dir(git, state)
    folder = state / "compare" / compare_id
    out_dir = (request.out_dir or folder).resolve()
    progress_rel = Path(config.progress.path).as_posix()
    exclude = [progress_rel, (Path(progress_rel).parent / "goal.json").as_posix()]

    specs: list[_RunSpec] = []
    rows: list[RunRow] = []
    for mode in MODES:
        for k in range(1, request.repeat + 1):
            suffix = f"-{k}" if request.repeat > 1 else ""
            label = f"{mode} #{k}" if request.repeat > 1 else mode
            branch = f"relay/compare-{compare_id}-{mode}{suffix}"
            worktree = folder / f"{mode}{suffix}"
            overrides = {**request.overrides, "mode": mode}
            run_request = runner.RunRequest(
                repo=worktree,
                goal=request.goal,
                goal_file=_mapped(root, worktree, request.goal_file),
                config_path=_mapped(root, worktree, request.config_path),
                overrides=overrides,
                in_place=True,
            )
            specs.append(_RunSpec(mode, k, label, branch, worktree, run_request, show_progress))
            rows.append(RunRow(mode, k, label, branch, str(worktree), ""))
    folder.mkdir(parents=True, exist_ok=True)

    def add_worktree(i: int) -> None:
        spec = specs[i]
        git.add_worktree(spec.worktree, base, branch=spec.branch)
        tree = GitRepo(spec.worktree)
        try:  # a linked worktree keeps its own store (in its own git directory)
            rows[i].store_path = str(store_path(state_dir(tree, config)))
        finally:
            tree.close()

    def finished(i: int, done: _RunDone) -> None:
        read_row(rows[i], done, root, base, exclude)
        if on_run_done is not None:
            on_run_done(rows[i])

    if request.parallel and len(specs) > 1:
        for i in range(len(specs)):
            add_worktree(i)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=len(specs), mp_context=context) as pool:
            futures = [pool.submit(_run_one, spec) for spec in specs]
            for i, future in enumerate(futures):
                while True:
                    try:
                        done = future.result()
                    except KeyboardInterrupt:  # the workers got it too: they pause; wait
                        continue
                    except Exception as exc:  # a worker that died (killed, out of memory)
                        done = _RunDone(None, None, None, None, f"worker failed: {exc}")
                    break
                finished(i, done)
    else:
        interrupted = False
        for i, spec in enumerate(specs):
            if interrupted:
                rows[i].error = "not run: the comparison was interrupted"
                continue
            add_worktree(i)
            done = _run_one(spec)
            finished(i, done)
            interrupted = done.exit_code in INTERRUPTED_EXIT_CODES

    result = CompareResult(
        compare_id=compare_id,
        repo=str(root),
        base_commit=base,
        goal=(goal_text or "").strip(),
        model=config.model,
        limits={
            k: v
            for k, v in config.limits.model_dump().items()
            if k
            in (
                "max_rounds_total",
                "max_rounds_without_progress",
                "max_steps_per_round",
                "token_budget",
                "time_budget",
                "cost_budget",
            )
        },
        out_dir=str(out_dir),
        created_at=time.time(),
        parallel=request.parallel,
        repeat=request.repeat,
        runs=rows,
    )
    write_outputs(result)
    return result


def write_outputs(result: CompareResult) -> dict[str, Path]:
    """Write ``compare.json`` and ``compare.md`` into ``result.out_dir``; returns their paths
    by kind (``json``, ``markdown``)."""
    out = Path(result.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / COMPARE_JSON, "markdown": out / COMPARE_MD}
    paths["json"].write_text(
        json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    paths["markdown"].write_text(compare_markdown(result), encoding="utf-8")
    return paths


def load_compare(folder: Path) -> CompareResult:
    """Read a comparison back from its output folder (``compare.json``).

    Raises:
        ConfigError: the folder holds no readable ``compare.json``.
    """
    path = folder / COMPARE_JSON if folder.is_dir() else folder
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return CompareResult.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a relay compare result ({exc})") from None
