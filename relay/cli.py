"""The ``relay`` command line (SPEC §12).

Errors become a message on stderr and an exit code here, at the boundary, never a traceback:
1 for usage, configuration and repository errors, and the status codes of
:data:`relay.goal.EXIT_CODES` for finished runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from relay import runner
from relay.cli_options import (
    BaseUrlOpt,
    ConfigOpt,
    JsonOpt,
    MaxNoProgressOpt,
    MaxRoundsOpt,
    RepoOpt,
    SandboxOpt,
    TimeBudgetOpt,
    TokenBudgetOpt,
)
from relay.config import flag_overrides, load_config
from relay.controls import refuse_from_goal_shell
from relay.data import data_dir
from relay.errors import ConfigError, GoalStateError, RelayError
from relay.gitrepo import GitRepo
from relay.goal import GoalStatus, exit_code_for
from relay.interrupts import PAUSE_SIGNAL
from relay.statedir import inbox_dir, ready_state_dir
from relay.store import GoalRecord, Store
from relay.summary import NEXT_STEPS, junit_xml, run_summary_markdown
from relay.terminal import SafeConsole, printable

app = typer.Typer(
    help="Keep an LLM coding agent working on a goal in a git repository until it is verifiably done.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)

PushOpt = typer.Option("--push", help="Push the branch after each round (never forced).")
JunitOpt = typer.Option("--junit", help="Write the audit checks as JUnit XML to this file.")


def _overrides(**flags: Any) -> dict[str, Any]:
    """Configuration overrides from the flags given (see :func:`relay.config.flag_overrides`)."""
    return flag_overrides(**{k: v for k, v in flags.items() if v is not None})


def _finish(outcome: runner.RunOutcome, as_json: bool, junit: Path | None = None) -> None:
    """Outputs of a finished run: the morning summary in the run folder (and in
    ``$GITHUB_STEP_SUMMARY`` when set), JUnit XML of the audit, then JSON or the summary."""
    store = Store(outcome.store_path)
    git = GitRepo(outcome.repo_root)
    try:
        data = runner.goal_json(store, outcome.goal_id, git)
    finally:
        git.close()
    data["run_dir"] = str(outcome.run_dir)
    summary = run_summary_markdown(data, store)
    (outcome.run_dir / "summary.md").write_text(summary, encoding="utf-8")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with contextlib.suppress(OSError), open(step_summary, "a", encoding="utf-8") as fh:
            fh.write(summary + "\n")
    if junit is not None:
        try:
            junit.parent.mkdir(parents=True, exist_ok=True)
            junit.write_text(junit_xml(data), encoding="utf-8")
        except OSError as exc:
            err.print(f"warning: cannot write --junit {junit}: {exc.strerror}", markup=False)
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        _print_summary(data)
    raise typer.Exit(outcome.exit_code)


def _print_summary(data: dict[str, Any]) -> None:
    status = data["status"]
    colour = "green" if status == "complete" else "yellow"
    reason = f" ({data['reason']})" if data["reason"] and data["reason"] != status else ""
    rounds = f"{data['rounds']} round{'s' if data['rounds'] != 1 else ''}"
    err.print(f"\n[bold {colour}]{status}[/]{reason} after {rounds}")
    if data.get("message"):
        err.print(data["message"], markup=False)
    next_step = NEXT_STEPS.get(status) if status != "complete" else None
    if next_step:
        err.print(next_step, markup=False)
    audit = data.get("audit")
    if audit:
        err.print(f"audit: {'passed' if audit['passed'] else 'failed'}")
        for c in audit["checks"]:
            mark = "✓" if c["passed"] else "✗"
            lines = [ln.strip() for ln in c["evidence"].splitlines() if ln.strip()]
            lines = [ln for ln in lines if not ln.startswith("---")]
            shown = " · ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else ""
            err.print(f"  {mark} {c['kind']} {c['target']}: {shown}", markup=False)
    tokens = data["tokens"]
    err.print(
        f"tokens: {tokens['uncached_input']} uncached input, {tokens['cached_input']} cached, "
        f"{tokens['output']} output · branch {data['branch']} · run folder {data['run_dir']}",
        markup=False,
    )


def _version(value: bool) -> None:
    if value:
        from relay import __version__

        print(f"goal-relay {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Keep an LLM coding agent working on a goal in a git repository until it is verifiably
    done. Start with `relay demo`, then `relay run "GOAL" --model PROVIDER:MODEL`."""


