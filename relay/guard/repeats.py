"""In-round repeats: the same call (or a short cycle of calls) with the same result in a row
(SPEC §8, the in-round half of the ``loop`` detector).

Pure, no I/O: the loop feeds each real tool call of a round to one :class:`RepeatTracker` and
records its findings in :attr:`relay.guard.history.GuardRound.repeat_events`.
"""

from __future__ import annotations

from relay.guard.history import Action
from relay.guard.similarity import same_call

MAX_CYCLE = 3
"""Longest cycle of calls the in-round repeat tracker recognises (A A A…, A B A B…,
A B C A B C…)."""


class RepeatTracker:
    """Counts near-identical calls with the same result in a row inside one round (SPEC §8).

    A "call" may also be a short cycle of up to :data:`MAX_CYCLE` different calls (``A B A B
    …``): the cycle then counts once per repetition. Calls compare with :func:`same_call`.

    Args:
        repeat_limit: repetitions in a row that make a loop event (``guard.repeat_limit``,
            default 5), again at every further multiple (10, 15, …).
        similarity: how similar two calls' canonical texts must be to count as the same call
            (``guard.loop_similarity``, 0–1).
        max_cycle: the longest cycle recognised (1 = only the same call in a row).
    """

    def __init__(self, repeat_limit: int, similarity: float, max_cycle: int = MAX_CYCLE) -> None:
        self.repeat_limit = repeat_limit
        self.similarity = similarity
        self.max_cycle = max_cycle
        self._recent: list[Action] = []
        self._runs = dict.fromkeys(range(1, max_cycle + 1), 0)
        self.count = 0
        """Repetitions in a row of the current call or cycle (1 for a new call)."""
        self.period = 1
        """Length of the cycle being repeated (1: one call)."""

    def observe(self, action: Action) -> str | None:
        """Record a call; when the call (or cycle) has been made a multiple of
        ``repeat_limit`` times in a row with the same results, return the nudge the model
        sees with the tool result, else None."""
        recent = self._recent
        self.count, self.period = 1, 1
        for p in self._runs:
            repeats = len(recent) >= p and same_call(action, recent[-p], self.similarity)
            if repeats and p > 1:  # a cycle of p different calls, not a shorter one
                cycle = [*recent[-p + 1 :], action]
                repeats = all(
                    not same_call(x, y, self.similarity)
                    for i, x in enumerate(cycle)
                    for y in cycle[i + 1 :]
                )
            self._runs[p] = self._runs[p] + 1 if repeats else 0
            if self._runs[p]:
                count = self._runs[p] // p + 1
                if count > self.count or (count == self.count and p < self.period):
                    self.count, self.period = count, p
        recent.append(action)
        del recent[: -self.max_cycle]
        run = self._runs[self.period]
        if run and run % self.period == 0 and self.count % self.repeat_limit == 0:
            return self._nudge()
        return None

    def finding(self) -> str:
        """The loop event's detail for the latest repetition, e.g. ``shell called 5 times in
        a row with the same result``."""
        last = self._recent[-1].name if self._recent else "a tool"
        if self.period == 1:
            return f"{last} called {self.count} times in a row with the same result"
        names = ", ".join(a.name for a in self._recent[-self.period :])
        return (
            f"the same {self.period} calls ({names}) repeated {self.count} times in a row "
            "with the same results"
        )

    def _nudge(self) -> str:
        what, results = "this call", "the same result"
        if self.period > 1:
            what, results = f"this sequence of {self.period} calls", "the same results"
        return (
            f"You have made {what} {self.count} times in a row with {results}. "
            "Repeating it will not change the outcome: try a different approach, or report "
            "the state with update_goal."
        )
