"""The budgets of a running goal (SPEC §7.4): used up before a model call, used up already when
a run starts, and the warning when the spending so far runs out before the round limit.

The rules are pure (:func:`relay.budgets.budget_reached`,
:func:`relay.budgets.budget_outlook`); this unit applies them to the current goal. The time
budget is also enforced by the run's watchdog (:mod:`relay.watchdog`), a process the model's
commands cannot stop: when it says the time is up (:attr:`Interrupts.time_up`), the time budget
counts as used up whatever relay's own clock says, and its notes become the run's events.
"""

from __future__ import annotations

from dataclasses import replace

from relay.budgets import BudgetPolicy, budget_outlook, budget_reached
from relay.config_sections import Limits
from relay.context import Prompts
from relay.current_goal import CurrentGoal
from relay.interrupts import Interrupts
from relay.loop_state import EventLog
from relay.supervisor import Counters, LimitPolicy, Stop
from relay.text import counted

BUDGET_NAMES = {"token_budget": "token budget", "time_budget": "time budget"}
"""The budget a stop's reason names, in words (the wrap-up prompt); else the cost budget."""


class BudgetWatch:
    """Applies ``budgets`` to ``goal`` (its usage and active time).

    ``max_steps`` is ``limits.max_steps_per_round`` (named in the warning without budgets);
    ``interrupts`` the run's signals (the watchdog's time-up, :mod:`relay.watchdog`).
    """

    def __init__(
        self,
        budgets: BudgetPolicy,
        limits: LimitPolicy,
        max_steps: int,
        goal: CurrentGoal,
        events: EventLog,
        interrupts: Interrupts | None = None,
    ) -> None:
        self.budgets = budgets
        self.limits = limits
        self.max_steps = max_steps
        self.goal = goal
        self.events = events
        self.interrupts = interrupts
        self.outlook_given = False

    @classmethod
    def of(
        cls, lim: Limits, limits: LimitPolicy, goal: CurrentGoal, events: EventLog, ints: Interrupts
    ) -> BudgetWatch:
        """The watch of the configured limits ``lim`` (``limits``: their round policy)."""
        budgets = BudgetPolicy(lim.token_budget, lim.time_budget, lim.cost_budget)
        return cls(budgets, limits, lim.max_steps_per_round, goal, events, ints)

    def spent(self) -> Stop | None:
        """The budget stop when a budget is used up (used ≥ budget), else None. The time
        budget is used up also when the watchdog said so; its notes are recorded first."""
        elapsed = self.goal.elapsed_s
        ints, time_budget = self.interrupts, self.budgets.time_budget_s
        if ints is not None:
            dog = ints.watchdog
            rnd = self.events.round
            for note in dog.take_notes() if dog is not None else ():
                self.events.add("watchdog", rnd.n if rnd is not None else None, note)
            if ints.time_up and time_budget is not None:
                elapsed = max(elapsed, time_budget)
        return budget_reached(
            self.budgets,
            tokens=self.goal.tokens_used,
            elapsed_s=elapsed,
            cost_usd=self.goal.value.cost_usd,
        )

    def spent_before_start(self) -> Stop | None:
        """The stop of a goal resumed without raising its used-up budget: no model call, no
        second wrap-up, nothing written to the tree (it stays clean)."""
        spent = self.spent()
        if spent is None:
            return None
        return replace(
            spent,
            message=f"{spent.message} Raise limits.{spent.reason} (relay.yaml or its flag), "
            "then `relay resume`.",
        )

    def wrap_up_prompt(self, prompts: Prompts, spent: Stop) -> str:
        """The wrap-up step's message (``spent``: the budget's stop)."""
        budget = BUDGET_NAMES.get(spent.reason, "cost budget")
        return prompts.render("wrap_up", budget=budget, detail=spent.message)

    def warn(self, round_n: int | None, counters: Counters) -> None:
        """Warn once per run, at its start (for a goal with history) or after its first round,
        when the spending so far projects past a budget before the round limit; at the start
        of a new goal, when no budget is set at all."""
        if self.outlook_given:
            return
        goal = self.goal.value
        budgets = self.budgets
        if goal.rounds == 0:
            if not any((budgets.token_budget, budgets.time_budget_s, budgets.cost_budget_usd)):
                self.events.add(
                    "warning",
                    None,
                    "no token, time or cost budget is set: spending is capped only by the round "
                    f"limits ({counted(self.limits.max_rounds_total, 'round')} of at most "
                    f"{counted(self.max_steps, 'model call')})",
                )
            return
        self.outlook_given = True
        for text in budget_outlook(
            budgets,
            tokens=self.goal.tokens_used,
            elapsed_s=self.goal.elapsed_s,
            cost_usd=goal.cost_usd,
            rounds_done=goal.rounds,
            rounds_left=self.limits.max_rounds_total - counters.counted_rounds,
        ):
            self.events.add("budget_warning", round_n, text)
