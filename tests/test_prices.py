"""Model prices (SPEC §7.4, issue 15 item 4): Anthropic and OpenAI models are priced from the
maintained genai-prices catalogue (offline, its bundled data), each model call on its own, with
long-context tiers and cache read/write rates; ``prices`` in relay.yaml overrides it; a cost
budget for a model without a price is refused before any work."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from conftest import call, complete, respond

from relay.config import Price
from relay.models.base import Usage
from relay.prices import cost_usd, price_for
from relay.testing import FakeProvider

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE = respond(call("write_file", path="notes.txt", content="hello\n"))
SONNET_45 = "anthropic:claude-sonnet-4-5"
"""Claude Sonnet 4.5: $3 / $15 per million input / output tokens, $6 / $22.50 for a request
over 200k input tokens (cache reads and writes count towards the threshold)."""


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def run_model(run_relay, repo: Path, model: str, usages: list[dict], *extra: str):
    """``relay run`` of ``model`` against the fake provider: a write, then ``complete``, with
    the given usage of each answer; returns (exit code, JSON object, stderr)."""
    provider = model.partition(":")[0]
    answers = [WRITE, complete()]
    script = {"responses": [{**a, "usage": u} for a, u in zip(answers, usages, strict=True)]}
    with FakeProvider(script) as fake:
        url = fake.anthropic_url if provider == "anthropic" else fake.openai_url
        args = ["run", GOAL, "--repo", repo, "--model", model, "--base-url", url, "--json"]
        code, out, err = run_relay([*args, *extra])
    assert "Traceback" not in err, err
    return code, (json.loads(out) if out.strip() else None), err


def test_a_250k_token_sonnet_request_is_priced_at_the_long_context_tier(make_repo, run_relay):
    repo = make_repo(config=NOTES)
    big = {"input": 250_000, "output": 1_000}
    small = {"input": 1_000, "output": 10}
    code, data, err = run_model(run_relay, repo, SONNET_45, [big, small])
    assert code == 0, err
    # 250k × $6 + 1k × $22.50 (the tier), then 1k × $3 + 10 × $15 (the base rate)
    expected = (250_000 * 6 + 1_000 * 22.5 + 1_000 * 3 + 10 * 15) / 1e6
    assert data["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert data["cost_usd"] > 1.5  # a flat table said 0.77


@pytest.mark.parametrize(
    ("input_tokens", "rate_in", "rate_out"),
    [(199_999, 3.0, 15.0), (200_000, 3.0, 15.0), (200_001, 6.0, 22.5), (250_000, 6.0, 22.5)],
)
def test_prices_at_and_around_the_tier_boundary(input_tokens, rate_in, rate_out):
    price = price_for(SONNET_45, {})
    usage = Usage(uncached_input=input_tokens, output=1_000)
    expected = (input_tokens * rate_in + 1_000 * rate_out) / 1e6
    assert cost_usd(usage, price) == pytest.approx(expected, abs=1e-9)


def test_cache_reads_and_writes_count_towards_the_tier_threshold():
    price = price_for(SONNET_45, {})
    usage = Usage(uncached_input=10_000, cache_write=40_000, cached_input=160_000, output=0)
    # 210k input in all: over 200k, so cache reads ($0.60) and writes ($7.50) at the tier too
    expected = (10_000 * 6 + 40_000 * 7.5 + 160_000 * 0.6) / 1e6
    assert cost_usd(usage, price) == pytest.approx(expected, abs=1e-9)


def test_cached_tokens_are_priced_at_their_own_rates(make_repo, run_relay):
    """Claude Opus 4.8: $5 input, $6.25 cache write (5 minutes), $0.50 cache read, $25 output."""
    repo = make_repo(config=NOTES)
    usage = {"input": 1_000, "cache_write": 20_000, "cached": 100_000, "output": 500}
    code, data, err = run_model(run_relay, repo, "anthropic:claude-opus-4-8", [usage, usage])
    assert code == 0, err
    one_call = (1_000 * 5 + 20_000 * 6.25 + 100_000 * 0.5 + 500 * 25) / 1e6
    assert data["tokens"]["cached_input"] == 200_000
    assert data["cost_usd"] == pytest.approx(2 * one_call, abs=1e-6)


def test_openai_cache_reads_are_discounted(make_repo, run_relay):
    """gpt-4o-mini: $0.15 input, $0.075 cached input, $0.60 output (no cache-write charge)."""
    repo = make_repo(config=NOTES)
    usage = {"input": 2_000, "cached": 8_000, "output": 100}
    code, data, err = run_model(run_relay, repo, "openai:gpt-4o-mini", [usage, usage])
    assert code == 0, err
    uncached = data["tokens"]["uncached_input"] + data["tokens"]["cache_write"]
    expected = (uncached * 0.15 + 16_000 * 0.075 + 200 * 0.6) / 1e6
    assert data["cost_usd"] == pytest.approx(expected, abs=1e-9)


def test_prices_in_relay_yaml_override_the_catalogue(make_repo, run_relay):
    flat = {"input": 1.0, "cache_write": 2.0, "cached_input": 0.5, "output": 4.0}
    repo = make_repo(config={**NOTES, "prices": {"claude-sonnet-4-5": flat}})
    big = {"input": 250_000, "output": 1_000}
    code, data, err = run_model(run_relay, repo, SONNET_45, [big, big])
    assert code == 0, err
    assert data["cost_usd"] == pytest.approx(2 * (250_000 * 1.0 + 1_000 * 4.0) / 1e6)
    assert price_for(SONNET_45, {"claude-sonnet-4-5": Price(**flat)}).source == "relay.yaml"


def test_a_cost_budget_for_a_model_without_a_price_is_refused(make_repo, run_relay):
    repo = make_repo(config={**NOTES, "limits": {"cost_budget": 2.0}})
    code, data, err = run_model(run_relay, repo, "openai:my-local-llama", [{}, {}])
    assert code == 1 and data is None
    assert "limits.cost_budget = 2.0 needs the price of model 'openai:my-local-llama'" in err
    assert "genai-prices" in err and "prices: {my-local-llama: {input:" in err
    assert not (repo / ".relay").exists()  # refused before any work


def test_a_cost_budget_for_a_catalogued_model_is_accepted_and_stops_the_goal(make_repo, run_relay):
    repo = make_repo(config={**NOTES, "limits": {"cost_budget": 1.0}})
    big = {"input": 250_000, "output": 1_000}
    code, data, _ = run_model(run_relay, repo, SONNET_45, [big, big])
    assert (code, data["status"], data["reason"]) == (5, "budget_limited", "cost_budget")


@pytest.mark.parametrize(
    "model",
    [
        "anthropic:claude-fable-5-1",
        "anthropic:claude-opus-5-5",
        "anthropic:claude-opus-4-8",
        "anthropic:claude-sonnet-5-5",
        "anthropic:claude-sonnet-4-6",
        "anthropic:claude-haiku-5-5",
        "anthropic:claude-haiku-4-5",
        "anthropic:claude-sonnet-4-5-20250929",
        "openai:gpt-6.1-sol",
        "openai:gpt-5",
        "openai:gpt-5-mini",
        "openai:gpt-4.1",
        "openai:gpt-4o",
        "openai:gpt-4o-2024-08-06",
    ],
)
def test_current_models_have_a_price_offline(model, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("pricing must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    price = price_for(model, {})
    assert price is not None and price.source == "genai-prices"
    assert cost_usd(Usage(uncached_input=1_000, output=1_000), price) > 0


def test_models_no_catalogue_knows_have_no_price():
    assert price_for("scripted:/tmp/script.yaml", {}) is None
    assert price_for("openai:no-such-model", {}) is None
    assert price_for("anthropic:claude-foo", {}) is None
    assert cost_usd(Usage(uncached_input=10**6), None) == 0.0


def test_the_report_prices_each_model_call_of_a_round_on_its_own(make_repo, run_relay):
    """One round with a 250k-token call (the tier) and a 1k-token call (the base rate): the
    report's round cost is the goal's, not the round's summed tokens priced at the tier."""
    repo = make_repo(config=NOTES)
    big = {"input": 250_000, "output": 1_000}
    small = {"input": 1_000, "output": 10}
    code, data, err = run_model(run_relay, repo, SONNET_45, [big, small])
    assert code == 0 and data["rounds"] == 1, err
    code, text, err = run_relay(["report", "--repo", repo])
    assert code == 0, err
    rounds = text.split("## Rounds", 1)[1].split("\n## ", 1)[0]
    row = re.search(r"^\| 1 \| (.*) \|$", rounds, flags=re.M)
    assert row is not None, rounds
    assert float(row.group(1).split(" | ")[7]) == pytest.approx(data["cost_usd"], abs=1e-4)
    assert data["cost_usd"] == pytest.approx(1.52565, abs=1e-6)
