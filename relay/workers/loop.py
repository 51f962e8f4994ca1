"""The round loop with an agent worker (SPEC §15; docs/workers.md).

:class:`AgentLoop` is :class:`relay.loop.GoalLoop` with another round: instead of relay's
steps, one fresh agent process (Claude Code or Codex) works on the tree with relay's round
message as its prompt, and relay is its API gateway (one per run) and its goal tools' server.
The supervisor, the audit, the budgets, the guard, the journal and the round's end are the
built-in worker's. The gateway's hooks run on the loop's thread (:mod:`.handover`):

* ``admit`` before each model request: the user's stop, new supplements, the budgets (a
  used-up budget makes the request the wrap-up: no tools, relay's wrap-up prompt; the next
  is refused), the steps of a round; a round that is over answers with an end of turn;
* ``on_exchange`` after each attempt: the transcript line, the model call, usage and cost,
  the step record, API errors as events, a request that failed for good ending the goal;
* ``goal_tools``: ``update_goal`` (decided by :class:`relay.goal_tools.GoalTools`, the audit
  included), ``handoff``, ``get_goal``;
* each line of the agent's events: its tool calls as the round's actions (:mod:`.events`),
  seen by the guard as they come.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from relay.dispatch import step_actions
from relay.gateway import Exchange, Forwarder, Gateway, GoalToolAnswer, Refusal, translator_for
from relay.goal import GoalStatus
from relay.guard import Action, result_fingerprint
from relay.loop import GoalLoop, LoopSetup
from relay.loop_state import GoalEnded, RoundState
from relay.loop_texts import error_line
from relay.models.base import Message, Model, Request, Response, ToolCall
from relay.prices import cost_usd
from relay.retry import RetryPolicy
from relay.sandbox.reaper import reaped_argv
from relay.supervisor import Stop, after_real_tool_call, step_stop
from relay.tools import ToolResult
from relay.workers.agents import agent_binary, agent_command, agent_folders
from relay.workers.claims import TreeState, audited_again, tree_state
from relay.workers.events import AgentAction, AgentEvents, exited_nonzero
from relay.workers.handover import Handover
from relay.workers.process import AgentProcess

__all__ = ["AgentLoop"]

BRIDGE = str(Path(__file__).with_name("bridge.py"))
"""Run as a script (``python -I``): importing relay would take the provider variables out of
the environment (:mod:`relay.secrets`), the agent's key among them."""

ROUND_OVER = "relay: this round is over. End your turn now, without further tool calls."
GOAL_OVER = "relay: the goal has ended"


@dataclass
class _Turn:
    """What relay knows of the running round's agent.

    ``ended`` is why relay ended the round (``handoff``, ``update_goal``, ``guard``,
    ``max_steps``, ``supplement``, ``budget``, ``user``, ``api_error``): every later model
    request is answered with an end of turn or refused. ``spent`` is the budget's stop once
    the wrap-up request went out, ``wrap`` its answer.
    """

    rnd: RoundState
    events: AgentEvents
    ended: str | None = None
    stop: Stop | None = None
    spent: Stop | None = None
    wrap: Response | None = None
    last: Response | None = None
    unrecorded: tuple[int, Response] | None = None
    """The latest step, not stored yet: its tool results come with the agent's next request."""
    audited: tuple[TreeState, dict] | None = None
    """An accepted ``complete``: the tree's state before its audit, and the claim."""


class _AgentModel:
    """relay's model as the gateway calls it: the wrap-up request (SPEC §7.4) offers no tool
    and ends with relay's wrap-up prompt, and its answer calls none."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.name = model.name
        self.wrap_up: str | None = None

    def complete(self, request: Request) -> Response:
        if self.wrap_up is None:
            return self.model.complete(request)
        response = self.model.complete(self.sent(request))
        return replace(response, tool_calls=(), stop_reason="end_turn")

    def sent(self, request: Request) -> Request:
        """The request as the model gets it: the wrap-up's without tools, with its prompt."""
        if self.wrap_up is None:
            return request
        messages = (*request.messages, Message("user", self.wrap_up))
        return Request(request.system, messages, (), "none")


