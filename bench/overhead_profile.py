"""Timing wrappers for ``bench/overhead.py``: exclusive time per wrapped function, attributed to
the round in progress.

A round runs from one ``Store.start_round`` call to the next (the last one ends when the run
does): these are public methods of the store, which the restructuring of the loop keeps. The
other wrappers only say where the time goes; a name that does not exist (any more) is skipped
and listed, never an error. A function is wrapped in every ``relay`` module that holds it, so
that ``from relay.x import f`` call sites are timed too. Nested calls count once, in the
innermost wrapped function (a per-thread stack subtracts the children's time).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import threading
import time
import types
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

GIT_PROCESS = "process:"
CATEGORIES = ("git", "store", "context", "tools")
"""Categories of the overhead; ``other`` is the rest of a round's wall time, ``model`` the
scripted model's (subtracted)."""


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
    """Installs timing wrappers and attributes exclusive time to the current round.

    Args:
        between_rounds: called with the number of the round about to start, outside every
            round's window (the floor samples are taken there).
    """

    def __init__(self, between_rounds: Callable[[int], None] | None = None) -> None:
        self._local = threading.local()
        self._patches: list[tuple[Any, str, Any, bool]] = []
        self.missing: list[str] = []
        self.setup = Bucket(start=time.perf_counter())
        self.rounds: list[Bucket] = []
        self.current = self.setup
        self.between_rounds = between_rounds

    def _stack(self) -> list[list[float]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def begin_round(self) -> None:
        """Close the round in progress (or the setup) and open the next one."""
        now = time.perf_counter()
        (self.rounds[-1] if self.rounds else self.setup).end = now
        if self.between_rounds is not None:
            self.between_rounds(len(self.rounds) + 1)
        self.current = Bucket(start=time.perf_counter())
        self.rounds.append(self.current)

    def end_run(self) -> None:
        """Close the last round (once)."""
        if self.rounds and self.rounds[-1].end is None:
            self.rounds[-1].end = time.perf_counter()

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
        """Replace ``owner.name`` (a class's method, inherited ones included, or a module's
        function — in every relay module that holds the same function) by a timed wrapper.
        False, and the name listed in ``missing``, when it does not exist."""
        if owner is None:  # its module or class is gone: listed by the lookup already
            return False
        where = owner.__name__
        original = getattr(owner, name, None)
        if original is None or not callable(original):
            self.missing.append(f"{where}.{name}")
            return False
        if label is None:
            label = f"{where}.{name}" if isinstance(owner, type) else name
        wrapped = self.wrap(original, category, label, on_enter)
        holders = [owner]
        if isinstance(owner, types.ModuleType):
            holders += [
                m
                for m in list(sys.modules.values())
                if isinstance(m, types.ModuleType)
                and m is not owner
                and m.__name__.startswith("relay")
                and m.__dict__.get(name) is original
            ]
        for holder in holders:
            own = name in vars(holder)
            self._patches.append((holder, name, original, own))
            setattr(holder, name, wrapped)
        return True

    def patch_public_methods(self, cls: type | None, category: str) -> None:
        """Wrap every public method of ``cls`` (inherited ones included) not wrapped yet."""
        if cls is None:
            return
        done = {name for owner, name, _, _ in self._patches if owner is cls}
        for name, _ in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_") and name not in done:
                self.patch(cls, name, category)

    def restore(self) -> None:
        """Put every wrapped function back."""
        for owner, name, original, own in reversed(self._patches):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._patches.clear()


def _git_process_label(_self: Any, args: Any, *_: Any, **__: Any) -> str:
    sub = next((a for a in args if not a.startswith("-") and "=" not in a), "?")
    return f"{GIT_PROCESS} git {sub}"  # one git process (GitRepo._run)


DETAILS = (
    ("context", "relay.journal:Journal.write_progress"),
    ("context", "relay.own_files:OwnFiles.write_progress"),
    ("context", "relay.own_files:OwnFiles.write_goal_state"),
    ("context", "relay.loop:GoalLoop._round_message"),
    ("other", "relay.transcript:Transcript.write"),
    ("other", "relay.journal:Journal.record_step"),
    ("other", "relay.current_goal:CurrentGoal.refresh"),
    ("other", "relay.current_goal:CurrentGoal.save"),
    ("other", "relay.current_goal:CurrentGoal.save_final"),
    ("other", "relay.current_goal:CurrentGoal.add_usage"),
    ("other", "relay.guard_watch:GuardWatch.close"),
    ("other", "relay.guard_watch:GuardWatch.crossed"),
    ("other", "relay.repairs:Repairs.end_of_round"),
    ("other", "relay.repairs:Repairs.restore_progress"),
    ("other", "relay.repairs:Repairs.after_shell"),
    ("other", "relay.repairs:Repairs.after_code"),
    ("other", "relay.budget_watch:BudgetWatch.spent"),
    ("other", "relay.dispatch:ToolDispatcher.run"),
)
"""``(category, module:Class.method)`` of loop parts that get a line of their own in the
function table (their exclusive time counts in the category)."""


def _lookup(prof: Profiler, path: str) -> Any:
    """The module or ``module:attribute`` at ``path``; None (and listed as missing) when it
    does not exist (any more)."""
    module_name, _, attribute = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError:
        prof.missing.append(module_name)
        return None
    if attribute:
        found = getattr(found, attribute, None)
        if found is None:
            prof.missing.append(path.replace(":", "."))
    return found


def install(prof: Profiler) -> None:
    """Wrap relay's git, store, context, tools and model functions (what exists of them)."""
    store, git_repo = _lookup(prof, "relay.store:Store"), _lookup(prof, "relay.gitrepo:GitRepo")
    prof.patch(store, "start_round", "store", on_enter=prof.begin_round)
    prof.patch(store, "end_run", "store", on_enter=prof.end_run)
    prof.patch_public_methods(store, "store")
    if git_repo is not None:
        prof.patch_public_methods(git_repo, "git")
        prof.patch(git_repo, "_run", "git", _git_process_label)
    modules = {
        "relay.context": ("round_message", "continuation_message", "render_supplements"),
        "relay.progress": ("render_progress", "shown_rounds"),
        "relay.goal_state": ("goal_state", "dumps"),
    }
    for module_name, names in modules.items():
        module = _lookup(prof, module_name)
        for name in names if module is not None else ():
            prof.patch(module, name, "context", f"{module_name.removeprefix('relay.')}.{name}")
    prof.patch(_lookup(prof, "relay.context:Prompts"), "render", "context")
    tools = _lookup(prof, "relay.tools")
    for name in ("execute", "check_arguments", "run_shell", "read_file", "write_file", "edit_file"):
        if tools is not None:
            prof.patch(tools, name, "tools", f"tools.{name}")
    prof.patch(_lookup(prof, "relay.models.scripted:ScriptedModel"), "complete", "model")
    for category, path in DETAILS:
        owner, _, method = path.rpartition(".")
        prof.patch(_lookup(prof, owner), method, category)
    loop = _lookup(prof, "relay.loop:GoalLoop")
    if loop is not None and getattr(loop, "run", None) is not None:
        _mark_the_end(prof, loop)


def _mark_the_end(prof: Profiler, loop: type) -> None:
    """Close the last round when ``loop.run`` returns, if that comes before ``end_run``."""
    original_run = loop.run  # type: ignore[attr-defined]

    @functools.wraps(original_run)
    def run_and_mark(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_run(self, *args, **kwargs)
        finally:
            prof.end_run()

    prof._patches.append((loop, "run", original_run, "run" in vars(loop)))
    loop.run = run_and_mark  # type: ignore[attr-defined]


def install_shell_probe(prof: Profiler) -> None:
    """Count the shell tool's selector waits while no pipe is registered any more (both at
    EOF, the process not reaped yet): such a wait sleeps its whole poll interval."""
    import relay.tools.shell

    real = getattr(relay.tools.shell, "selectors", None)
    base = getattr(real, "DefaultSelector", None)
    if real is None or base is None:
        prof.missing.append("relay.tools.shell.selectors")
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
    prof._patches.append((relay.tools.shell, "selectors", real, True))
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
