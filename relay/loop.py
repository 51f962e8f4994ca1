"""The round loop (SPEC §3, §4): rounds of steps, tool calls, supervisor decisions, commits.

:class:`GoalLoop` is the only place that does I/O in sequence. Policy lives in
:mod:`relay.supervisor` (pure); this module applies it. Flow control uses two small exceptions:
:class:`GoalEnded` carries the stop that ends the goal, :class:`RoundEnded` ends a round.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from relay import goal_state, tools
from relay.audit import AuditResult, run_audit, shell_runner
from relay.config import Config, Deliverable
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
from relay.errors import (
    ForcedToolChoiceRejected,
    GoalStateError,
    ModelError,
    RelayError,
    UnreadableGoalError,
)
from relay.fsread import read_regular_text
from relay.fswrite import own_folder, replace_file
from relay.gitrepo import GitRepo
from relay.goal import GoalStatus
from relay.guard import (
    Action,
    GuardEvent,
    GuardSettings,
    RepeatTracker,
    RoundRecord,
    evaluate_round,
    result_fingerprint,
)
from relay.integrity import GoalSeal, foreign_status
from relay.interrupts import Interrupts
from relay.models.base import Message, Model, Request, Response, ToolCall, Usage
from relay.prices import cost_usd, price_for
from relay.progress import render_progress, round_entries
from relay.repo_guard import RepoGuard
from relay.sandbox import Redactor, Sandbox, stop_escaped
from relay.statedir import state_dir as state_folder
from relay.store import GoalRecord, Store
from relay.supervisor import (
    BudgetPolicy,
    Counters,
    LimitPolicy,
    Stop,
    Verdict,
    after_real_tool_call,
    after_rejected_update,
    budget_outlook,
    budget_reached,
    check_streak,
    end_of_round,
    review_audit,
    review_update_goal,
    rounds_remaining_warning,
)
from relay.tools import ToolContext, ToolResult
from relay.watch import SupplementWatcher

BACKOFF_CAP_S = 60.0

NOTABLE_STOPS = {
    "max_tokens": "the answer hit the output token limit and was cut off",
    "refusal": "the model refused to answer",
    "context_window": "the request exceeded the model's context window",
}
"""Provider stop reasons worth an event: the run goes on, and the user can see why a step
looks odd."""

NUDGE_MARK = "\n\n[relay] "
"""Separates a tool result from relay's note that the model is repeating itself."""

RECORDED_AS_THEY_HAPPEN = frozenset({"tamper", "api_errors"})
"""Guard event kinds the loop stores when they happen; the guard only scores them."""


class GoalEnded(Exception):
    """Raised inside a round when the goal ends; carries the supervisor's :class:`Stop`."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.message)
        self.stop = stop


class Display:
    """Receives progress notifications; the default shows nothing (``--json``)."""

    def run_started(self, goal_id: str, branch: str | None, limits: str) -> None: ...

    def round_started(self, goal_round: int, counted: int, max_rounds: int) -> None: ...

    def step(self, round_n: int, step: int, response: Response) -> None: ...

    def tool_called(self, call: ToolCall, result: str, is_error: bool) -> None: ...

    def round_ended(self, round_n: int, reason: str, commit: str | None) -> None: ...

    def event(self, kind: str, detail: str) -> None: ...


@dataclass
class RoundState:
    """What one round did so far (for the automatic handoff, the store and the guard)."""

    n: int
    start_sha: str
    steps: int = 0
    tool_calls: int = 0
    real_tool_calls: int = 0
    called_tools: bool = False
    handoff: str | None = None
    commands: list[tuple[str, int | None]] = field(default_factory=list)
    last_error: str | None = None
    end_reason: str = "no_tool_call"
    actions: list[Action] = field(default_factory=list)
    api_errors: list[str] = field(default_factory=list)
    tamper: list[str] = field(default_factory=list)
    repeat_events: list[str] = field(default_factory=list)
    repeats: RepeatTracker | None = None


@dataclass
class LoopSetup:
    """Everything a goal loop needs, built by :mod:`relay.runner`.

    ``base_elapsed_s`` is the goal's active time before this run, in seconds; ``sleep`` is
    injectable for tests of the retry policy.
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


