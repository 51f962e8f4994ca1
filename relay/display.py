"""What a run shows while it works: the :class:`Display` protocol the loop notifies, and
:class:`RichDisplay`, the live display on stderr (rich): round, step, last tool call, counters.

``--json`` runs use the silent :class:`Display` itself, so stdout holds only JSON.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from relay.models.base import Response, ToolCall
from relay.terminal import SafeConsole, colour_off
from relay.text import counted


class Display:
    """Receives progress notifications; the default shows nothing (``--json``)."""

    def run_started(self, goal_id: str, branch: str | None, limits: str) -> None: ...

    def round_started(self, goal_round: int, counted: int, max_rounds: int) -> None: ...

    def step(self, round_n: int, step: int, response: Response) -> None: ...

    def tool_called(self, call: ToolCall, result: str, is_error: bool) -> None: ...

    def round_ended(self, round_n: int, reason: str, commit: str | None) -> None: ...

    def event(self, kind: str, detail: str) -> None: ...


def _text(value: object) -> str:
    """``value`` as text to show: a model's answer or a tool's result is shown whatever its
    type (a provider or plug-in model may send anything, issue 13); None is nothing."""
    return value if isinstance(value, str) else "" if value is None else str(value)


def call_summary(call: ToolCall) -> str:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    name = _text(call.name)
    if name == "shell":
        detail = _text(args.get("command"))
    elif name in {"read_file", "write_file", "edit_file"}:
        detail = _text(args.get("path"))
    elif name == "update_goal":
        detail = _text(args.get("status"))
    elif name == "handoff":
        detail = next(iter(_text(args.get("note")).strip().splitlines()), "")
    else:
        detail = ""
    detail = " ".join(detail.split())
    if len(detail) > 70:
        detail = detail[:69] + "…"
    return f"{name} {detail}".strip()


VERBOSE_LINES = 20
"""Lines of the model's text and of each tool call's output shown with ``--verbose``."""


class RichDisplay(Display):
    """Prints one concise line per round, step and tool call to stderr; on a terminal a status
    line shows the current round, step and counters while the model thinks (not with
    :func:`relay.terminal.colour_off`: it is drawn with escape sequences). ``verbose``
    (``--verbose``): also the model's text and each tool call's output, up to
    :data:`VERBOSE_LINES` lines each."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or SafeConsole(stderr=True, highlight=False, soft_wrap=True)
        self.verbose = verbose
        self.round = 0
        self.max_rounds = 0
        self.step_n = 0
        self.tool_calls = 0
        self._status = None
        self._round_detail: str | None = None
        if self.console.is_terminal and not colour_off():  # NO_COLOR: no escape sequence
            self._status = self.console.status("starting…")
            self._status.start()

    def _update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    def run_started(self, goal_id: str, branch: str | None, limits: str) -> None:
        self.console.print(f"goal {goal_id} on branch {escape(branch or '-')}")
        self.console.print(f"[dim]limits: {escape(limits)}[/]")

    def round_started(self, goal_round: int, counted: int, max_rounds: int) -> None:
        self.round, self.max_rounds, self.step_n = goal_round, max_rounds, 0
        self.console.print(f"[bold]round {goal_round}[/] ({counted} of {max_rounds})")
        self._update(f"round {goal_round} · waiting for the model")

    def step(self, round_n: int, step: int, response: Response) -> None:
        self.step_n = step
        said = next((ln.strip() for ln in _text(response.text).splitlines() if ln.strip()), "")
        if said and self.verbose:
            self.console.print(f"  [dim]step {step} · model:[/]")
            self._lines(_text(response.text))
        elif said:
            said = said if len(said) <= 100 else said[:99] + "…"
            self.console.print(f"  [dim]step {step} · model: {escape(said)}[/]")
        tool_calls = response.tool_calls if isinstance(response.tool_calls, tuple) else ()
        calls = counted(len(tool_calls), "tool call")
        self._update(f"round {round_n} · step {step} · {calls}")

    def tool_called(self, call: ToolCall, result: str, is_error: bool) -> None:
        self.tool_calls += 1
        mark = "[red]✗[/]" if is_error else "[green]✓[/]"
        result = _text(result)
        if call.name == "update_goal":  # the supervisor's answer matters in full
            lines = [ln for ln in result.splitlines() if ln.strip()]
            self.console.print(f"  {mark} step {self.step_n} · {escape(call_summary(call))}")
            for line in lines[:15]:
                self.console.print(f"      {escape(line)}")
            if len(lines) > 15:
                self.console.print(f"      … {len(lines) - 15} more lines in the transcript")
            return
        lines = [ln.strip() for ln in result.splitlines() if ln.strip() and ln[:3] != "---"]
        first = lines[0][:100] if lines else ""
        if call.name == "shell" and len(lines) > 1:
            first += f" · {lines[-1][:100]}"
        self.console.print(
            f"  {mark} step {self.step_n} · {escape(call_summary(call))}"
            + (f" [dim]— {escape(first)}[/]" if first else "")
        )
        if self.verbose:
            self._lines(result)
        calls = counted(self.tool_calls, "tool call")
        self._update(f"round {self.round} · step {self.step_n} · {calls}")

    def _lines(self, text: str) -> None:
        """Up to :data:`VERBOSE_LINES` lines of ``text``, indented (``--verbose``)."""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        for line in lines[:VERBOSE_LINES]:
            self.console.print(f"      {escape(line)}", markup=True)
        if len(lines) > VERBOSE_LINES:
            more = len(lines) - VERBOSE_LINES
            self.console.print(f"      … {more} more lines in the transcript")

    def round_ended(self, round_n: int, reason: str, commit: str | None) -> None:
        """One line per round's end: the ``round_ended`` event's detail (reason, steps, tool
        calls, changed paths, commit) when it came just before, else the reason and commit."""
        detail, self._round_detail = self._round_detail, None
        if detail is None:
            detail = reason + (f" · commit {commit[:7]}" if commit else "")
        self.console.print(f"  [dim]round {round_n} ended: {escape(detail)}[/]")

    def event(self, kind: str, detail: str) -> None:
        if kind == "round_ended":  # printed once, by round_ended
            self._round_detail = detail
            return
        if kind in {"update_goal", "run_started", "goal_ended"}:
            return
        self.console.print(f"  [yellow]{escape(kind)}[/]: {escape(detail)}")

    def close(self) -> None:
        """Stop the status line."""
        if self._status is not None:
            self._status.stop()
            self._status = None
