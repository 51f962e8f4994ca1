"""``relay log [-f] [--json]``: the event stream of a run, human-readable or as JSON lines
(:class:`relay.outputs.LogLine`; SPEC §12)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from relay.cli.app import app, open_goal_store
from relay.cli.options import ConfigOpt, NoColorOpt, RepoOpt
from relay.errors import GoalStateError
from relay.terminal import SafeConsole

if TYPE_CHECKING:
    from relay.store import Store

__all__ = ["follow_events", "format_event", "format_step", "json_line", "log"]


@app.command()
def log(
    run_id: Annotated[
        str | None, typer.Argument(metavar="RUN_ID", help="A run id (default: the latest run).")
    ] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Follow a live run.")] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="JSON lines: one object per event or step (docs/outputs.md)."),
    ] = False,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    no_color: NoColorOpt = False,
) -> None:
    """The event stream of a run, human-readable (or JSON lines with --json).

    \b
    Example: relay log --follow
    """
    store, state_dir = open_goal_store(repo, config)
    with store:
        _print_log(store, state_dir, run_id, follow, as_json)


def _print_log(
    store: Store, state_dir: Path, run_id: str | None, follow: bool, as_json: bool
) -> None:
    """The events and steps of run ``run_id`` (default: the latest run of the current goal)."""
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
        raise GoalStateError(f"no run with id {run_id}{_known_runs(store)}")
    records = follow_events(store, state_dir, record["goal_id"], run_id, follow)
    if as_json:
        for kind, item in records:
            print(json_line(kind, item), flush=True)
        return
    out = SafeConsole(highlight=False)
    for kind, item in records:
        out.print(format_event(item) if kind == "event" else format_step(item), markup=False)


def json_line(kind: str, item: dict[str, Any]) -> str:
    """One event (``kind`` ``event``) or step (``step``) of a run as a ``relay log --json``
    line, built through :class:`relay.outputs.LogLine`."""
    from relay.outputs import LogLine

    if kind == "event":
        data = {"round": item["round"], "kind": item["kind"], "detail": item["detail"]}
    else:
        calls = [
            {"name": a["name"], "is_error": a["is_error"], "arguments": a["arguments"]}
            for a in item["actions"]
        ]
        data = {"round": item["round"], "step": item["step"], "text": item["text"]}
        data["tool_calls"] = calls
    line = LogLine.model_validate({"type": kind, "time": item["created_at"], **data})
    return line.model_dump_json()


def _known_runs(store: Any) -> str:
    """The hint of an unknown run id: the current goal's last runs, newest last."""
    goal = store.latest_goal(open_only=True) or store.latest_goal()
    runs = [r["id"] for r in store.runs(goal.id)][-5:] if goal is not None else []
    if not runs:
        return ""
    return f"; runs of goal {goal.id}: {', '.join(runs)} (without an id: the latest run)"


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


def _watch(state_dir: Path, wake: threading.Event) -> Any:
    """A started file watcher on ``state_dir`` that sets ``wake`` on every change."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    class _Wake(FileSystemEventHandler):
        def on_any_event(self, event: object) -> None:
            wake.set()

    observer = Observer()
    observer.schedule(_Wake(), str(state_dir), recursive=False)
    observer.daemon = True
    observer.start()
    return observer


def follow_events(
    store: Store, state_dir: Path, goal_id: str, run_id: str, follow: bool
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events and steps of a run in time order, as ``("event", event)`` and ``("step",
    step)`` (rows of :meth:`Store.events` and :meth:`Store.log_steps`); with ``follow``, wait
    for new ones (file watching on the state directory) until the run ends."""
    last_event = last_step = 0
    wake = threading.Event()
    observer = _watch(state_dir, wake) if follow else None
    try:
        while True:
            events = store.events(goal_id, run_id, after_id=last_event)
            steps = store.log_steps(run_id, after_id=last_step)
            lines = [(e["created_at"], ("event", e)) for e in events]
            lines += [(st["created_at"], ("step", st)) for st in steps]
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
