"""relay.testing.FakeProvider answers streaming Messages API and Responses API requests with
the real APIs' server-sent events (issue 16), so SDK clients and agent CLIs can use it."""

from __future__ import annotations

import anthropic
import openai
import pytest

from relay.testing import FakeProvider

SCRIPT = {
    "responses": [
        {
            "text": "Hi.",
            "tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}],
            "usage": {"input": 50, "cached": 10, "cache_write": 0, "output": 5},
        },
        {"error": "insufficient_quota"},
    ]
}


def test_anthropic_streaming_against_the_fake() -> None:
    with FakeProvider(SCRIPT) as fake:
        client = anthropic.Anthropic(api_key="k", base_url=fake.anthropic_url, max_retries=0)
        with client.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        ) as s:
            message = s.get_final_message()
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}], stream=True
            )
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (50, 10)


def test_openai_responses_streaming_and_plain_against_the_fake() -> None:
    with FakeProvider({"responses": [SCRIPT["responses"][0], SCRIPT["responses"][0]]}) as fake:
        client = openai.OpenAI(api_key="k", base_url=fake.openai_url, max_retries=0)
        with client.responses.stream(model="m", input="x") as s:
            streamed = s.get_final_response()
        plain = client.responses.create(model="m", input="x")
    for response in (streamed, plain):
        assert response.output_text == "Hi." and response.output[1].name == "shell"
        assert response.usage.input_tokens == 60 and response.usage.output_tokens == 5
    assert fake.paths() == ["/v1/responses", "/v1/responses"]
