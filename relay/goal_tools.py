"""The goal tools (SPEC §5, §7.1, §9): ``handoff``, ``get_goal`` and ``update_goal``, answered
by relay itself; ``complete`` runs the completion audit."""

from __future__ import annotations

from typing import Any

from relay.audit import AuditResult, audit_commit, shell_runner
from relay.budgets import BudgetPolicy
from relay.config import Config, Deliverable
from relay.context import format_audit
from relay.current_goal import CurrentGoal
from relay.gitrepo import GitRepo
from relay.loop_state import EventLog, RoundState
from relay.loop_texts import goal_summary
from relay.models.base import Message, ToolCall
from relay.repairs import Repairs
from relay.supervisor import (
    LimitPolicy,
    Stop,
    Verdict,
    after_rejected_update,
    review_audit,
    review_update_goal,
)
from relay.tools import ToolContext, ToolResult, check_arguments


class GoalTools:
    """Answers the goal tools of one run.

    Args:
        goal: the goal.
        git: the repository (the audit's baseline and file list).
        config: the run's configuration.
        limits, budgets: the supervisor's limits and the budgets.
        tool_ctx: where the audit's commands run.
        repairs: the repairs after the audit's commands (they run model-written code).
        events: the event log.
        protected_paths: the protected entries; ``progress_rel`` the progress file.
    """

    def __init__(
        self,
        goal: CurrentGoal,
        git: GitRepo,
        config: Config,
        *,
        limits: LimitPolicy,
        budgets: BudgetPolicy,
        tool_ctx: ToolContext,
        repairs: Repairs,
        events: EventLog,
        protected_paths: tuple[str, ...],
        progress_rel: str,
    ) -> None:
        self.goal = goal
        self.git = git
        self.config = config
        self.limits = limits
        self.budgets = budgets
        self.tool_ctx = tool_ctx
        self.repairs = repairs
        self.events = events
        self.protected_paths = protected_paths
        self.progress_rel = progress_rel
        self.deliverables = [Deliverable.model_validate(d) for d in goal.value.deliverables]

    def handoff(self, rnd: RoundState, call: ToolCall) -> ToolResult:
        """Record the round's handoff note; the round ends after this response (SPEC §4)."""
        rnd.handoff = str(call.arguments["note"]).strip() or "(empty handoff note)"
        return ToolResult("handoff recorded; the round ends after this response")

    def get_goal(self, rnd: RoundState) -> ToolResult:
        """The goal, its supplements, counters, budgets and the latest audit (SPEC §5)."""
        text = goal_summary(
            self.goal.value,
            rnd.counters,
            self.limits,
            self.budgets,
            tokens_used=self.goal.tokens_used,
            elapsed_s=self.goal.elapsed_s,
            audit=format_audit(self.goal.store.latest_audit(self.goal.goal_id)),
        )
        return ToolResult(text)

    def update_goal(
        self, rnd: RoundState, call: ToolCall, alone: bool
    ) -> tuple[Message, Stop | None]:
        """The supervisor's answer to ``update_goal`` (SPEC §7.1): deferred when sent with other
        calls, else reviewed (``complete`` after the audit). Returns the tool result and the
        stop when the goal ends."""
        rnd.called_tools = rnd.called_tools or alone  # a deferral is no step (SPEC §7.2)
        problem = check_arguments(call.name, call.arguments)
        if problem is not None and alone:
            rnd.counters = after_rejected_update(rnd.counters)
            text = f"rejected: {problem}"
            self.events.add("update_goal", rnd.n, f"{call.arguments.get('status')}: {text}")
            self.events.display.tool_called(call, text, True)
            return Message("tool", text, tool_call_id=call.id, is_error=True), None
        auto = self.config.auto_reply if self.config.on_needs_user_input == "auto_reply" else None
        decision = review_update_goal(
            call.arguments, alone=alone, counters=rnd.counters, limits=self.limits, auto_reply=auto
        )
        if decision.verdict == Verdict.AUDIT:
            self.goal.add_claim(rnd.n, call.arguments)  # audited again after a kill
            audit = self.audit(call.arguments.get("checklist") or [], rnd)
            decision = review_audit(
                audit.passed,
                audit.failures_text(),
                str(call.arguments.get("summary") or ""),
                decision.counters,
            )
        elif decision.verdict == Verdict.AUTO_REPLY:
            self.events.add("auto_reply", rnd.n, str(call.arguments.get("question") or ""))
        rnd.counters = decision.counters
        first = decision.message.splitlines()[0]
        said = first if first.startswith(str(decision.verdict)) else f"{decision.verdict} — {first}"
        self.events.add("update_goal", rnd.n, f"{call.arguments.get('status')}: {said}")
        is_error = decision.verdict == Verdict.REJECTED
        self.events.display.tool_called(call, decision.message, is_error)
        message = Message("tool", decision.message, tool_call_id=call.id, is_error=is_error)
        return message, decision.stop

    def audit(self, checklist: list[dict[str, Any]], rnd: RoundState) -> AuditResult:
        """Run the completion audit now and store its result (SPEC §9). Each tamper finding
        (step 4) is also a ``tamper`` guard event of the round, once per goal; suspicious code
        accepted under ``audit.suspicious: warn`` is a ``warning`` event."""
        from relay.tamper import goal_baseline

        goal = self.goal.value
        baseline = goal_baseline(
            self.git,
            goal.base_commit,
            protected=self.protected_paths,
            progress_rel=self.progress_rel,
            goal_file=goal.goal_file,
            goal_file_digest=goal.goal_file_digest,
            started_at=goal.created_at,
        )
        before = self.repairs.before(goal.goal_file, shell=False)  # model-written code runs
        result = audit_commit(
            self.git.root,
            self.deliverables,
            shell=shell_runner(self.tool_ctx, self.config.audit.evidence_chars),
            tool_ctx=self.tool_ctx,
            checklist=[c for c in checklist if isinstance(c, dict)],
            repo_files=self.git.files,
            default_timeout_s=self.config.audit.command_timeout_s,
            evidence_chars=self.config.audit.evidence_chars,
            suspicious=self.config.audit.suspicious,
            baseline=baseline,
        )
        self.repairs.after_code(before)
        store, goal_id = self.goal.store, self.goal.goal_id
        store.add_audit(goal_id, rnd.n, result.passed, [c.to_dict() for c in result.checks])
        known = {e["detail"] for e in store.events(goal_id) if e["kind"] == "tamper"}
        for check in result.checks:
            detail = f"audit: {check.evidence.splitlines()[0]}" if check.evidence else ""
            if check.kind == "tamper" and not check.passed and detail not in known:
                known.add(detail)
                self.events.tamper(detail)
            elif check.kind == "suspicious" and check.passed:  # audit.suspicious: warn
                self.events.add("warning", rnd.n, detail)
        return result
