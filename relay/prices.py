"""Model prices for ``limits.cost_budget`` (SPEC §7.4), in USD per million tokens.

The defaults were taken on 2026-11-29 from the providers' pricing pages
(https://platform.claude.com/docs/en/about-claude/pricing and
https://developers.openai.com/api/docs/pricing) as stored copies showed them. Prices change:
``prices`` in relay.yaml overrides or extends this table, and a cost budget for a model without
a known price is a configuration error rather than a budget that silently never triggers.
Where a provider charges two cache-write durations, the 5-minute rate is used (relay's cache
breakpoints use the default duration); Anthropic's cache writes cost 1.25 × input.
"""

from __future__ import annotations

from collections.abc import Mapping

from relay.config import Price
from relay.models.base import Usage


def _p(input: float, cache_write: float, cached_input: float, output: float) -> Price:
    return Price(input=input, cache_write=cache_write, cached_input=cached_input, output=output)


DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic (platform.claude.com pricing page)
    "claude-fable-5-1": _p(10.0, 12.5, 0.25, 50.0),
    "claude-opus-5-5": _p(4.0, 5.0, 0.20, 20.0),
    "claude-opus-5": _p(5.0, 6.25, 0.50, 25.0),
    "claude-opus-4-8": _p(5.0, 6.25, 0.50, 25.0),
    "claude-opus-4-7": _p(5.0, 6.25, 0.50, 25.0),
    "claude-opus-4-6": _p(5.0, 6.25, 0.50, 25.0),
    "claude-opus-4-5": _p(5.0, 6.25, 0.50, 25.0),
    "claude-sonnet-5-5": _p(2.0, 2.5, 0.20, 10.0),
    "claude-sonnet-5": _p(2.0, 2.5, 0.20, 10.0),
    "claude-sonnet-4-6": _p(3.0, 3.75, 0.30, 15.0),
    "claude-sonnet-4-5": _p(3.0, 3.75, 0.30, 15.0),
    "claude-haiku-5-5": _p(0.10, 0.125, 0.01, 0.50),
    "claude-haiku-4-5": _p(1.0, 1.25, 0.10, 5.0),
    # OpenAI (developers.openai.com pricing page); no separate cache-write charge
    "gpt-6.1-sol": _p(2.0, 0.0, 0.10, 10.0),
    "gpt-5": _p(1.25, 0.0, 0.125, 10.0),
    "gpt-5-mini": _p(0.25, 0.0, 0.025, 2.0),
    "gpt-4.1": _p(2.0, 0.0, 0.50, 8.0),
    "gpt-4o": _p(2.5, 0.0, 1.25, 10.0),
    "gpt-4o-mini": _p(0.15, 0.0, 0.075, 0.60),
}


def price_for(model: str, configured: Mapping[str, Price]) -> Price | None:
    """The price of ``model`` (``PROVIDER:MODEL``): from ``configured`` (relay.yaml
    ``prices``) first, then the defaults; looked up by the full spec, then the model id, then
    the provider name. None when unknown."""
    provider, _, model_id = model.partition(":")
    for table in (configured, DEFAULT_PRICES):
        for key in (model, model_id, provider):
            if key in table:
                return table[key]
    return None


def cost_usd(usage: Usage, price: Price | None) -> float:
    """USD for ``usage`` at ``price`` (0 when the price is unknown)."""
    if price is None:
        return 0.0
    return (
        usage.uncached_input * price.input
        + usage.cache_write * price.cache_write
        + usage.cached_input * price.cached_input
        + usage.output * price.output
    ) / 1_000_000
