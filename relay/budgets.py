"""The budgets: pure policy of when spending ends a goal (SPEC §7.4).

No I/O here. :class:`relay.budget_watch.BudgetWatch` applies these rules to the running goal:
:func:`budget_reached` decides the stop, :func:`budget_outlook` the warning before it.
"""

from __future__ import annotations

from dataclasses import dataclass

from relay.goal import GoalStatus
from relay.supervisor import Stop


@dataclass(frozen=True)
class BudgetPolicy:
    """Budgets of a goal (SPEC §7.4); None means no such budget.

    Units: ``token_budget`` tokens (uncached input + cache writes + output), ``time_budget_s``
    seconds of wall time while active, ``cost_budget_usd`` US dollars.
    """

    token_budget: int | None = None
    time_budget_s: float | None = None
    cost_budget_usd: float | None = None


def budget_reached(
    policy: BudgetPolicy, *, tokens: int, elapsed_s: float, cost_usd: float
) -> Stop | None:
    """The budget stop when a budget is used up (used ≥ budget), else None (SPEC §7.4)."""
    if policy.token_budget is not None and tokens >= policy.token_budget:
        return Stop(
            GoalStatus.BUDGET_LIMITED,
            "token_budget",
            f"Token budget used up: {tokens:,} of {policy.token_budget:,} tokens (uncached "
            "input + cache writes + output; cache reads are not counted).",
        )
    if policy.time_budget_s is not None and elapsed_s >= policy.time_budget_s:
        return Stop(
            GoalStatus.BUDGET_LIMITED,
            "time_budget",
            f"Time budget used up: {elapsed_s:.0f} of {policy.time_budget_s:.0f} s.",
        )
    if policy.cost_budget_usd is not None and cost_usd >= policy.cost_budget_usd:
        return Stop(
            GoalStatus.BUDGET_LIMITED,
            "cost_budget",
            f"Cost budget used up: ${cost_usd:.4f} of ${policy.cost_budget_usd:.2f}.",
        )
    return None


def budget_outlook(
    policy: BudgetPolicy,
    *,
    tokens: int,
    elapsed_s: float,
    cost_usd: float,
    rounds_done: int,
    rounds_left: int,
) -> list[str]:
    """Warnings for budgets that the spending so far projects to run out before the round
    limit (SPEC §7.4): at the average per round of the ``rounds_done`` rounds, each budget
    lasts some number of rounds; a warning names every budget that lasts fewer than
    ``rounds_left`` more rounds. Empty before the first round."""
    if rounds_done <= 0 or rounds_left <= 0:
        return []
    warnings = []
    for name, used, budget, unit in (
        ("token budget", float(tokens), policy.token_budget, "tokens"),
        ("time budget", elapsed_s, policy.time_budget_s, "s"),
        ("cost budget", cost_usd, policy.cost_budget_usd, "USD"),
    ):
        if budget is None or used <= 0:
            continue
        per_round = used / rounds_done
        lasts = max(0, int((budget - used) // per_round))
        if lasts < rounds_left:
            warnings.append(
                f"at {per_round:,.4g} {unit} per round, the {name} ({budget:,.6g} {unit}) lasts "
                f"about {lasts} more round{'s' if lasts != 1 else ''}, fewer than the "
                f"{rounds_left} the round limit allows"
            )
    return warnings