class AgentLoop(GoalLoop):
    """Runs rounds of an agent worker (``config.worker``: ``claude-code`` or ``codex``).

    Raises:
        ConfigError: the agent's executable is not on ``PATH`` (before any round).
    """

    def __init__(self, setup: LoopSetup) -> None:
        super().__init__(setup)
        self.worker = setup.config.worker
        self.binary = agent_binary(self.worker)
        self.handover = Handover()
        self.model = _AgentModel(setup.model)
        forwarder = Forwarder(
            self.model,  # type: ignore[arg-type]
            admit=lambda request, wire: self.handover.call(
                lambda: self._admit(), Refusal(ROUND_OVER, "stopped")
            ),
            on_exchange=lambda ex: self.handover.call(lambda: self._exchange(ex), None),
            policy=RetryPolicy.from_limits(setup.config.limits),
            translate=translator_for(setup.model, str(setup.git.root)),
            sleep=setup.sleep,
            rng=setup.rng,
        )
        self.gateway = Gateway(forwarder, goal_tools=self._goal_tool)
        self.turn: _Turn | None = None
        self.socket_dir: Path | None = None

    def run(self) -> Stop:
        """Run rounds until the goal ends, the gateway serving for the whole run (also on a
        Unix socket when the agent runs in a sandbox without network)."""
        sandbox = self.setup.sandbox
        with self.gateway:
            if sandbox.active and sandbox.network == "deny":
                self.socket_dir = Path(tempfile.mkdtemp(prefix="relay-gw-"))
                self.gateway.serve_unix(str(self.socket_dir / "gateway.sock"))
            try:
                return super().run()
            finally:
                if self.socket_dir is not None:
                    shutil.rmtree(self.socket_dir, ignore_errors=True)

    def _sandboxed(self, command: list[str], env: dict[str, str], folder: Path) -> list[str]:
        """The agent's command inside relay's sandbox (SPEC §14), when it is on: the working
        tree and the round's folder writable, the rest as for the model's commands; without
        network, the gateway reached through :mod:`relay.workers.bridge` alone. Without the
        sandbox the agent runs under relay's reaper, as a ``shell`` call does: a process it
        starts (``setsid``, ``nohup``, a double fork) is killed when the agent ends, at the
        latest at the round's end. ``env`` gets relay's marks of the model's commands
        (``RELAY_SANDBOX``, ``RELAY_RUN``), by which relay finds a process that killed the
        reaper (:func:`relay.sandbox.stop_escaped`)."""
        sandbox = self.setup.sandbox
        env |= {"RELAY_SANDBOX": "bwrap" if sandbox.active else "off"}
        env |= {"RELAY_RUN": self.setup.run_id}
        if not sandbox.active:  # in a PID namespace of its own where the kernel allows it
            return reaped_argv([*sandbox.pid_namespace, *command])
        env["TMPDIR"] = "/tmp"
        writable = [folder]
        if self.socket_dir is not None:
            socket = str(self.socket_dir / "gateway.sock")
            bridge = [sys.executable, "-I", BRIDGE, socket, str(self.gateway.port)]
            command = [*bridge, "--", *command]
            writable.append(self.socket_dir)
        shown = agent_folders(self.binary)  # an agent installed under the private /tmp
        sandbox = replace(sandbox, visible=(*sandbox.visible, *shown))
        root, protected = self.setup.git.root, self.setup.protected_paths
        return sandbox.command(command, root=root, protected=protected, writable=writable)

    def _work(self, rnd: RoundState) -> None:
        """One round: the agent process with the round message, until it exits."""
        self._before_model_call(rnd)
        self._audit_pending_claim(rnd)
        prompt = self.setup.prompts.render("agent") + self._round_message(rnd)
        folder = self.setup.run_dir / "agent" / f"round-{rnd.n}"
        gateway = (self.gateway.url, self.gateway.token)
        root = self.setup.git.root
        command, env = agent_command(
            self.worker,
            self.binary,
            gateway,
            folder,
            root,
            prompt,
            env_names=tuple(self.setup.config.sandbox.env),
        )
        command = self._sandboxed(command, env, folder)
        turn = self.turn = _Turn(rnd, AgentEvents(self.worker))
        self.handover.open()
        try:
            process = AgentProcess(command, env, root, folder, self.handover, self._line)
            try:
                code = process.wait(lambda: self.setup.interrupts.requested is not None)
            finally:
                process.stop()
        finally:
            self.handover.close()
            self.turn = None
            self._record_step(turn, None)
        self._confirm_complete(turn)
        self._round_end(turn, code)

    def _confirm_complete(self, turn: _Turn) -> None:
        """An accepted ``complete`` stands only for the tree relay commits (:mod:`.claims`)."""
        if turn.audited is None or turn.stop is None:
            return
        tools = self.dispatcher.goal_tools
        decision = audited_again(self.setup.git, tools, self.events, turn.rnd, *turn.audited)
        if decision is not None:
            turn.rnd.counters = decision.counters
            turn.stop = decision.stop

    def _round_end(self, turn: _Turn, code: int | None) -> None:
        """The round's end reason, or the goal's end (:class:`GoalEnded`), from what relay
        decided during the round and how the agent ended (its events, not its exit code)."""
        rnd = turn.rnd
        if turn.stop is not None:
            raise GoalEnded(turn.stop)
        if turn.spent is not None:
            raise GoalEnded(self._wrapped_up(rnd, turn.spent, turn.wrap or Response()))
        if self.setup.interrupts.requested is not None:
            raise GoalEnded(self._user_stop() or self._paused())
        failure = turn.events.outcome(code)
        if failure is not None and turn.events.unusable:
            raise GoalEnded(failed_start(self.worker, failure))
        if turn.ended is not None:
            rnd.end_reason = turn.ended
        elif failure is not None:
            detail = f"{self.worker} failed: {failure}"
            rnd.api_errors.append(detail)
            self.events.add("api_errors", rnd.n, detail)
            rnd.end_reason = "agent_error"
        else:
            rnd.end_reason = "no_tool_call" if not rnd.called_tools else "agent_done"

    def _end(self, turn: _Turn, why: str, stop: Stop | None = None) -> None:
        turn.ended = turn.ended or why
        turn.stop = turn.stop or stop

    def _admit(self) -> Refusal | None:
        """Before each model request, on the loop's thread (SPEC §4, §7.2, §7.4)."""
        turn = self.turn
        if turn is None or turn.ended is not None:
            return Refusal(ROUND_OVER, "end_turn")
        rnd = turn.rnd
        stop = self._user_stop()
        if stop is not None:
            self._end(turn, "user", stop)
            return Refusal(f"{GOAL_OVER}: {stop.message}", "stopped")
        known = self.known_supplements
        self._take_supplements(rnd)
        if self.known_supplements != known and rnd.steps > 0:
            self._end(turn, "supplement")  # the next round's message holds them
            return Refusal(ROUND_OVER, "end_turn")
        spent = self.budget.spent()
        if spent is not None:
            turn.spent = spent
            self._end(turn, "budget")
            self.model.wrap_up = self.budget.wrap_up_prompt(self.setup.prompts, spent)
            return None
        if rnd.steps >= self.setup.config.limits.max_steps_per_round:
            self._end(turn, "max_steps")
            return Refusal(ROUND_OVER, "end_turn")
        return None

    def _record_step(self, turn: _Turn, request: Request | None) -> None:
        """Store the latest step with its tool calls' results as the agent sent them back in
        ``request`` (its next model request; None at the round's end: results unknown)."""
        if turn.unrecorded is None:
            return
        step, response = turn.unrecorded
        turn.unrecorded = None
        ids = {call.id for call in response.tool_calls}
        results = [
            replace(m, is_error=m.is_error or exited_nonzero(m.content))
            for m in (request.messages if request else ())
            if m.tool_call_id in ids
        ]
        self.setup.store.add_step(
            self.setup.goal_id,
            self.setup.run_id,
            turn.rnd.n,
            step,
            text=response.text,
            actions=step_actions(response, results),
            usage=response.usage.to_dict(),
        )

    def _exchange(self, ex: Exchange) -> None:
        """After each attempt, on the loop's thread: transcript, usage, API errors (§7.4–7.6)."""
        turn = self.turn
        if turn is None:
            return
        self._record_step(turn, ex.request)
        if ex.refusal is not None:
            return
        rnd = turn.rnd
        self.goal.count_model_call()
        transcript = self.caller.transcript
        if ex.response is not None:
            rnd.steps += 1
            transcript.write(rnd.n, rnd.steps, self.model.sent(ex.request), response=ex.response)
            self.goal.add_usage(ex.response.usage, cost_usd(ex.response.usage, self.caller.price))
            self.setup.display.step(rnd.n, rnd.steps, ex.response)
            turn.unrecorded = (rnd.steps, ex.response)
            turn.last = ex.response
            if turn.spent is not None:
                turn.wrap = ex.response
                self.model.wrap_up = None
            return
        assert ex.error is not None
        transcript.write(rnd.n, rnd.steps + 1, ex.request, error=ex.error)
        self.events.add("api_errors", rnd.n, f"{ex.error.kind}: {ex.error.message}")
        if ex.error.transient:
            rnd.api_errors.append(f"{ex.error.kind}: {ex.error.message}")
        if ex.stop is not None:
            self._end(turn, "api_error", ex.stop)

    def _goal_tool(self, name: str, arguments: dict) -> GoalToolAnswer:
        """The gateway's goal-tool callback: decided on the loop's thread."""
        closed = GoalToolAnswer(ROUND_OVER, is_error=True)
        return self.handover.call(lambda: self._decide(name, arguments), closed)

    def _decide(self, name: str, arguments: dict) -> GoalToolAnswer:
        """``update_goal``, ``handoff`` or ``get_goal`` as the built-in worker decides them
        (SPEC §5, §7.1, §9); an ``update_goal`` that ends the goal, and a handoff, end the
        round. ``update_goal`` sent with other tool calls in one model answer is deferred."""
        turn = self.turn
        if turn is None or turn.ended is not None:
            return GoalToolAnswer(ROUND_OVER, is_error=True)
        rnd = turn.rnd
        rnd.tool_calls += 1
        call = ToolCall(f"agent-{rnd.tool_calls}", name, arguments)
        tools = self.dispatcher.goal_tools
        if name in ("handoff", "get_goal"):
            result = tools.handoff(rnd, call) if name == "handoff" else tools.get_goal(rnd)
            if name == "handoff":
                self._end(turn, "handoff")
            self.setup.display.tool_called(call, result.content, result.is_error)
            return GoalToolAnswer(result.content, result.is_error)
        alone = turn.last is None or len(turn.last.tool_calls) <= 1
        claim = arguments.get("status") == "complete"
        seen = tree_state(self.setup.git) if claim else None
        message, decided = tools.update_goal(rnd, call, alone)
        stop = step_stop(decided, rnd.counters, self.limits)
        if stop is not None:
            self._end(turn, "update_goal", stop)
            if seen is not None and stop.status == GoalStatus.COMPLETE:
                turn.audited = (seen, dict(arguments))
        return GoalToolAnswer(message.content, message.is_error)

    def _line(self, line: str) -> None:
        """One line of the agent's events, on the loop's thread."""
        turn = self.turn
        if turn is None:
            return
        for action in turn.events.feed(line):
            self._observe(turn, action)

    def _observe(self, turn: _Turn, done: AgentAction) -> None:
        """A finished tool call of the agent as a real tool call of the round (SPEC §8)."""
        rnd = turn.rnd
        rnd.tool_calls += 1
        rnd.real_tool_calls += 1
        rnd.called_tools = True
        rnd.counters = after_real_tool_call(rnd.counters)
        call = ToolCall(f"agent-{rnd.tool_calls}", done.name, done.arguments)
        if done.name == "shell":
            rnd.commands.append((str(done.arguments.get("command", "")), done.exit_code))
        if done.is_error:
            rnd.last_error = error_line(call, ToolResult(done.result or "failed", is_error=True))
        action = Action(done.name, done.arguments, result_fingerprint(done.result), done.is_error)
        rnd.actions.append(action)
        if rnd.repeats.observe(action) and self.dispatcher.nudges:
            rnd.repeat_events.append(rnd.repeats.finding())
        self.setup.display.tool_called(call, done.result, done.is_error)
        if turn.ended is None and self.guard.crossed(rnd, self.goal.value):
            rnd.guard_crossed = True
            self._end(turn, "guard")


def failed_start(worker: str, problem: str) -> Stop:
    """The stop of an agent that cannot work at all (relay's MCP server not connected)."""
    return Stop(GoalStatus.FAILED, "worker", f"worker {worker}: {problem}")