@app.command()
def run(
    goal: Annotated[str | None, typer.Argument(help="The goal, in words.")] = None,
    goal_file: Annotated[
        Path | None,
        typer.Option(
            "--goal-file", help="A Markdown goal file, optionally with YAML front matter."
        ),
    ] = None,
    repo: RepoOpt = Path("."),
    mode: Annotated[
        str | None, typer.Option("--mode", help="relay (fresh context per round) or session.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="PROVIDER:MODEL, e.g. anthropic:…, openai:…, scripted:FILE."),
    ] = None,
    base_url: BaseUrlOpt = None,
    config: ConfigOpt = None,
    branch: Annotated[
        str | None, typer.Option("--branch", help="Work on this branch (created if missing).")
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Work on the current branch.")
    ] = False,
    allow_dirty: Annotated[
        bool, typer.Option("--allow-dirty", help="Start even with uncommitted changes.")
    ] = False,
    max_rounds: MaxRoundsOpt = None,
    max_no_progress: MaxNoProgressOpt = None,
    token_budget: TokenBudgetOpt = None,
    time_budget: TimeBudgetOpt = None,
    sandbox: SandboxOpt = None,
    force_tool_choice: Annotated[
        bool, typer.Option("--force-tool-choice", help="Force a tool call on every step.")
    ] = False,
    unattended: Annotated[
        bool,
        typer.Option("--unattended", help="Answer needs_user_input automatically (limited)."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Record each raw provider request/response (keys redacted)."),
    ] = False,
    push: Annotated[bool, PushOpt] = False,
    junit: Annotated[Path | None, JunitOpt] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a goal until it is verifiably done or stops; without GOAL, resume the open goal
    (or the goal that the branch carries, on a fresh machine)."""
    if branch and in_place:
        raise ConfigError("--branch and --in-place exclude each other; give one")
    if goal is not None and not goal.strip():
        raise ConfigError("the goal is empty; say what should be done")
    request = runner.RunRequest(
        repo=repo,
        goal=goal,
        goal_file=goal_file,
        config_path=config,
        overrides=_overrides(
            push=push,
            mode=mode,
            model=model,
            base_url=base_url,
            max_rounds=max_rounds,
            max_no_progress=max_no_progress,
            token_budget=token_budget,
            time_budget=time_budget,
            force_tool_choice=force_tool_choice,
            unattended=unattended,
            sandbox=sandbox,
        ),
        branch=branch,
        in_place=in_place,
        allow_dirty=allow_dirty,
        debug=debug,
    )
    _execute(request, as_json, junit)


def _execute(request: runner.RunRequest, as_json: bool, junit: Path | None = None) -> None:
    from relay.display import RichDisplay

    display = None if as_json else RichDisplay()
    try:
        outcome = runner.run(request, display)
    finally:
        if display is not None:
            display.close()
    _finish(outcome, as_json, junit)


@app.command()
def resume(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    model: Annotated[str | None, typer.Option("--model", help="PROVIDER:MODEL.")] = None,
    base_url: BaseUrlOpt = None,
    unattended: Annotated[bool, typer.Option("--unattended")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Record raw provider exchanges.")] = False,
    push: Annotated[bool, PushOpt] = False,
    junit: Annotated[Path | None, JunitOpt] = None,
    max_rounds: MaxRoundsOpt = None,
    token_budget: TokenBudgetOpt = None,
    time_budget: TimeBudgetOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Continue the open goal (paused or stopped); the round counts restart. Budgets are for
    the whole goal: raise them to continue a budget-limited goal."""
    request = runner.RunRequest(
        repo=repo,
        config_path=config,
        overrides=_overrides(
            push=push,
            mode=None,
            model=model,
            base_url=base_url,
            max_rounds=max_rounds,
            max_no_progress=None,
            token_budget=token_budget,
            time_budget=time_budget,
            force_tool_choice=None,
            unattended=unattended,
            sandbox=sandbox,
        ),
        resume=True,
        debug=debug,
    )
    _execute(request, as_json, junit)


@app.command()
def status(repo: RepoOpt = Path("."), config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Show the current goal (the open one, else the latest)."""
    git = GitRepo(repo)
    cfg = load_config(git.root, config)
    state_dir = ready_state_dir(git, cfg, _note)
    inbox = str(inbox_dir(state_dir))
    store = runner.open_store(git, cfg, create=False)
    if store is not None and runner.lock_holder(state_dir) is None:
        runner.check_store_against_branch(git, store, cfg)  # no live run: the branch decides
    goal = (store.latest_goal(open_only=True) or store.latest_goal()) if store else None
    if store is None or goal is None:
        if as_json:
            print(json.dumps({"goal_id": None, "status": None, "inbox": inbox}))
        else:
            err.print('no goal here yet: start one with relay run "GOAL"')
        raise typer.Exit(0)
    data = runner.goal_json(store, goal.id, git)
    data["running"] = runner.lock_holder(state_dir) is not None
    data["inbox"] = inbox
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        raise typer.Exit(0)
    out = SafeConsole(highlight=False, soft_wrap=True)
    state = data["status"]
    if data["reason"] and data["reason"] != state:
        state += f" ({data['reason']})"
    if data["status"] == "active":
        state += " · running" if data["running"] else " · no run is live: `relay resume` continues"
    out.print(f"goal {data['goal_id']} · [bold]{state}[/]")
    goal_text = " ".join(data["goal"].split())
    out.print(goal_text if len(goal_text) <= 300 else goal_text[:299] + "…", markup=False)
    out.print(
        f"rounds {data['rounds']} · no-progress streak {data['no_progress_streak']} · "
        f"blocked reports {data['blocked_reports']} · branch {data['branch']}"
    )
    if data["sandbox"] == "bwrap":
        out.print("sandbox: bubblewrap")
    else:
        out.print(
            "[bold red]sandbox: OFF[/] - the model's commands ran as your user, unconfined "
            "(docs/sandbox.md lists what is not guaranteed)"
        )
    if data["message"]:
        out.print(data["message"], markup=False)
    for e in data["events"][-10:]:
        out.print(f"  round {e['round'] or '-'} · {e['kind']}: {e['detail']}", markup=False)
    out.print(f"inbox: {inbox} (a text file dropped there is added to the goal)", markup=False)
    raise typer.Exit(0)


def _note(text: str) -> None:
    """A one-time notice (the move of an older relay's state) on stderr."""
    err.print(f"note: {text}", markup=False)


def _open_goal_store(
    repo: Path, config: Path | None, control: str | None = None
) -> tuple[Store, Path]:
    """The store of the working tree at ``repo`` and the state directory; GoalStateError when
    relay never ran there. With ``control`` (the command's name), a process started by the
    running goal's tool calls is refused before anything is read or changed (SPEC §14)."""
    git = GitRepo(repo)
    cfg = load_config(git.root, config)
    state_dir = ready_state_dir(git, cfg, _note)
    if control is not None:
        lock = state_dir / "run.lock"
        refuse_from_goal_shell(lock, runner.lock_holder(state_dir), control)
    store = runner.open_store(git, cfg, create=False)
    if store is None:
        raise GoalStateError(f'no relay goal in {git.root} yet: start one with relay run "GOAL"')
    return store, state_dir


def _the_open_goal(store: Store) -> GoalRecord:
    goal = store.latest_goal(open_only=True)
    if goal is None:
        raise GoalStateError('no open goal here: start one with relay run "GOAL"')
    return goal


def _signal_holder(state_dir: Path) -> int | None:
    """Ask the process running the goal to stop at once (its tool's process group is
    stopped); returns its PID, or None when no run is live."""
    pid = runner.lock_holder(state_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, PAUSE_SIGNAL)
    return pid


@app.command()
def pause(repo: RepoOpt = Path("."), config: ConfigOpt = None) -> None:
    """Pause the running goal: its tool's process group is stopped and no model call follows
    until `relay resume`."""
    store, state_dir = _open_goal_store(repo, config, "pause")
    goal = _the_open_goal(store)
    if goal.status != GoalStatus.ACTIVE:
        raise GoalStateError(f"goal {goal.id} is {goal.status}, not running; nothing to pause")
    store.update_goal(
        goal.id, "active", status="paused", reason="user", message="Paused by relay pause."
    )
    store.add_event(goal.id, "paused", "paused by relay pause")
    pid = _signal_holder(state_dir)
    where = f" (run pid {pid} stops at once)" if pid else ""
    err.print(f"paused goal {goal.id}{where}; `relay resume` continues it", markup=False)


@app.command()
def clear(repo: RepoOpt = Path("."), config: ConfigOpt = None) -> None:
    """Drop the open goal (status cleared); its history stays in the store."""
    store, state_dir = _open_goal_store(repo, config, "clear")
    goal = _the_open_goal(store)
    store.update_goal(
        goal.id, goal.status, status="cleared", reason="user", message="Cleared by the user."
    )
    store.add_event(goal.id, "cleared", f"cleared by relay clear (was {goal.status})")
    _signal_holder(state_dir)
    err.print(f"cleared goal {goal.id}; a new goal can start here", markup=False)


@app.command()
def say(
    text: Annotated[str, typer.Argument(help="What to add to the goal.")],
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
) -> None:
    """Add a supplement to the open goal; a running goal gets it at its next step, and the
    round counts restart."""
    if not text.strip():
        raise ConfigError("the supplement is empty; say what to add to the goal")
    store, _ = _open_goal_store(repo, config, "say")
    goal = _the_open_goal(store)
    store.add_supplement(goal.id, text.strip(), "say")
    err.print(f"added to goal {goal.id} ({goal.status})", markup=False)


@app.command()
def log(
    run_id: Annotated[
        str | None, typer.Argument(help="A run id (default: the latest run).")
    ] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Follow a live run.")] = False,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
) -> None:
    """The event stream of a run, human-readable."""
    store, state_dir = _open_goal_store(repo, config)
    if run_id is None:
        goal = store.latest_goal(open_only=True) or store.latest_goal()
        if goal is None:
            raise GoalStateError("no goal here yet")
        runs = store.runs(goal.id)
        if not runs:
            raise GoalStateError(f"goal {goal.id} has no run yet")
        run_id = runs[-1]["id"]
    record = store.run_record(run_id)
    if record is None:
        raise GoalStateError(f"no run with id {run_id}")
    out = SafeConsole(highlight=False)
    for line in follow_events(store, state_dir, record["goal_id"], run_id, follow):
        out.print(line, markup=False)


@app.command()
def batch(
    goals_file: Annotated[Path, typer.Argument(help="A YAML list of goals (see relay/batch.py).")],
    repo: RepoOpt = Path("."),
    workers: Annotated[int, typer.Option("--workers", min=1, help="Goals run at once.")] = 2,
    model: Annotated[
        str | None, typer.Option("--model", help="PROVIDER:MODEL for goals naming none.")
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run several goals concurrently, each in its own git worktree and branch; exits with the
    worst exit code of the goals."""
    from relay.batch import run_batch, worst_exit_code

    if not goals_file.is_file():
        raise ConfigError(f"the batch file {goals_file} does not exist")
    results = run_batch(goals_file, repo, workers=workers, model=model, config_path=config)
    code = worst_exit_code([r.exit_code for r in results])
    if as_json:
        print(json.dumps({"exit_code": code, "goals": [r.__dict__ for r in results]}, indent=2))
        raise typer.Exit(code)
    from rich.table import Table

    table = Table(title=f"relay batch: {goals_file.name}")
    for column in ("goal", "branch", "status", "rounds", "tokens", "cost", "exit", "note"):
        table.add_column(column)
    for r in results:
        status = r.status + (f" ({r.reason})" if r.reason and r.reason != r.status else "")
        table.add_row(
            r.name,
            r.branch,
            status,
            str(r.rounds),
            f"{r.tokens:,}",
            f"${r.cost_usd:.4f}",
            str(r.exit_code),
            printable(r.message[:60]),  # the goal's message can hold the model's words
        )
    SafeConsole(highlight=False).print(table)
    raise typer.Exit(code)


@app.command()
def demo(
    keep: Annotated[
        Path | None, typer.Option("--dir", help="Folder to create the demo repository in.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the shipped fizzbuzz example offline: a fresh git repository in a temporary folder,
    the scripted model, the real audit (pytest)."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        raise ConfigError(
            "the demo's audit runs pytest, which is not installed: pip install 'goal-relay[dev]'"
        ) from None
    import os
    import subprocess

    if keep is not None:
        try:
            keep.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--dir {keep}: cannot create the folder ({exc.strerror})") from None
    base = Path(tempfile.mkdtemp(prefix="relay-demo-", dir=keep))
    src = data_dir("examples") / "fizzbuzz"
    repo = base / "repo"
    shutil.copytree(src / "repo", repo)
    shutil.copy(src / "script.yaml", base / "script.yaml")
    shutil.copy(src / "goal.md", repo / "GOAL.md")
    env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid"}
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "-m", "fizzbuzz example: initial"],
    ):
        subprocess.run(cmd, cwd=repo, check=True, env=env, capture_output=True)
    # `python` in the goal's commands is the interpreter relay runs in.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    err.print(f"demo repository: {repo}")
    request = runner.RunRequest(
        repo=repo,
        goal_file=repo / "GOAL.md",
        overrides={"model": f"scripted:{base / 'script.yaml'}"},
    )
    from relay.display import RichDisplay

    display = None if as_json else RichDisplay()
    try:
        outcome = runner.run(request, display)
    finally:
        if display is not None:
            display.close()
    if not as_json:
        err.print(f"\nrepository: {repo}\nrun folder: {outcome.run_dir}")
        err.print(f"see the commits:  git -C {repo} log --stat")
    _finish(outcome, as_json)


def format_event(event: dict[str, Any]) -> str:
    """One event as a log line: time, round, kind, detail."""
    stamp = time.strftime("%H:%M:%S", time.localtime(event["created_at"]))
    where = f"round {event['round']}" if event["round"] is not None else "-"
    return f"{stamp}  {where:<9} {event['kind']}: {event['detail']}"


def format_step(step: dict[str, Any]) -> str:
    """One step as a log line: its tool calls with ✓/✗, or the text of a text-only answer."""
    stamp = time.strftime("%H:%M:%S", time.localtime(step["created_at"]))
    where = f"round {step['round']}"
    if step["actions"]:
        parts = []
        for a in step["actions"]:
            args = a["arguments"]
            target = args.get("command") or args.get("path") or args.get("status") or ""
            target = " ".join(str(target).split())[:60]
            parts.append(f"{'✗' if a['is_error'] else '✓'} {a['name']} {target}".strip())
        what = "; ".join(parts)
    else:
        text = " ".join((step["text"] or "").split())
        what = f"answered without a tool call: {text[:100]}"
    return f"{stamp}  {where:<9} step {step['step']}: {what}"


def follow_events(
    store: Store, state_dir: Path, goal_id: str, run_id: str, follow: bool
) -> Iterator[str]:
    """Log lines of a run: its events and steps in time order; with ``follow``, wait for new
    ones (file watching on the state directory) until the run ends."""
    last_event = last_step = 0
    wake = threading.Event()
    observer = None
    if follow:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        class _Wake(FileSystemEventHandler):
            def on_any_event(self, event: object) -> None:
                wake.set()

        observer = Observer()
        observer.schedule(_Wake(), str(state_dir), recursive=False)
        observer.daemon = True
        observer.start()
    try:
        while True:
            events = store.events(goal_id, run_id, after_id=last_event)
            steps = store.log_steps(run_id, after_id=last_step)
            lines = [(e["created_at"], format_event(e)) for e in events]
            lines += [(st["created_at"], format_step(st)) for st in steps]
            if events:
                last_event = events[-1]["id"]
            if steps:
                last_step = steps[-1]["id"]
            for _, line in sorted(lines, key=lambda item: item[0]):
                yield line
            record = store.run_record(run_id)
            if not follow or (record is not None and record["ended_at"] is not None):
                return
            wake.wait(timeout=1.0)
            wake.clear()
    finally:
        if observer is not None:
            observer.stop()


from relay.report_cli import register as _register_reports  # noqa: E402

_register_reports(app)
from relay.audit_cli import register as _register_audit  # noqa: E402

_register_audit(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``relay`` console script; returns the exit code (SPEC §12)."""
    try:
        result = app(args=argv, standalone_mode=False)
    except typer.TyperException as exc:  # usage errors: exit 1, not click's 2 (SPEC §12)
        if type(exc).__name__ == "NoArgsIsHelpError":
            err.print(exc.format_message(), markup=False)
            return 0
        ctx = getattr(exc, "ctx", None)
        hint = f"{ctx.command_path} --help" if ctx is not None else "relay --help"
        err.print(f"error: {exc.format_message()}\n(see {hint})", markup=False)
        return 1
    except typer.Abort:
        err.print("aborted")
        return 130
    except RelayError as exc:
        err.print(f"error: {exc}", markup=False)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


__all__ = ["app", "exit_code_for", "main"]
