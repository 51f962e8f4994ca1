"""The transcript writer (SPEC §12): every line holds the exact request the model saw, in both
modes, while a session step serialises only the messages that are new."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import relay.transcript as transcript_module
from relay.context import SessionContext
from relay.models.base import Message, Request, Response, ToolCall, Usage
from relay.transcript import Transcript, read_transcript


def _session_steps(
    path: Path, steps: list[tuple[int, bool]], max_tokens: int
) -> list[dict[str, object]]:
    """Drive a session context through ``steps`` (result size in characters, whether the step
    starts a round), write each request to the transcript; returns the requests sent."""
    context = SessionContext(max_tokens, count_tokens=lambda text: len(text) // 4)
    transcript = Transcript(path, "session")
    sent = []
    for i, (size, new_round) in enumerate(steps):
        if new_round or not context.messages:
            context.start_round(f"round message {i}")
        messages = context.visible(100)
        request = Request("the system prompt", messages)
        if i % 7 == 6:  # a wrap-up style request: a note of relay's after the history
            request = Request(
                "the system prompt", (*messages, Message("user", "wrap up")), (), "none"
            )
        transcript.write(1, i + 1, request, response=Response("ok", (), Usage()))
        sent.append(request.to_dict())
        call = ToolCall(f"c{i}", "read_file", {"path": f"f{i}.txt"})
        context.append(Message("assistant", f"step {i}", tool_calls=(call,)))
        context.append(Message("tool", "x" * size, tool_call_id=call.id))
        if i % 5 == 4:
            context.append(Message("assistant", "an announcement without a tool call"))
    return sent


@settings(max_examples=40, deadline=None, database=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 3000), st.booleans()), min_size=1, max_size=30),
    max_tokens=st.integers(500, 5000),
)
def test_every_session_line_holds_the_request_exactly_as_sent(
    tmp_path_factory, steps: list[tuple[int, bool]], max_tokens: int
) -> None:
    path = tmp_path_factory.mktemp("t") / "transcript.jsonl"
    sent = _session_steps(path, steps, max_tokens)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["request"] for r in rows] == sent
    assert all(r["mode"] == "session" and "response" in r for r in rows)
    assert read_transcript(path) == rows


def test_a_session_step_serialises_only_its_new_messages(tmp_path: Path, monkeypatch) -> None:
    """200 steps of a growing history: each message is turned into JSON once, not once per
    later request (the cost of a step does not grow with the history)."""
    calls = []
    real = Message.to_dict

    def counted(self: Message) -> dict[str, object]:
        calls.append(self)
        return real(self)

    monkeypatch.setattr(Message, "to_dict", counted)
    path = tmp_path / "transcript.jsonl"
    transcript = Transcript(path, "session")
    context = SessionContext(10**6, count_tokens=lambda text: len(text) // 4)
    context.start_round("round message")
    for i in range(200):
        transcript.write(1, i + 1, Request("sys", context.visible(0)))
        call = ToolCall(f"c{i}", "shell", {"command": "true"})
        context.append(Message("assistant", f"step {i}", tool_calls=(call,)))
        context.append(Message("tool", f"result {i}", tool_call_id=call.id))
    assert len(calls) == 1 + 2 * 199  # the round message and each exchange, once
    assert transcript_module.read_transcript(path)[-1]["request"]["messages"][-1]["content"] == (
        "result 198"
    )


def test_a_relay_mode_line_holds_the_whole_request(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    request = Request("sys", (Message("user", "round message"),))
    Transcript(path, "relay").write(1, 1, request, response=Response("ok", (), Usage()))
    line = json.loads(path.read_text(encoding="utf-8"))
    assert line["request"] == request.to_dict()
    assert line["response"]["text"] == "ok"