class GoalLoop:
    """Runs rounds for one goal until a stop (SPEC §4). Use :meth:`run`."""

    def __init__(self, setup: LoopSetup) -> None:
        self.s = setup
        cfg = setup.config
        self.root = setup.git.root
        self.goal = setup.store.goal(setup.goal_id)
        self.seal = GoalSeal.of(self.goal)
        self.repo_guard = RepoGuard(setup.git, self.goal.branch, sandboxed=setup.sandbox.active)
        self.current_round: RoundState | None = None
        self.ended = False  # the loop has stored the goal's final status
        self.limits = LimitPolicy.from_limits(cfg.limits)
        self.budgets = BudgetPolicy(
            cfg.limits.token_budget, cfg.limits.time_budget, cfg.limits.cost_budget
        )
        self.deliverables = [Deliverable.model_validate(d) for d in self.goal.deliverables]
        self.counters = setup.counters
        self.force_tool_choice = cfg.force_tool_choice
        self.started = time.monotonic()
        self.progress_path = self.root / setup.progress_rel
        self.goal_state_path = self.progress_path.parent / "goal.json"
        self.goal_state_rel = self.goal_state_path.relative_to(self.root).as_posix()
        self.progress_text = self.goal.progress_text or ""
        self.tool_ctx = ToolContext(
            repo_root=self.root,
            state_dir=state_folder(setup.git, cfg),
            run_dir=setup.run_dir,
            protected_paths=setup.protected_paths,
            output_limit_bytes=cfg.tools.output_limit_bytes,
            shell_timeout_s=cfg.tools.shell_timeout_s,
            max_shell_timeout_s=cfg.tools.max_shell_timeout_s,
            sandbox=setup.sandbox,
            redact=Redactor.from_environ(),
        )
        self.transcript = setup.run_dir / "transcript.jsonl"
        self.wrap_up_text: str | None = None
        self.known_supplements = len(self.goal.supplements)
        self.guard = GuardSettings.from_config(cfg.guard)
        self.round_api_errors: list[str] = []
        self._outlook_given = False
        self.guard_rounds: list[RoundRecord] = self._guard_history()
        self.context: RelayContext = (
            SessionContext(cfg.context.max_tokens) if cfg.mode == "session" else RelayContext()
        )

    # the goal ---------------------------------------------------------------------------

    def run(self) -> Stop:
        """Run rounds until the goal ends; returns the stop (already stored)."""
        goal = self._goal()
        spent = budget_reached(
            self.budgets,
            tokens=goal.uncached_input + goal.cache_write + goal.output,
            elapsed_s=self.elapsed_s,
            cost_usd=goal.cost_usd,
        )
        if spent is not None:  # resumed without raising it: no model call, no second wrap-up
            stop = replace(
                spent,
                message=f"{spent.message} Raise limits.{spent.reason} (relay.yaml or its flag), "
                "then `relay resume`.",
            )
            self._save_final(stop)  # nothing is written to the tree: it stays clean
            self._event("goal_ended", None, f"{stop.status} ({stop.reason}): {stop.message}")
            return stop
        self._write_progress(final=None)
        self._warn_budgets(None)
        while True:
            rnd = RoundState(
                n=self.counters.rounds + 1,
                start_sha=self.s.git.head_sha(),
                repeats=RepeatTracker(self.guard.repeat_limit, self.guard.loop_similarity),
            )
            self.s.store.start_round(self.s.goal_id, rnd.n, self.s.run_id)
            self.current_round = rnd
            self.repo_guard.start_round(rnd.start_sha)
            self.s.display.round_started(
                rnd.n, self.counters.counted_rounds + 1, self.limits.max_rounds_total
            )
            stop: Stop | None = None
            try:
                self._run_round(rnd)
            except GoalEnded as ended:
                stop = ended.stop
            counters, limit_stop = end_of_round(
                self.counters, called_tools=rnd.called_tools, limits=self.limits
            )
            self.counters = counters
            stop = stop or limit_stop
            own = {self.s.progress_rel, self.goal_state_rel}
            changed = self.s.git.changed_paths(rnd.start_sha)
            branch_stop = self._repair_repo(rnd, changed)
            files = [f for f in changed if f not in own]
            guard_stop = self._apply_guard(rnd, files)
            stop = stop or branch_stop or guard_stop  # the supervisor's stop first (SPEC §4)
            self._finish_round(rnd, stop, files)
            stop = stop or self._user_stop()  # a pause during the round's bookkeeping
            if stop is not None:
                first = next((ln for ln in stop.message.splitlines() if ln.strip()), "")
                self._event("goal_ended", rnd.n, f"{stop.status} ({stop.reason}): {first}")
                return stop
            if not self._outlook_given:
                self._warn_budgets(rnd.n)

    def _finish_round(self, rnd: RoundState, stop: Stop | None, files: list[str]) -> None:
        """Progress file, commit and store records after a round (SPEC §4, §6, §11)."""
        automatic = rnd.handoff is None
        note = rnd.handoff if rnd.handoff is not None else self._auto_handoff(rnd, files)
        self.s.store.end_round(
            self.s.goal_id,
            rnd.n,
            steps=rnd.steps,
            tool_calls=rnd.tool_calls,
            real_tool_calls=rnd.real_tool_calls,
            files_changed=files,
            handoff=note,
            handoff_auto=int(automatic),
            end_reason=stop.reason if stop else rnd.end_reason,
        )
        self._write_progress(final=stop)
        first = next((ln.strip() for ln in note.splitlines() if ln.strip()), "no note")
        headline = first
        if stop is not None:
            headline = f"{stop.status}: " + next(
                (ln.strip() for ln in stop.message.splitlines() if ln.strip()), stop.reason
            )
        subject = f"relay: round {rnd.n}: {headline}"
        if len(subject) > 72:
            subject = subject[:71] + "…"
        sha = self.s.git.commit_all(
            subject,
            body=note if note.strip() != headline else "",
            trailers={"Relay-Goal": self.s.goal_id, "Relay-Round": str(rnd.n)},
            author_name=self.s.config.git.author_name,
            author_email=self.s.config.git.author_email,
        )
        self.s.store.end_round(self.s.goal_id, rnd.n, commit_sha=sha)
        if self.s.config.git.push and self.goal.branch:
            try:  # never forced: a rejected push is reported, and the work stays committed
                self.s.git.push(self.goal.branch)
            except RelayError as exc:
                self._event("push_failed", rnd.n, str(exc))
        fields: dict[str, Any] = {
            "rounds": self.counters.rounds,
            "counted_rounds": self.counters.counted_rounds,
            "no_progress_streak": self.counters.no_progress_streak,
            "blocked_reports": self.counters.blocked_reports,
            "auto_replies": self.counters.auto_replies,
            "elapsed_s": self.elapsed_s,
            "progress_text": self.progress_text,
        }
        self._save_final(stop, **fields)
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        self.s.store.add_event(
            self.s.goal_id,
            "round_ended",
            f"{stop.reason if stop else rnd.end_reason}; {rnd.steps} steps, "
            f"{rnd.tool_calls} tool calls; changed: {shown or 'nothing'}; commit {sha[:7]}",
            run_id=self.s.run_id,
            round_n=rnd.n,
        )
        self.s.display.round_ended(rnd.n, stop.reason if stop else rnd.end_reason, sha)

    def _warn_budgets(self, round_n: int | None) -> None:
        """Warn once per run, at its start (for a goal with history) or after its first round,
        when the spending so far projects past a budget before the round limit (SPEC §7.4)."""
        goal = self._goal()
        if goal.rounds == 0:
            if not any(
                (
                    self.budgets.token_budget,
                    self.budgets.time_budget_s,
                    self.budgets.cost_budget_usd,
                )
            ):
                self._event(
                    "warning",
                    None,
                    "no token, time or cost budget is set: spending is capped only by the round "
                    f"limits ({self.limits.max_rounds_total} rounds of at most "
                    f"{self.s.config.limits.max_steps_per_round} model calls)",
                )
            return
        self._outlook_given = True
        for text in budget_outlook(
            self.budgets,
            tokens=goal.uncached_input + goal.cache_write + goal.output,
            elapsed_s=self.elapsed_s,
            cost_usd=goal.cost_usd,
            rounds_done=goal.rounds,
            rounds_left=self.limits.max_rounds_total - self.counters.counted_rounds,
        ):
            self._event("budget_warning", round_n, text)

    def _repair_repo(self, rnd: RoundState, changed: list[str]) -> Stop | None:
        """Undo what the round's commands did to git's state (:mod:`relay.repo_guard`): each
        repair is ``tamper``; a repository relay cannot put back ends the goal."""
        if not self.tool_ctx.sandbox.active and stop_escaped(self.s.run_id):
            self._tamper(rnd, "processes of a shell command outlived the round; stopped")
        repair = self.repo_guard.end_round(changed)
        for detail in repair.findings:
            self._tamper(rnd, detail)
        if repair.problem is None:
            return None
        return Stop(
            GoalStatus.TERMINATED,
            "tamper",
            f"The model changed the repository's git state and relay could not put it back "
            f"({repair.problem}). Check the repository, then `relay resume`.",
        )

    def _repair_after_command(self, rnd: RoundState) -> None:
        """Without the sandbox, after each model command: stop its processes that escaped
        relay's reaper, and restore git's configuration."""
        if self.tool_ctx.sandbox.active:
            return  # .git is read-only inside the sandbox, and nothing outlives a call
        escaped = stop_escaped(self.s.run_id)
        if escaped:
            self._tamper(
                rnd,
                f"{len(escaped)} process(es) of a shell command outlived it (they killed "
                "relay's reaper); stopped",
            )
        repair = self.repo_guard.after_command()
        for detail in repair.findings:
            self._tamper(rnd, detail)
        if repair.problem:
            self._tamper(rnd, repair.problem)

    def _apply_guard(self, rnd: RoundState, files: list[str]) -> Stop | None:
        """Run the guard on the finished round (SPEC §8); store its events and score; return
        the ``terminated`` stop when the score reached the threshold."""
        self._restore_progress_if_changed(rnd)
        record = RoundRecord(
            n=rnd.n,
            actions=tuple(rnd.actions),
            handoff=rnd.handoff or "",
            files_changed=tuple(files),
            api_errors=tuple(rnd.api_errors),
            tamper=tuple(rnd.tamper),
            repeat_events=tuple(rnd.repeat_events),
        )
        goal = self._goal()

        def history() -> list[GuardEvent]:  # read only when a diagnosis is written
            return [
                GuardEvent(e["kind"], e["round"] or 0, e["detail"])
                for e in self.s.store.events(self.s.goal_id)
                if e["weight"] > 0
            ]

        decision = evaluate_round(
            record,
            self.guard_rounds,
            goal_text="\n".join([goal.text, *(s["text"] for s in goal.supplements)]),
            settings=self.guard,
            score=goal.risk_score,
            failure_streak=goal.failure_streak,
            history=history,
        )
        self.guard_rounds = [*self.guard_rounds, record][-self.guard.loop_window :]
        for event in decision.events:
            if event.kind in RECORDED_AS_THEY_HAPPEN:
                continue
            weight = self.guard.weights.get(event.kind, 0)
            self.s.store.add_event(
                self.s.goal_id,
                event.kind,
                event.detail,
                run_id=self.s.run_id,
                round_n=event.round,
                weight=weight,
            )
            self.s.display.event(event.kind, event.detail)
        fields: dict[str, Any] = {
            "risk_score": decision.score,
            "failure_streak": decision.failure_streak,
        }
        if decision.diagnosis:
            fields["diagnosis"] = decision.diagnosis
        self._save_final(None, **fields)
        if decision.diagnosis:
            return Stop(GoalStatus.TERMINATED, "guard", decision.diagnosis)
        return None

    def _guard_history(self) -> list[RoundRecord]:
        """The last ``loop_window`` rounds of the goal, from the store (for a resumed run)."""
        records = []
        rounds = self.s.store.rounds(self.s.goal_id)[-self.guard.loop_window :]
        for r in rounds:
            actions = tuple(
                Action(a["name"], a["arguments"], a.get("result_fp", ""), a["is_error"])
                for step in self.s.store.steps(self.s.goal_id, r["n"])
                for a in step["actions"]
                if a["name"] in tools.REAL_TOOLS
            )
            records.append(
                RoundRecord(
                    n=r["n"],
                    actions=actions,
                    handoff=r["handoff"] or "",
                    files_changed=tuple(r["files_changed"]),
                )
            )
        return records

    @property
    def elapsed_s(self) -> float:
        """Active time of the goal in seconds, this run included."""
        return self.s.base_elapsed_s + (time.monotonic() - self.started)

    def _goal(self) -> GoalRecord:
        """The goal's row, checked against what this loop wrote (SPEC §14): a guarded field
        or a status that no relay command set is restored and recorded as ``tamper``; the
        returned record carries relay's values."""
        findings: list[str] = []
        try:
            goal = self.s.store.goal(self.s.goal_id)
        except UnreadableGoalError as exc:
            frozen = ("deliverables", "limits", "overrides")
            self.s.store.restore_goal(
                self.s.goal_id, None, **{k: self.seal.expected[k] for k in frozen}
            )
            findings.append(f"{exc}; restored")
            goal = self.s.store.goal(self.s.goal_id)
        restore, changed = self.seal.check(goal)
        findings += changed
        if not self.ended and foreign_status(goal.status):
            restore.update(status="active", reason=None, message=None, question=None)
            findings.append(
                f"the goal's status was set to {goal.status} in relay's store behind its back "
                "(only relay's audit completes a goal); restored to active"
            )
        if not findings:
            return goal
        with contextlib.suppress(GoalStateError):
            self.s.store.restore_goal(self.s.goal_id, goal.status, **restore)
        for detail in findings:
            if self.current_round is not None:
                self._tamper(self.current_round, detail)
            else:
                self._event("tamper", None, detail)
        return replace(goal, **restore)

    def _save(self, **fields: Any) -> None:
        """Write goal fields while the goal is still active; a user's pause or clear from
        another process ends this run instead of being overwritten (SPEC §10). A status that
        no user command sets is restored first (:meth:`_goal`)."""
        for _ in range(5):
            try:
                self.s.store.update_goal(self.s.goal_id, "active", **fields)
                self.seal.wrote(fields)
                return
            except GoalStateError:
                current = self._goal()
                if current.status != GoalStatus.ACTIVE:
                    stop = Stop(
                        GoalStatus(current.status), current.reason or "user", current.message or ""
                    )
                    raise GoalEnded(stop) from None
        raise GoalStateError(f"goal {self.s.goal_id} keeps changing; its progress is not saved")

    def _save_final(self, stop: Stop | None, **fields: Any) -> None:
        """Write bookkeeping fields and, if the goal ends, its status. The user's word wins:
        when a pause or clear from another process changed the status, it is kept (the write
        names the status it saw, and is retried if it changed again meanwhile; SPEC §10)."""
        for _ in range(5):
            current = self._goal().status
            write = dict(fields)
            if stop is not None and current == GoalStatus.ACTIVE:
                write.update(
                    status=str(stop.status),
                    reason=stop.reason,
                    message=stop.message,
                    question=stop.message if stop.status == GoalStatus.NEEDS_USER_INPUT else None,
                )
            try:
                self.s.store.update_goal(self.s.goal_id, current, **write)
                self.seal.wrote(write)
                self.ended = self.ended or "status" in write
                return
            except GoalStateError:
                continue
        raise GoalStateError(f"goal {self.s.goal_id} keeps changing; its last round is not saved")

    # a round ----------------------------------------------------------------------------

    def _run_round(self, rnd: RoundState) -> None:
        self.round_api_errors = rnd.api_errors
        self.context.round_steps = 0
        self._take_supplements(rnd, self._goal())  # into the message
        self.context.start_round(self._round_message(rnd.n))
        system = self.s.prompts.render("system")
        overhead = len(system) + len(json.dumps([t.to_dict() for t in tools.WORKER_TOOLS]))
        for step in range(1, self.s.config.limits.max_steps_per_round + 1):
            self._step_boundary(rnd, step)
            rnd.steps = step
            request = Request(
                system=system,
                messages=self.context.visible(overhead),
                tools=tools.WORKER_TOOLS,
                tool_choice="required" if self.force_tool_choice else "auto",
            )
            response = self._call_model(request, rnd.n, step)
            self.s.display.step(rnd.n, step, response)
            notable = NOTABLE_STOPS.get(response.stop_reason)
            if notable:
                self._event("model_stop", rnd.n, f"step {step}: {notable}")
            self.context.append(Message("assistant", response.text, tool_calls=response.tool_calls))
            if not response.tool_calls:
                rnd.end_reason = "no_tool_call"
                self._record_step(rnd, step, response, [])
                return
            results, stop = self._run_tool_calls(rnd, response.tool_calls)
            self.context.append(*results)
            self._record_step(rnd, step, response, results)
            self._save(
                no_progress_streak=self.counters.no_progress_streak,
                blocked_reports=self.counters.blocked_reports,
                auto_replies=self.counters.auto_replies,
                elapsed_s=self.elapsed_s,
            )
            if stop is not None:
                raise GoalEnded(stop)
            if rnd.handoff is not None:
                rnd.end_reason = "handoff"
                return
            streak_stop = check_streak(self.counters, self.limits)
            if streak_stop is not None:
                raise GoalEnded(streak_stop)
        rnd.end_reason = "max_steps"

    def _round_message(self, n: int) -> str:
        goal = self._goal()
        counted = self.counters.counted_rounds + 1
        commits = self.s.git.recent_commits(self.s.config.git.log_commits)
        log = "\n".join(
            f"{c.short} {c.subject}" + (f" ({c.shortstat})" if c.shortstat else "") for c in commits
        )
        facts = RoundFacts(
            round=counted,
            goal_round=n,
            max_rounds=self.limits.max_rounds_total,
            remaining_warning=rounds_remaining_warning(counted, self.limits),
            goal=goal.text,
            supplements=tuple(goal.supplements),
            progress_path=self.s.progress_rel,
            progress=self.progress_text,
            git_log=log,
            git_status=self.s.git.status_short(),
            audit=format_audit(self.s.store.latest_audit(self.s.goal_id)),
        )
        if isinstance(self.context, SessionContext) and self.context.round_starts:
            return continuation_message(self.s.prompts, facts)
        return round_message(self.s.prompts, facts)

    def _step_boundary(self, rnd: RoundState, step: int) -> None:
        """Before every model call: a pause request or a user's status change ends the run
        (zero model calls while paused), new supplements restart the counts and reach the
        model, and a used-up budget makes the wrap-up step (SPEC §7.4, §10)."""
        goal = self._goal()
        stop = self._user_stop(goal)
        if stop is not None:
            raise GoalEnded(stop)
        goal = self._take_supplements(rnd, goal)
        self._check_budget(rnd, step, goal)

    def _user_stop(self, goal: GoalRecord | None = None) -> Stop | None:
        """The stop the user asked for: a status set from another process (pause, clear) or a
        signal to this one; None while the goal may go on. ``goal`` is the record if the
        caller has just read it (one read per step boundary)."""
        goal = goal or self._goal()
        if goal.status != GoalStatus.ACTIVE:
            return Stop(GoalStatus(goal.status), goal.reason or "user", goal.message or "")
        if self.s.interrupts.requested is not None:
            how = self.s.interrupts.describe()
            return Stop(
                GoalStatus.PAUSED, "user", f"Paused by {how}. `relay resume` continues the goal."
            )
        return None

    def _take_supplements(self, rnd: RoundState, goal: GoalRecord) -> GoalRecord:
        """Store supplements from the inbox and the goal file, and pass every new supplement
        (also from ``relay say``) to the model now; they restart the round counts (§7.2)."""
        if self.s.watcher is not None:
            for source, text in self.s.watcher.poll():
                self.s.store.add_supplement(self.s.goal_id, text, source)
                if source == "goal_file":
                    self._save(goal_file_digest=self.s.watcher.goal_digest)
            goal = self._goal()
        new = goal.supplements[self.known_supplements :]
        if not new:
            return goal
        self.known_supplements = len(goal.supplements)
        self.counters = self.counters.restarted()
        self._save(
            counted_rounds=self.counters.counted_rounds,
            no_progress_streak=0,
            blocked_reports=0,
        )
        for sup in new:
            self._event("supplement", rnd.n, f"({sup['source']}) {sup['text'][:200]}")
        if self.context.round_steps > 0:  # the round message already holds the earlier ones
            block = render_supplements(self.s.prompts, tuple(goal.supplements))
            self.context.append(
                Message(
                    "user",
                    "The user added to the goal while you were working. This is the user's "
                    f"latest word; the round counts restarted.\n\n{block}",
                )
            )
        return goal

    # model calls --------------------------------------------------------------------------

    def _call_model(self, request: Request, round_n: int, step: int) -> Response:
        """One step's model call with the error policy of SPEC §7.5–§7.6: forced tool choice
        falls back once; fatal errors stop the goal; transient ones are retried with
        exponential backoff and jitter, honouring ``Retry-After`` up to ``api_max_wait_s``."""
        limits = self.s.config.limits
        retries = 0
        while True:
            try:
                response = self.s.model.complete(request)
            except ForcedToolChoiceRejected as exc:
                self._transcript(round_n, step, request, error=exc)
                if request.tool_choice != "required":
                    raise GoalEnded(_failed(exc)) from None
                self.force_tool_choice = False
                request = replace(request, tool_choice="auto")
                self._event(
                    "warning",
                    round_n,
                    f"the model rejected forced tool choice (tool_choice required): {exc.message}; "
                    "forcing is off for the rest of the run",
                )
                continue
            except ModelError as exc:
                self._transcript(round_n, step, request, error=exc)
                self._event("api_errors", round_n, f"{exc.kind}: {exc.message}")
                if exc.transient:
                    self.round_api_errors.append(f"{exc.kind}: {exc.message}")
                if not exc.transient:
                    raise GoalEnded(_failed(exc)) from None
                if exc.retry_after_s is not None and exc.retry_after_s > limits.api_max_wait_s:
                    raise GoalEnded(
                        Stop(
                            GoalStatus.FAILED,
                            "rate_limited",
                            f"The provider asks to wait {exc.retry_after_s:.0f} s (more than "
                            f"api_max_wait_s = {limits.api_max_wait_s:.0f} s): {exc.message}. "
                            "Resume later with `relay resume`.",
                        )
                    ) from None
                retries += 1
                if retries > limits.api_retries:
                    raise GoalEnded(
                        Stop(
                            GoalStatus.FAILED,
                            "api_unavailable",
                            f"The model API failed {retries} times in a row ({exc.kind}: "
                            f"{exc.message}). Resume later with `relay resume`.",
                        )
                    ) from None
                self.s.sleep(self._backoff(retries, exc.retry_after_s))
                continue
            self._transcript(round_n, step, request, response=response)
            self._account(response.usage)
            return response

    def _backoff(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait before retry ``attempt`` (1-based): the provider's Retry-After if
        given, else ``api_backoff_s * 2**(attempt-1)`` times a random factor in [0.5, 1), capped at
        60 s."""
        if retry_after_s is not None:
            return retry_after_s
        base = self.s.config.limits.api_backoff_s * 2 ** (attempt - 1)
        return min(BACKOFF_CAP_S, base * (0.5 + random.random() / 2))

    def _account(self, usage: Usage) -> None:
        cost = cost_usd(usage, price_for(self.s.model.name, self.s.config.prices))
        self.s.store.add_usage(self.s.goal_id, usage.to_dict(), cost)
        self.seal.added_usage(usage.to_dict(), cost)

    def _transcript(
        self,
        round_n: int,
        step: int,
        request: Request,
        *,
        response: Response | None = None,
        error: ModelError | None = None,
    ) -> None:
        line: dict[str, Any] = {
            "round": round_n,
            "step": step,
            "mode": self.s.config.mode,
            "time": time.time(),
            "request": request.to_dict(),
        }
        if not isinstance(error, ForcedToolChoiceRejected):  # a rejection consumed nothing
            self.s.store.count_model_call(self.s.goal_id)
        wire = getattr(self.s.model, "last_wire", None)
        if wire is not None:  # --debug: the raw provider exchange, secrets redacted
            line["wire"] = wire
            self.s.model.last_wire = None  # type: ignore[attr-defined]
        if response is not None:
            line["response"] = response.to_dict()
        if error is not None:
            line["error"] = {"kind": error.kind, "message": error.message, "code": error.code}
        with self.transcript.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")

    # budgets ----------------------------------------------------------------------------

    def _check_budget(self, rnd: RoundState, step: int, goal: GoalRecord) -> None:
        """Before a step: when a budget is used up, make the one wrap-up step with no tools
        offered (SPEC §7.4) and end the goal as ``budget_limited``."""
        used = goal.uncached_input + goal.cache_write + goal.output
        stop = budget_reached(
            self.budgets, tokens=used, elapsed_s=self.elapsed_s, cost_usd=goal.cost_usd
        )
        if stop is None:
            return
        names = {"token_budget": "token budget", "time_budget": "time budget"}
        prompt = self.s.prompts.render(
            "wrap_up", budget=names.get(stop.reason, "cost budget"), detail=stop.message
        )
        request = Request(
            system=self.s.prompts.render("system"),
            messages=(*self.context.visible(), Message("user", prompt)),
            tools=(),
            tool_choice="none",
        )
        rnd.steps = step
        try:
            response = self.s.model.complete(request)
        except ModelError as exc:
            self._transcript(rnd.n, step, request, error=exc)
            raise GoalEnded(stop) from None
        self._transcript(rnd.n, step, request, response=response)
        self._account(response.usage)
        self._record_step(rnd, step, response, [])
        self.wrap_up_text = response.text.strip()
        if self.wrap_up_text:
            stop = replace(stop, message=f"{stop.message}\n\n{self.wrap_up_text}")
        raise GoalEnded(stop)

    # tool calls ---------------------------------------------------------------------------

    def _run_tool_calls(
        self, rnd: RoundState, calls: tuple[ToolCall, ...]
    ) -> tuple[list[Message], Stop | None]:
        """Run one response's tool calls: every other call first, then ``update_goal`` (alone:
        decided; with others: deferred). Results come back in the calls' order."""
        results: dict[str, Message] = {}
        stop: Stop | None = None
        alone = len(calls) == 1
        for call in calls:
            if self.s.interrupts.requested is not None:
                results[call.id] = Message(
                    "tool", "not run: the user paused the goal", tool_call_id=call.id, is_error=True
                )
            elif call.name != "update_goal":
                results[call.id] = self._run_call(rnd, call)
        for call in calls:
            if call.name == "update_goal" and call.id not in results:
                message, call_stop = self._update_goal(rnd, call, alone)
                results[call.id] = message
                stop = stop or call_stop
        rnd.tool_calls += len(calls)
        return [results[c.id] for c in calls], stop

    def _run_call(self, rnd: RoundState, call: ToolCall) -> Message:
        problem = tools.check_arguments(call.name, call.arguments)
        if problem is not None:
            result = ToolResult(problem, is_error=True)
        elif call.name == "handoff":
            rnd.handoff = str(call.arguments["note"]).strip() or "(empty handoff note)"
            result = ToolResult("handoff recorded; the round ends after this response")
        elif call.name == "get_goal":
            result = ToolResult(self._goal_summary())
        else:
            before = self._protected_snapshot() if call.name == "shell" else {}
            inbox_before = self.s.watcher.snapshot() if self.s.watcher else None
            result = tools.execute(call, self.tool_ctx)
            rnd.real_tool_calls += 1
            rnd.called_tools = True
            self.counters = after_real_tool_call(self.counters)
            if call.name == "shell":
                rnd.commands.append((str(call.arguments.get("command")), result.exit_code))
                self._restore_progress_if_changed(rnd)
                self._restore_protected(rnd, before)
                self._repair_after_command(rnd)
                self._reject_model_supplements(
                    rnd, inbox_before, str(call.arguments.get("command", ""))
                )
            action = Action(
                call.name, call.arguments, result_fingerprint(result.content), result.is_error
            )
            rnd.actions.append(action)
            nudge = rnd.repeats.observe(action) if rnd.repeats else None
            if nudge and "loop" in self.guard.detectors and self.guard.enabled:
                rnd.repeat_events.append(rnd.repeats.finding() if rnd.repeats else "")
                result = replace(result, content=f"{result.content}{NUDGE_MARK}{nudge}")
        if result.is_error:
            rnd.last_error = _error_line(call, result)
        self.s.display.tool_called(call, result.content, result.is_error)
        return Message("tool", result.content, tool_call_id=call.id, is_error=result.is_error)

    def _update_goal(
        self, rnd: RoundState, call: ToolCall, alone: bool
    ) -> tuple[Message, Stop | None]:
        rnd.called_tools = rnd.called_tools or alone  # a deferral is no step (SPEC §7.2)
        problem = tools.check_arguments(call.name, call.arguments)
        if problem is not None and alone:
            self.counters = after_rejected_update(self.counters)
            return Message(
                "tool", f"rejected: {problem}", tool_call_id=call.id, is_error=True
            ), None
        auto = (
            self.s.config.auto_reply if self.s.config.on_needs_user_input == "auto_reply" else None
        )
        decision = review_update_goal(
            call.arguments, alone=alone, counters=self.counters, limits=self.limits, auto_reply=auto
        )
        if decision.verdict == Verdict.AUDIT:
            audit = self.audit(call.arguments.get("checklist") or [], rnd.n, rnd)
            decision = review_audit(
                audit.passed,
                audit.failures_text(),
                str(call.arguments.get("summary") or ""),
                decision.counters,
            )
        elif decision.verdict == Verdict.AUTO_REPLY:
            self._event("auto_reply", rnd.n, str(call.arguments.get("question") or ""))
        self.counters = decision.counters
        self._event(
            "update_goal",
            rnd.n,
            f"{call.arguments.get('status')}: {decision.verdict} — {decision.message.splitlines()[0]}",
        )
        is_error = decision.verdict == Verdict.REJECTED
        self.s.display.tool_called(call, decision.message, is_error)
        return (
            Message("tool", decision.message, tool_call_id=call.id, is_error=is_error),
            decision.stop,
        )

    def audit(
        self, checklist: list[dict[str, Any]], round_n: int | None, rnd: RoundState | None = None
    ) -> AuditResult:
        """Run the completion audit now and store its result (SPEC §9). Each tamper finding
        (step 4) is also a ``tamper`` guard event, once per goal."""
        from relay.tamper import goal_baseline

        goal = self._goal()
        baseline = goal_baseline(
            self.s.git,
            goal.base_commit,
            protected=self.s.protected_paths,
            progress_rel=self.s.progress_rel,
            goal_file=goal.goal_file,
            goal_file_digest=goal.goal_file_digest,
            started_at=goal.created_at,
        )
        protected_before = self._protected_snapshot()  # the audit runs model-written code
        result = run_audit(
            self.root,
            self.deliverables,
            run_command=shell_runner(self.tool_ctx, self.s.config.audit.evidence_chars),
            tool_ctx=self.tool_ctx,
            checklist=[c for c in checklist if isinstance(c, dict)],
            repo_files=self.s.git.files,
            default_timeout_s=self.s.config.audit.command_timeout_s,
            evidence_chars=self.s.config.audit.evidence_chars,
            baseline=baseline,
        )
        if rnd is not None:  # the audit's commands ran model-written code
            self._restore_progress_if_changed(rnd)
            self._restore_protected(rnd, protected_before)
            self._repair_after_command(rnd)
        self.s.store.add_audit(
            self.s.goal_id, round_n, result.passed, [c.to_dict() for c in result.checks]
        )
        known = {e["detail"] for e in self.s.store.events(self.s.goal_id) if e["kind"] == "tamper"}
        for check in result.checks:
            detail = f"audit: {check.evidence.splitlines()[0]}" if check.evidence else ""
            if check.kind == "tamper" and not check.passed and detail not in known:
                known.add(detail)
                if rnd is not None:  # scored by the guard at the round's end
                    self._tamper(rnd, detail)
                else:
                    self._event("tamper", round_n, detail)
        return result

    def _goal_summary(self) -> str:
        goal = self._goal()
        lines = [
            "Goal (the user's words):",
            goal.text.strip(),
        ]
        for i, s in enumerate(goal.supplements, 1):
            lines.append(f"Supplement {i} ({s['source']}): {s['text'].strip()}")
        used = goal.uncached_input + goal.cache_write + goal.output
        budget = self.budgets.token_budget
        lines += [
            f"Status: {goal.status}",
            f"Round {self.counters.counted_rounds + 1} of {self.limits.max_rounds_total}",
            f"No-progress streak: {self.counters.no_progress_streak} of "
            f"{self.limits.max_rounds_without_progress}",
            f"Blocked reports: {self.counters.blocked_reports} "
            f"(accepted at {self.limits.blocked_accept_at})",
            f"Tokens used: {used}" + (f" of {budget}" if budget else " (no token budget)"),
            f"Time used: {self.elapsed_s:.0f} s"
            + (f" of {self.budgets.time_budget_s:.0f} s" if self.budgets.time_budget_s else ""),
            "Latest audit: " + format_audit(self.s.store.latest_audit(self.s.goal_id)),
        ]
        return "\n".join(lines)

    # records ----------------------------------------------------------------------------

    def _record_step(
        self, rnd: RoundState, step: int, response: Response, results: list[Message]
    ) -> None:
        by_id = {m.tool_call_id: m for m in results}
        actions = []
        for call in response.tool_calls:
            res = by_id.get(call.id)
            actions.append(
                {
                    "name": call.name,
                    "arguments": call.arguments,
                    "is_error": bool(res and res.is_error),
                    "result": (res.content[:2000] if res else ""),
                    # the fingerprint the guard saw live: without relay's repeat nudge
                    "result_fp": result_fingerprint(res.content.split(NUDGE_MARK, 1)[0])
                    if res
                    else "",
                }
            )
        self.s.store.add_step(
            self.s.goal_id,
            self.s.run_id,
            rnd.n,
            step,
            text=response.text,
            actions=actions,
            usage=response.usage.to_dict(),
        )

    def _event(self, kind: str, round_n: int | None, detail: str) -> None:
        """Record an event; a guard event kind carries its weight when its detector is on."""
        weight = 0
        if self.guard.enabled and kind in self.guard.detectors:
            weight = self.guard.weights.get(kind, 0)
        self.s.store.add_event(
            self.s.goal_id, kind, detail, run_id=self.s.run_id, round_n=round_n, weight=weight
        )
        self.s.display.event(kind, detail)

    def _auto_handoff(self, rnd: RoundState, files: list[str]) -> str:
        """The handoff written from facts when the model wrote none (SPEC §4): commands run
        with exit codes, files changed, the last error."""
        shown_files = ", ".join(files[:5]) + (
            f" and {len(files) - 5} more" if len(files) > 5 else ""
        )
        calls = f"{rnd.tool_calls} tool call{'s' if rnd.tool_calls != 1 else ''}"
        summary = f"{calls}, " + (f"changed {shown_files}" if files else "no file changed")
        lines = []
        if rnd.commands:
            lines.append("Commands run:")
            for command, code in rnd.commands[-10:]:
                shown = command if len(command) <= 120 else command[:119] + "…"
                lines.append(f"- `{shown}` → exit {code if code is not None else 'none'}")
        else:
            lines.append("No commands run.")
        lines.append("Files changed: " + (", ".join(files[:20]) if files else "none"))
        if rnd.last_error:
            lines.append(f"Last error: {rnd.last_error}")
        return self.s.prompts.render(
            "auto_handoff", summary=summary, facts="\n".join(lines)
        ).strip()

    # progress file ------------------------------------------------------------------------

    def _write_progress(self, final: Stop | None) -> None:
        goal = self._goal()
        keep = self.s.config.progress.keep_rounds
        entries, earlier = round_entries(self.s.store, self.s.goal_id, keep)
        status = f"{final.status} ({final.reason})" if final else "active"
        text = render_progress(
            goal=goal.text,
            supplements=goal.supplements,
            deliverables=goal.deliverables,
            audit=self.s.store.latest_audit(self.s.goal_id),
            rounds=entries,
            earlier=earlier,
            keep_rounds=keep,
            max_chars=self.s.config.progress.max_chars,
            wrap_up=self.wrap_up_text,
            status=status,
            goal_id=self.s.goal_id,
        )
        self._put_progress(text)
        self.progress_text = text
        final_fields: dict[str, Any] = {  # the counters as this round leaves them
            "rounds": self.counters.rounds,
            "counted_rounds": self.counters.counted_rounds,
            "no_progress_streak": self.counters.no_progress_streak,
            "blocked_reports": self.counters.blocked_reports,
            "auto_replies": self.counters.auto_replies,
            "elapsed_s": self.elapsed_s,
        }
        if final is not None:
            final_fields.update(
                status=str(final.status), reason=final.reason, message=final.message
            )
        state = goal_state.dumps(
            goal_state.goal_state(self.s.store, self.s.goal_id, keep_rounds=keep, **final_fields)
        )
        self._put_own(self.goal_state_path, state)

    def _put_progress(self, text: str) -> None:
        """Write the progress file atomically (a crash never leaves half a file)."""
        self._put_own(self.progress_path, text)

    def _put_own(self, path: Path, text: str) -> None:
        """Write one of relay's own files of the tree (progress file, goal state) as a new
        file, inside the tree: a symlink, a file or a folder the model put at its place or at
        the place of a folder above it (``.relay`` -> elsewhere) is removed first, so that relay
        never writes outside the repository (SPEC §14)."""
        own_folder(self.root, path.parent)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_symlink():
            path.unlink()
        replace_file(path, text.encode("utf-8"))

    def _restore_progress_if_changed(self, rnd: RoundState) -> None:
        """Restore the progress file when something changed it behind the orchestrator's back
        and record a ``tamper`` event (SPEC §6, §8)."""
        current = read_regular_text(self.progress_path)  # a planted FIFO never blocks
        if current == self.progress_text and not self.progress_path.is_symlink():
            return
        self._put_progress(self.progress_text)
        self._tamper(
            rnd,
            f"the progress file {self.s.progress_rel} was changed behind the orchestrator's "
            "back; restored",
        )

    def _tamper(self, rnd: RoundState, detail: str) -> None:
        rnd.tamper.append(detail)
        self._event("tamper", rnd.n, detail)

    def _reject_model_supplements(
        self, rnd: RoundState, before: tuple[frozenset[str], str | None] | None, command: str
    ) -> None:
        """Inbox files and goal-file edits made by a shell command that names them are the
        model's, not the user's: they never become supplements (which would restart the round
        limits). Nothing is deleted; it is set aside and reported as ``tamper``."""
        if self.s.watcher is None or before is None:
            return
        sandboxed = self.tool_ctx.sandbox.active
        for what in self.s.watcher.disown_changes_since(before, command, sandboxed=sandboxed):
            self._tamper(
                rnd,
                f"{what} changed while a shell command ran; not taken as a supplement "
                "(if it was you, use relay say)",
            )

    def _protected_snapshot(self) -> dict[Path, tuple[str, bytes | str | None, str]]:
        """What every protected path named literally (no glob) is before a shell call: a
        file's bytes, a symlink's target, or absent; and where its folder really is.

        The goal file is left out: an edit of it is a supplement question
        (:meth:`_reject_model_supplements`), never undone, so no user edit is lost."""
        snap: dict[Path, tuple[str, bytes | str | None, str]] = {}
        goal_file = self.goal.goal_file
        for entry in self.s.protected_paths:
            if any(ch in entry for ch in "*?[") or entry == self.s.progress_rel:
                continue
            if entry == goal_file:
                continue
            path = self.root / entry
            snap[path] = (*_path_state(path), os.path.realpath(path.parent))
        return snap

    def _restore_protected(
        self, rnd: RoundState, before: dict[Path, tuple[str, bytes | str | None, str]]
    ) -> None:
        """Undo a shell command's change to a protected path and record ``tamper`` (§5, §8).
        Nothing is written through a symlink or a hard link the command put there, also not
        through a folder it replaced by a symlink (the symlink itself is removed)."""
        for path, (kind, value, folder) in before.items():
            moved = os.path.realpath(path.parent) != folder
            if moved:
                own_folder(self.root, path.parent, create=False)
            if not moved and _path_state(path) == (kind, value):
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                path.unlink(missing_ok=True)
            if kind in ("file", "link"):
                own_folder(self.root, path.parent)
            if kind == "file" and isinstance(value, bytes):
                replace_file(path, value)
            elif kind == "link" and isinstance(value, str):
                os.symlink(value, path)
            rel = path.relative_to(self.root).as_posix()
            if kind == "dir":  # a folder's content is not kept: the audit compares it with git
                what = "the audit compares it with the base commit"
                self._tamper(rnd, f"a shell command changed the protected folder {rel}; {what}")
            else:
                self._tamper(rnd, f"a shell command changed the protected file {rel}; restored")


def _path_state(path: Path) -> tuple[str, bytes | str | None]:
    """``("file", bytes)``, ``("link", target)``, ``("dir", None)`` or ``("none", None)``."""
    try:
        if path.is_symlink():
            return ("link", os.readlink(path))
        if path.is_file():
            return ("file", path.read_bytes())
        if path.is_dir():
            return ("dir", None)
    except OSError:
        pass
    return ("none", None)


def _error_line(call: ToolCall, result: ToolResult) -> str:
    """One line naming a failed tool call and its outcome, for the automatic handoff."""
    lines = [
        ln.strip() for ln in result.content.splitlines() if ln.strip() and not ln.startswith("---")
    ]
    if call.name == "shell":
        command = " ".join(str(call.arguments.get("command", "")).split())[:100]
        last = lines[-1][:200] if len(lines) > 1 else ""
        return f"`{command}` → {lines[0] if lines else 'failed'}" + (f": {last}" if last else "")
    return f"{call.name}: {lines[0][:250] if lines else 'failed'}"


def _failed(exc: ModelError) -> Stop:
    reason = "quota" if exc.kind == "insufficient_quota" else exc.kind
    return Stop(GoalStatus.FAILED, reason, f"Model call failed ({exc.kind}): {exc.message}")
