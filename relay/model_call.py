"""The one path of every model call of a goal (SPEC §7.4–§7.6, §12).

Each call, the budget wrap-up included, goes through :meth:`ModelCaller.call`: the transcript
line, the call count, the usage and cost, the forced-tool-choice fallback, and the retry
decision of :func:`relay.retry.retry_wait` for a failed call. The call and a retry's wait give
way to a pause request at once (:mod:`relay.interrupts`; issue 14): an abandoned call is a
transcript line with the error kind ``interrupted`` and an ``interrupted`` event, its usage
unknown; it is not counted in the goal's model calls, so that a scripted model makes that step
again on resume (SPEC §13).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from relay.current_goal import CurrentGoal
from relay.errors import ForcedToolChoiceRejected, ModelError
from relay.interrupts import Interrupted, Interrupts
from relay.loop_state import EventLog, GoalEnded, RoundState
from relay.models.base import Model, Request, Response, response_problem
from relay.prices import cost_usd, price_for
from relay.retry import RetryPolicy, failed_stop, retry_wait
from relay.supervisor import Stop
from relay.transcript import Transcript


class ModelCaller:
    """Calls the model for the steps of one run.

    Args:
        model: the model.
        goal: the goal (usage and the call count are added to it).
        events: where API errors and the forced-tool-choice fallback are recorded.
        transcript: the run's transcript.
        policy: the retry policy.
        prices: the configured prices (``prices`` of relay.yaml).
        force_tool_choice: whether steps force tool use (``force_tool_choice``); turned off
            for the rest of the run when the provider rejects it (SPEC §7.5).
        sleep: waits that many seconds (injectable for tests); a pause request ends the
            wait at once.
        rng: the random source of the backoff's jitter.
        interrupts: the run's pause request (a fresh one when not given).
        over_budget: the budget's stop when a budget is used up, else None
            (:meth:`relay.budget_watch.BudgetWatch.spent`): asked after each transient
            failure, so that calls that keep timing out end at the time budget (SPEC §7.4)
            instead of being retried past it.
    """

    def __init__(
        self,
        model: Model,
        goal: CurrentGoal,
        events: EventLog,
        transcript: Transcript,
        *,
        policy: RetryPolicy,
        prices: Any,
        force_tool_choice: bool,
        sleep: Callable[[float], None],
        rng: random.Random,
        interrupts: Interrupts | None = None,
        over_budget: Callable[[], Stop | None] = lambda: None,
    ) -> None:
        self.model = model
        self.goal = goal
        self.events = events
        self.transcript = transcript
        self.policy = policy
        self.price = price_for(model.name, prices)
        self.force_tool_choice = force_tool_choice
        self.sleep = sleep
        self.rng = rng
        self.interrupts = interrupts or Interrupts()
        self.over_budget = over_budget

    def call(
        self,
        request: Request,
        rnd: RoundState,
        step: int,
    ) -> Response:
        """Send ``request`` for step ``step`` of round ``rnd``; returns the response.

        Every attempt is a line of the transcript. A transient failure is recorded (an
        ``api_errors`` event, also scored by the guard) and retried after the policy's wait.

        Raises:
            GoalEnded: the call failed for good (``failed``: fatal error, ``rate_limited``,
                ``api_unavailable``; SPEC §7.6).
            Interrupted: a pause was requested before, during or between the attempts (a
                call in flight is abandoned and recorded as interrupted).
                ``api_unavailable``; SPEC §7.6), or a budget was used up while it was being
                retried (the budget's stop, ``budget_limited``; SPEC §7.4).
        """
        attempt = 0
        while True:
            try:
                response = self._attempt(request, rnd.n, step)
            except ForcedToolChoiceRejected as exc:  # a rejection consumed nothing
                self._record(rnd.n, step, request, error=exc)
                if request.tool_choice != "required":
                    raise GoalEnded(failed_stop(exc)) from None
                self.force_tool_choice = False
                request = replace(request, tool_choice="auto")
                self.events.add(
                    "warning",
                    rnd.n,
                    f"the model rejected forced tool choice (tool_choice required): {exc.message}; "
                    "forcing is off for the rest of the run",
                )
                continue
            except ModelError as exc:
                if exc.kind != "script_exhausted":  # a used-up script consumed no response
                    self.goal.count_model_call()
                self._record(rnd.n, step, request, error=exc)
                self.events.add("api_errors", rnd.n, f"{exc.kind}: {exc.message}")
                if exc.transient:
                    rnd.api_errors.append(f"{exc.kind}: {exc.message}")
                attempt += 1
                spent = self.over_budget() if exc.transient else None
                wait = spent or retry_wait(exc, attempt, self.rng, self.policy)
                if isinstance(wait, Stop):
                    raise GoalEnded(wait) from None
                with self.interrupts.abandonable(in_flight=False):
                    self.sleep(wait)
                continue
            self._record(rnd.n, step, request, response=response)
            price = cost_usd(response.usage, self.price)
            self.goal.add_usage(response.usage, price, counted=True)  # one write (issue 12)
            return response

    def _attempt(self, request: Request, round_n: int, step: int) -> Response:
        """One attempt at the call, abandoned when a pause is requested while it is in flight
        (recorded in the transcript and as an ``interrupted`` event, its usage unknown).
        Raises what :meth:`_complete` raises, and :class:`Interrupted`."""
        try:
            with self.interrupts.abandonable():
                return self._complete(request)
        except Interrupted as exc:
            if exc.in_flight_s is not None:
                how, took = self.interrupts.describe(), f"{exc.in_flight_s:.1f} s"
                error = ModelError(
                    "interrupted",
                    f"the call was abandoned after {took}: {how} paused the goal; "
                    "its usage is unknown",
                )
                self._record(round_n, step, request, error=error)
                self.events.add(
                    "interrupted",
                    round_n,
                    f"step {step}: the model call in flight was abandoned after {took} "
                    f"({how}); its usage is unknown",
                )
            raise

    def _complete(self, request: Request) -> Response:
        """The model's answer to ``request``, checked: an answer that is not a well-formed
        :class:`Response` (a model other than relay's providers) is a transient ``server``
        error naming what was wrong, retried like any other (issue 13)."""
        response = self.model.complete(request)
        problem = response_problem(response)
        if problem is not None:
            raise ModelError(
                "server", f"the model {self.model.name} gave an answer relay cannot read: {problem}"
            )
        return response

    def _record(
        self,
        round_n: int,
        step: int,
        request: Request,
        *,
        response: Response | None = None,
        error: ModelError | None = None,
    ) -> None:
        wire = getattr(self.model, "last_wire", None)
        if wire is not None:  # --debug: the raw provider exchange, secrets redacted
            self.model.last_wire = None  # type: ignore[attr-defined]
        self.transcript.write(
            round_n,
            step,
            request,
            response=response,
            error=error,
            wire=wire,
        )
