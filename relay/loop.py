"""The round loop (SPEC §3, §4): rounds of steps until the goal ends.

:meth:`GoalLoop.run` is the whole loop: a round is steps until one ends it (an agent worker's
round is its process: :mod:`relay.workers`), then the journal closes it, once. A step checks the
limits (the user's stop, new supplements, the budgets: a used-up budget makes the step the
wrap-up), calls the model, runs the tool calls. :class:`GoalEnded` carries the goal's stop.

Pure policy: :mod:`relay.supervisor`, :mod:`relay.retry`, :mod:`relay.guard`. Units that act:
:mod:`relay.model_call`, :mod:`relay.dispatch` (tool calls), :mod:`relay.goal_tools`,
:mod:`relay.repairs`, :mod:`relay.guard_watch`, :mod:`relay.journal` (a round's end),
:mod:`relay.current_goal` (the goal's row), :mod:`relay.transcript`."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from relay import tools
from relay.budget_watch import BudgetWatch
from relay.config import Config
from relay.context import (
    Prompts,
    RelayContext,
    RoundFacts,
    SessionContext,
    continuation_message,
    format_audit,
    render_supplements,
    round_message,
)
from relay.current_goal import CurrentGoal
from relay.dispatch import ToolDispatcher
from relay.display import Display
from relay.gitrepo import GitRepo
from relay.goal import GoalStatus
from relay.goal_tools import GoalTools
from relay.guard import GuardSettings, RepeatTracker
from relay.guard_watch import GuardWatch
from relay.interrupts import Interrupted, Interrupts
from relay.journal import Journal
from relay.loop_state import EventLog, GoalEnded, RoundState
from relay.loop_texts import NOTABLE_STOPS
from relay.model_call import ModelCaller
from relay.models.base import Message, Model, Request, Response, ToolCall
from relay.own_files import OwnFiles
from relay.repairs import Repairs
from relay.repo_guard import RepoGuard
from relay.retry import RetryPolicy
from relay.sandbox import Redactor, Sandbox, SandboxSession
from relay.statedir import state_dir as state_folder
from relay.store import Store
from relay.supervisor import (
    Counters,
    LimitPolicy,
    Stop,
    rounds_remaining_warning,
    step_stop,
)
from relay.text_call_watch import TextCallWatch
from relay.tools import ToolContext
from relay.transcript import Transcript
from relay.watch import SupplementWatcher

__all__ = ["Display", "GoalEnded", "GoalLoop", "LoopSetup"]


@dataclass
class LoopSetup:
    """Everything a goal loop needs, built by :mod:`relay.runner`.

    ``base_elapsed_s`` is the goal's active time before this run, in seconds; ``sleep`` and
    ``rng`` (the backoff's jitter) are injectable for tests of the retry policy.
    """

    store: Store
    git: GitRepo
    model: Model
    config: Config
    prompts: Prompts
    goal_id: str
    run_id: str
    run_dir: Path
    progress_rel: str
    protected_paths: tuple[str, ...]
    counters: Counters
    base_elapsed_s: float = 0.0
    display: Display = field(default_factory=Display)
    sleep: Callable[[float], None] = time.sleep
    interrupts: Interrupts = field(default_factory=Interrupts)
    watcher: SupplementWatcher | None = None
    sandbox: Sandbox = field(default_factory=Sandbox)
    rng: random.Random = field(default_factory=random.Random)
    pending_claim: dict[str, Any] | None = None
    """A ``complete`` claim a stopped run never answered: audited again first (recovery)."""


class GoalLoop:
    """Runs rounds for one goal until a stop (SPEC §4). Use :meth:`run`."""

    def __init__(self, setup: LoopSetup) -> None:
        self.setup = s = setup
        cfg = setup.config
        guard = GuardSettings.from_config(cfg.guard)
        self.events = EventLog(s.store, s.goal_id, s.run_id, guard, s.display)
        self.goal = CurrentGoal(s.store, s.goal_id, self.events, s.base_elapsed_s)
        self.limits = LimitPolicy.from_limits(lim := cfg.limits)
        self.budget = BudgetWatch.of(lim, self.limits, self.goal, self.events, s.interrupts)
        self.budgets = self.budget.budgets
        self.counters = s.counters
        self.repeat_settings = (guard.repeat_limit, guard.loop_similarity)
        self.context = (
            SessionContext(cfg.context.max_tokens) if cfg.mode == "session" else RelayContext()
        )
        self.system = s.prompts.render("system")
        tool_specs = json.dumps([t.to_dict() for t in tools.WORKER_TOOLS])
        self.overhead = len(self.system) + len(tool_specs)
        self.known_supplements = len(self.goal.value.supplements)
        own = OwnFiles(s.git.root, s.progress_rel, self.goal.value.progress_text or "")
        self.session = SandboxSession(s.sandbox, s.git.root, s.protected_paths, sorted(own.paths))
        s.git.remember_scans(watch_head=s.sandbox.active)  # one tree scan a round (issue 12)
        self.repo_guard = RepoGuard(s.git, self.goal.value.branch, sandboxed=s.sandbox.active)
        repairs = Repairs(
            own,
            s.protected_paths,
            self.repo_guard,
            s.watcher,
            sandboxed=s.sandbox.active,
            run_id=s.run_id,
            events=self.events,
        )
        self.guard = GuardWatch(s.store, s.goal_id, guard, self.events)
        self.text_calls = TextCallWatch(s.store, s.goal_id, self.events, cfg)
        self.dispatcher = self._dispatcher(guard, repairs)
        self.caller = ModelCaller(
            s.model,
            self.goal,
            self.events,
            Transcript(s.run_dir / "transcript.jsonl", cfg.mode),
            policy=RetryPolicy.from_limits(lim),
            prices=cfg.prices,
            force_tool_choice=cfg.force_tool_choice,
            sleep=s.sleep,
            rng=s.rng,
            interrupts=s.interrupts,
            over_budget=self.budget.spent,
        )
        self.own = own
        self.journal = Journal(
            s.git, cfg, s.prompts, self.goal, self.events, own, repairs, self.guard, self.limits
        )

    def _dispatcher(self, guard: GuardSettings, repairs: Repairs) -> ToolDispatcher:
        s, cfg = self.setup, self.setup.config
        tool_ctx = ToolContext(
            repo_root=s.git.root,
            state_dir=state_folder(s.git, cfg),
            run_dir=s.run_dir,
            protected_paths=s.protected_paths,
            **cfg.tools.context_limits(),
            sandbox=s.sandbox,
            redact=Redactor.from_environ(),
            session=self.session,
        )
        goal_tools = GoalTools(
            self.goal,
            s.git,
            cfg,
            limits=self.limits,
            budgets=self.budgets,
            tool_ctx=tool_ctx,
            repairs=repairs,
            events=self.events,
            protected_paths=s.protected_paths,
            progress_rel=s.progress_rel,
        )
        return ToolDispatcher(
            tool_ctx, goal_tools, repairs, self.guard, guard, self.goal, self.events, s.interrupts
        )

    def run(self) -> Stop:
        """Run rounds until the goal ends (its kept sandbox too); returns the stored stop."""
        with self.session:
            stop = self.budget.spent_before_start()
            if stop is None:
                self.journal.open_run(self.counters)
                self.budget.warn(None, self.counters)
            rnd: RoundState | None = None
            while stop is None and (stop := self.journal.branch_moved()) is None:  # issue 17
                rnd = self._begin_round()
                try:
                    self._work(rnd)
                except GoalEnded as ended:
                    rnd.stop = ended.stop
                stop = self.journal.close_round(rnd) or self._user_stop()
                self.counters = rnd.counters
                if stop is None:
                    self.budget.warn(rnd.n, self.counters)
            return self.journal.end_goal(stop, rnd.n if rnd else None)

    def _begin_round(self) -> RoundState:
        rnd = RoundState(
            n=self.counters.rounds + 1,
            start_sha=self.setup.git.head_sha(),
            counters=self.counters,
            repeats=RepeatTracker(*self.repeat_settings),
        )
        self.setup.store.start_round(self.setup.goal_id, rnd.n, self.setup.run_id)
        self.events.round = rnd
        self.repo_guard.start_round(rnd.start_sha)
        self.context.round_steps = 0
        counted = self.counters.counted_rounds + 1
        self.setup.display.round_started(rnd.n, counted, self.limits.max_rounds_total)
        return rnd

    def _work(self, rnd: RoundState) -> None:
        """The round's work: steps until one ends the round (agents: :mod:`relay.workers`)."""
        while self._step(rnd):
            pass

    def _step(self, rnd: RoundState) -> bool:
        """One step: the limits, the model call, its tool calls (SPEC §3, §7). Returns whether
        the round goes on; raises :class:`GoalEnded` when the goal ends."""
        spent = self._before_model_call(rnd)
        if rnd.steps == 0:
            self._audit_pending_claim(rnd)
            self.context.start_round(self._round_message(rnd))
        rnd.steps += 1
        request = self._request(spent)
        response, spent = self._call(request, rnd, spent)
        self.setup.display.step(rnd.n, rnd.steps, response)
        notable = NOTABLE_STOPS.get(response.stop_reason)
        if notable:
            self.events.add("model_stop", rnd.n, f"step {rnd.steps}: {notable}")
        calls = response.tool_calls if spent is None else ()  # no tools in the wrap-up
        in_text = self.text_calls.examine(rnd, request, response)
        if in_text is not None and in_text.calls:  # run as real calls (tools.parse_text_calls)
            response = replace(response, tool_calls=in_text.calls)
            calls = in_text.calls
        self.context.append(Message("assistant", response.text, tool_calls=response.tool_calls))
        results, decided = self.dispatcher.run(rnd, calls) if calls else ([], None)
        self.context.append(*results)
        self.journal.record_step(rnd, response, results, from_text=in_text is not None)
        if spent is not None:
            raise GoalEnded(self._wrapped_up(rnd, spent, response))
        if not calls:  # a tool call written as text: the model is told, once in a row
            rnd.end_reason = "no_tool_call" if in_text is None else "text_tool_call"
            if in_text is not None and in_text.nudge is not None:
                self.context.append(Message("user", in_text.nudge))
            return in_text is not None and in_text.nudge is not None
        stop = step_stop(decided, rnd.counters, self.limits)
        if stop is not None:
            raise GoalEnded(stop)
        if rnd.handoff is not None:
            rnd.end_reason = "handoff"
        elif rnd.guard_crossed:  # the journal's guard ends the goal (SPEC §8)
            rnd.end_reason = "guard"
        elif rnd.steps >= self.setup.config.limits.max_steps_per_round:
            rnd.end_reason = "max_steps"
        else:
            return True
        return False

    def _before_model_call(self, rnd: RoundState) -> Stop | None:
        """Before every model call: a pause request or a user's status change ends the goal
        (zero model calls while paused), new supplements restart the counts and reach the
        model. Returns the budget's stop when a budget is used up: the step is then the
        wrap-up (SPEC §7.4, §10)."""
        stop = self._user_stop()
        if stop is not None:
            raise GoalEnded(stop)
        self._take_supplements(rnd)
        return self.budget.spent()

    def _audit_pending_claim(self, rnd: RoundState) -> None:
        """A claim whose audit a stopped run never finished is audited again, as if the model
        had just made it alone (SPEC §9, §10); raises :class:`GoalEnded` when it is accepted
        or ends the goal."""
        claim, self.setup.pending_claim = self.setup.pending_claim, None
        if claim is None:
            return
        call = ToolCall("recovered-claim", "update_goal", claim)
        stop = self.dispatcher.goal_tools.update_goal(rnd, call, alone=True)[1]
        if stop is not None:
            raise GoalEnded(stop)

    def _user_stop(self) -> Stop | None:
        """The stop the user asked for: a status set from another process (pause, clear; the
        goal is read again) or a signal to this one; None while the goal may go on."""
        goal = self.goal.refresh()
        if goal.status != GoalStatus.ACTIVE:
            return Stop(GoalStatus(goal.status), goal.reason or "user", goal.message or "")
        if self.setup.interrupts.requested is not None:
            return self._paused()
        return None

    def _paused(self) -> Stop:
        """The stop of a pause asked for by a signal (Ctrl+C, SIGTERM, ``relay pause``)."""
        how = f"Paused by {self.setup.interrupts.describe()}."
        return Stop(GoalStatus.PAUSED, "user", f"{how} `relay resume` continues the goal.")

    def _take_supplements(self, rnd: RoundState) -> None:
        """Store supplements from the inbox and the goal file, and pass every new supplement
        (also from ``relay say``) to the model now; they restart the round counts (§7.2)."""
        watcher = self.setup.watcher
        taken = watcher.poll() if watcher is not None else []
        for source, text in taken:
            self.setup.store.add_supplement(self.setup.goal_id, text, source)
            if source == "goal_file" and watcher is not None:
                self.goal.save(goal_file_digest=watcher.goal_digest)
        supplements = (self.goal.refresh(force=True) if taken else self.goal.value).supplements
        new = supplements[self.known_supplements :]
        if not new:
            return
        self.known_supplements = len(supplements)
        rnd.counters = rnd.counters.restarted()
        for sup in new:
            self.events.add("supplement", rnd.n, f"({sup['source']}) {sup['text'][:200]}")
        if self.context.round_steps > 0:  # the round message already holds the earlier ones
            block = render_supplements(self.setup.prompts, tuple(supplements))
            self.context.append(
                Message(
                    "user",
                    "The user added to the goal while you were working. This is the user's "
                    f"latest word; the round counts restarted.\n\n{block}",
                )
            )

    def _round_message(self, rnd: RoundState) -> str:
        """The round's first message (SPEC §3, §7.3): relay mode's round message, or session
        mode's continuation after the first round."""
        goal = self.goal.value
        counted = rnd.counters.counted_rounds + 1
        commits = self.setup.git.recent_commits(self.setup.config.git.log_commits)
        log = "\n".join(
            f"{c.short} {c.subject}" + (f" ({c.shortstat})" if c.shortstat else "") for c in commits
        )
        facts = RoundFacts(
            round=counted,
            goal_round=rnd.n,
            max_rounds=self.limits.max_rounds_total,
            remaining_warning=rounds_remaining_warning(counted, self.limits),
            goal=goal.text,
            supplements=tuple(goal.supplements),
            progress_path=self.setup.progress_rel,
            progress=self.own.progress_text,
            git_log=log,
            git_status=self.setup.git.status_short(),
            audit=format_audit(self.setup.store.latest_audit(self.setup.goal_id)),
        )
        if isinstance(self.context, SessionContext) and self.context.round_starts:
            return continuation_message(self.setup.prompts, facts)
        return round_message(self.setup.prompts, facts)

    def _request(self, spent: Stop | None) -> Request:
        """The step's request. The wrap-up step (``spent``: the budget's stop) offers no tool
        (SPEC §7.4)."""
        if spent is None:
            choice = "required" if self.caller.force_tool_choice else "auto"
            messages = self.context.visible(self.overhead)
            return Request(self.system, messages, tools.WORKER_TOOLS, choice)
        prompt = self.budget.wrap_up_prompt(self.setup.prompts, spent)
        messages = (*self.context.visible(len(self.system)), Message("user", prompt))
        return Request(self.system, messages, (), "none")

    def _call(
        self, request: Request, rnd: RoundState, spent: Stop | None
    ) -> tuple[Response, Stop | None]:
        """The step's model call, and the budget's stop when the step is the wrap-up (tried once;
        also when a budget ran out while the call was retried; its failure ends the goal with
        the budget's stop, the work committed all the same; SPEC §7.4). A pause requested while
        the call is in flight or waits for a retry ends the goal as a pause between steps does:
        the user's stop wins over the budget's (issue 14)."""
        try:
            return self.caller.call(request, rnd, rnd.steps), spent
        except Interrupted:
            raise GoalEnded(self._user_stop() or self._paused()) from None
        except GoalEnded as ended:
            if spent is not None or ended.stop.status != GoalStatus.BUDGET_LIMITED:
                raise GoalEnded(spent or ended.stop) from None
            return self._call(self._request(ended.stop), rnd, ended.stop)

    def _wrapped_up(self, rnd: RoundState, spent: Stop, response: Response) -> Stop:
        """The budget's stop with the model's last word of the wrap-up step (SPEC §7.4), its
        figures counting the wrap-up step too (so they match the goal's totals)."""
        now = self.budget.spent()
        spent = now if now is not None and now.reason == spent.reason else spent
        rnd.wrap_up = response.text.strip() or None
        if rnd.wrap_up is None:
            return spent
        return replace(spent, message=f"{spent.message}\n\n{rnd.wrap_up}")
