"""The model of a goal's run, and the settings that depend on it (SPEC §7.4, §8, §12)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from relay.config import resolve_model_spec
from relay.errors import ConfigError
from relay.models.registry import create_model
from relay.models.scripted import ScriptedModel
from relay.prices import price_for
from relay.provider_url import check_reachable

if TYPE_CHECKING:
    from relay.config import Config
    from relay.models.base import Model
    from relay.store import GoalRecord

__all__ = ["run_model"]


def run_model(
    config: Config,
    open_goal: GoalRecord | None,
    *,
    base_dir: Path,
    debug: bool,
    script_position: int = 0,
) -> tuple[Config, Model]:
    """The configured model, created (a scripted model goes on where ``open_goal`` left it).

    Args:
        config: the run's configuration; its ``model`` must be set.
        open_goal: the goal being resumed, if any.
        base_dir: the folder a relative ``scripted:`` path is relative to.
        debug: record raw provider exchanges (``--debug``).
        script_position: the model calls of ``open_goal``'s script already made
            (:func:`relay.recovery.script_position`).

    Returns:
        The configuration with the model spec made absolute, and the model.

    Raises:
        ConfigError: no model, a missing key or package, a cost budget without the model's
            price, the embedding scorer without its package, or a provider's API that cannot
            be reached (:func:`relay.provider_url.check_reachable`).
    """
    if config.model is None:
        from relay.config_layers import no_model_message

        raise ConfigError(no_model_message())
    spec = resolve_model_spec(config.model, base_dir)
    config = config.model_copy(update={"model": spec})
    model = create_model(spec, settings=config.model_settings(), base_dir=base_dir, debug=debug)
    if isinstance(model, ScriptedModel) and open_goal is not None and spec == open_goal.model:
        model.resume_at(script_position)  # the script goes on where the goal left it
    _check_model_settings(config, model)
    api_base = getattr(model, "api_base", None)  # an HTTP provider's, not the scripted model's
    if isinstance(api_base, str):
        check_reachable(api_base, config.connect_timeout_s)
    return config, model


def _check_model_settings(config: Config, model: Model) -> None:
    """The embedding drift scorer must be installed, and a cost budget needs the model's
    price (SPEC §7.4, §8). Raises ``ConfigError`` naming what to install or add."""
    guard = config.guard
    if guard.enabled and guard.drift == "embedding" and "drift" in guard.detectors:
        from relay import guard_embedding

        guard_embedding.ensure_available()  # names the command that installs the extra
    if config.limits.cost_budget is not None and price_for(model.name, config.prices) is None:
        raise ConfigError(
            f"limits.cost_budget = {config.limits.cost_budget} needs the price of model "
            f"{model.name!r}, which neither relay.yaml's prices nor the genai-prices catalogue "
            "knows: add it under prices, e.g. "
            f"prices: {{{model.name.partition(':')[2]}: {{input: 3.0, cache_write: 3.75, "
            "cached_input: 0.3, output: 15.0}} (USD per million tokens)"
        )
