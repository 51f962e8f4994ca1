"""Model prices for ``limits.cost_budget`` and the reports (SPEC §7.4), in USD.

Prices come from the maintained ``genai-prices`` package (pydantic's price catalogue of LLM
APIs), read from the data bundled with the installed version: relay never starts its
``UpdatePrices`` download, so pricing is offline and changes only when the package is
upgraded. The catalogue prices each request as the provider bills it:

* **tiers**: where a provider charges more above a context length (e.g. 200k input tokens
  for Claude Sonnet 4.5), a request over the threshold is priced at the higher rate for all
  its tokens; relay prices every model call on its own, so the threshold applies per request;
* **prompt caching**: cache reads and cache writes have their own rates (Anthropic's 5-minute
  cache write, the duration relay's cache breakpoints use; OpenAI has no cache-write charge).

``prices`` in relay.yaml overrides the catalogue: a model listed there is priced at its flat
rates (USD per million tokens, no tiers). A model neither knows (``scripted:``, a local
OpenAI-compatible server) has no price: its cost is reported as 0, and a cost budget for it is
refused before the run starts (:func:`relay.run_model.check_model_setup`) rather than a
budget that silently never triggers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from relay.config import Price
from relay.models.base import Usage

__all__ = ["CATALOGUE_PROVIDERS", "ModelPrice", "cost_usd", "price_for"]

CATALOGUE_PROVIDERS = frozenset({"anthropic", "openai"})
"""relay's providers whose models are looked up in the genai-prices catalogue."""


@dataclass(frozen=True)
class ModelPrice:
    """How one model is priced.

    Attributes:
        model: the model as configured (``PROVIDER:MODEL``).
        source: ``relay.yaml`` (the ``prices`` override) or ``genai-prices``.
        flat: with ``relay.yaml``, the configured rates (USD per million tokens).
        catalogue_id: with ``genai-prices``, the catalogue's model id it matched.
    """

    model: str
    source: Literal["relay.yaml", "genai-prices"]
    flat: Price | None = None
    catalogue_id: str | None = None


def _catalogue_model(provider: str, model_id: str) -> str | None:
    """The genai-prices id of ``model_id`` at ``provider``, or None when it has no price.
    The bundled data only: no network (``UpdatePrices`` is never started)."""
    if provider not in CATALOGUE_PROVIDERS or not model_id:
        return None
    from genai_prices.data_snapshot import get_snapshot

    try:
        _, model = get_snapshot().find_provider_model(model_id, None, provider, None)
    except LookupError:
        return None
    return model.id


def price_for(model: str, configured: Mapping[str, Price]) -> ModelPrice | None:
    """The price of ``model`` (``PROVIDER:MODEL``): ``configured`` (relay.yaml ``prices``)
    first, looked up by the full spec, then the model id, then the provider name; then the
    genai-prices catalogue for Anthropic and OpenAI models. None when unknown."""
    provider, _, model_id = model.partition(":")
    for key in (model, model_id, provider):
        if key in configured:
            return ModelPrice(model, "relay.yaml", flat=configured[key])
    found = _catalogue_model(provider, model_id)
    if found is None:
        return None
    return ModelPrice(model, "genai-prices", catalogue_id=found)


def _flat_cost(usage: Usage, price: Price) -> float:
    return (
        usage.uncached_input * price.input
        + usage.cache_write * price.cache_write
        + usage.cached_input * price.cached_input
        + usage.output * price.output
    ) / 1_000_000


def cost_usd(usage: Usage, price: ModelPrice | None) -> float:
    """USD for ``usage`` (one model call, so that tier thresholds apply per request) at
    ``price``; 0 when the price is unknown."""
    if price is None:
        return 0.0
    if price.flat is not None:
        return _flat_cost(usage, price.flat)
    from genai_prices import Usage as CatalogueUsage
    from genai_prices import calc_price

    provider = price.model.partition(":")[0]
    counted = CatalogueUsage(
        input_tokens=usage.uncached_input + usage.cache_write + usage.cached_input,
        cache_write_tokens=usage.cache_write,
        cache_read_tokens=usage.cached_input,
        output_tokens=usage.output,
    )
    result = calc_price(counted, str(price.catalogue_id), provider_id=provider)
    return float(Decimal(result.total_price))
