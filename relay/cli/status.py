"""``relay status``: the current goal (the open one, else the latest), for a person or as
JSON (SPEC §12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from relay.cli.app import app, err, note
from relay.cli.options import ConfigOpt, NoColorOpt, RepoOpt
from relay.terminal import SafeConsole

__all__ = ["status"]

StatusJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the goal as one JSON object on stdout.")
]


@app.command()
def status(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    as_json: StatusJsonOpt = False,
    no_color: NoColorOpt = False,
) -> None:
    """Show the current goal (the open one, else the latest).

    \b
    Example: relay status --json
    """
    from relay.config import load_config
    from relay.gitrepo import GitRepo
    from relay.json_output import goal_result
    from relay.outputs import GoalStatusOutput, NoGoalStatus
    from relay.runlock import lock_holder
    from relay.runner import check_store_against_branch, open_store
    from relay.statedir import inbox_dir, ready_state_dir

    git = GitRepo(repo)
    cfg = load_config(git.root, config)
    state_dir = ready_state_dir(git, cfg, note)
    inbox = str(inbox_dir(state_dir))
    store = open_store(git, cfg, create=False)
    try:
        if store is not None and lock_holder(state_dir) is None:
            check_store_against_branch(git, store, cfg)  # no live run: the branch decides
        goal = (store.latest_goal(open_only=True) or store.latest_goal()) if store else None
        if store is None or goal is None:
            carried, problem = _carried_goal(git, cfg, store)
            if as_json:
                print(json.dumps(NoGoalStatus(goal_id=None, status=None, inbox=inbox).model_dump()))
            elif carried is not None:  # a fresh machine, or a state database moved away
                err.print(
                    f"no goal in this tree's state database; branch {git.current_branch()} carries "
                    f"goal {carried['id']} ({carried['status']}): `relay resume` continues it",
                    markup=False,
                )
            elif problem is not None:  # e.g. a goal state without relay's seal (issue 27)
                err.print(f"no goal in this tree's state database; {problem}", markup=False)
            else:
                err.print('no goal here yet: start one with relay run "GOAL"')
            raise typer.Exit(0)
        result = goal_result(store, goal.id, git)
        running = lock_holder(state_dir) is not None
        data = GoalStatusOutput(**dict(result), running=running, inbox=inbox).model_dump(
            mode="json"
        )
        if as_json:
            print(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            _print_status(data, inbox)
        raise typer.Exit(0)
    finally:  # an in-process caller keeps no file open
        if store is not None:
            store.close()


def _carried_goal(git: Any, cfg: Any, store: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The open goal the checked-out branch carries in its goal state, and why it cannot be
    continued when it cannot (its file is not a goal state, or carries no seal of relay's
    made with this machine's key: :mod:`relay.branch_trust`)."""
    from relay.branch_goal import goal_state_on_branch
    from relay.errors import RelayError

    try:
        state = goal_state_on_branch(git, git.current_branch(), cfg, store)
    except RelayError as exc:
        return None, str(exc)
    return (state["goal"] if state is not None else None), None


def _print_status(data: dict[str, Any], inbox: str) -> None:
    """The goal for a person: status, goal text, counts, sandbox, message, recent events."""
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
        f"blocked reports {data['blocked_reports']} · branch {data['branch']}",
        markup=False,
    )
    out.print(
        f"model {data['model']} · {data['mode']} mode · worker {data['worker']}", markup=False
    )
    shown = [f"{k} {v}" for k, v in data["limits"].items() if v is not None]
    out.print("limits: " + (" · ".join(shown) or "none stored"), markup=False)
    if data["sandbox"] == "bwrap":
        out.print("sandbox: bubblewrap")
    else:
        out.print(
            "[bold red]sandbox: OFF[/] - the model's commands ran as your user, unconfined "
            "(docs/sandbox.md lists what is not guaranteed)"
        )
    if data["message"]:
        out.print(data["message"], markup=False)
    _print_text_call_warning(out, data)
    _print_audit_and_tokens(out, data)
    for e in data["events"][-10:]:
        out.print(f"  round {e['round'] or '-'} · {e['kind']}: {e['detail']}", markup=False)
    out.print(f"state folder: {Path(inbox).parent} (the store and the run folders)", markup=False)
    out.print(f"inbox: {inbox} (a text file dropped there is added to the goal)", markup=False)


def _print_text_call_warning(out: Any, data: dict[str, Any]) -> None:
    """The warning about tool calls written as text (issue 14), unless the goal's message
    already names that cause."""
    from relay.text_call_texts import warning_to_show

    warning = warning_to_show(data)
    if warning is not None:
        out.print("[bold yellow]warning:[/] " + escape(warning))


def _print_audit_and_tokens(out: SafeConsole, data: dict[str, Any]) -> None:
    """The latest audit in one line (with the note of a goal without deliverables), and the
    tokens (with the note of a provider that reported no cache use)."""
    from relay.summary import token_line

    audit = data["audit"]
    if audit is not None:
        failed = [f"{c['kind']} {c['target']}" for c in audit["checks"] if not c["passed"]]
        verdict = "passed" if audit["passed"] else "failed: " + ", ".join(failed)
        out.print(f"audit (round {audit['round']}): {verdict}", markup=False)
        if audit.get("note"):
            out.print(f"note: {audit['note']}", markup=False)
    out.print(token_line(data["tokens"]), markup=False)
    if data.get("cache_note"):
        out.print(f"note: {data['cache_note']}", markup=False)
