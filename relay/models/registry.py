"""Model registry: turns a ``PROVIDER:MODEL`` spec (SPEC §12) into a :class:`Model`.

Providers plug in through :data:`PROVIDERS`, a mapping from the prefix to a factory
``factory(model_id: str, *, settings: ModelSettings, base_dir: Path | None, debug: bool) ->
Model``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from relay.errors import ConfigError
from relay.models.base import Model, ModelSettings
from relay.models.scripted import ScriptedModel

ModelFactory = Callable[..., Model]
"""``factory(model_id, *, settings, base_dir=None, debug=False) -> Model``; raises
``ConfigError``."""


def _scripted(
    model_id: str, *, settings: ModelSettings, base_dir: Path | None = None, debug: bool = False
) -> Model:
    """``scripted:<file.yaml>``: a relative path is resolved against ``base_dir`` (else the
    current directory). ``settings`` (URL, output cap, timeouts) do not apply to scripts."""
    path = Path(model_id).expanduser()
    if not path.is_absolute():
        path = (base_dir if base_dir is not None else Path.cwd()) / path
    return ScriptedModel.from_file(path, name=f"scripted:{model_id}")


def _anthropic(
    model_id: str, *, settings: ModelSettings, base_dir: Path | None = None, debug: bool = False
) -> Model:
    """``anthropic:<model>`` on the Messages API (key from ``ANTHROPIC_API_KEY``)."""
    from relay.models.anthropic_messages import AnthropicModel

    return AnthropicModel(model_id, settings=settings, debug=debug)


def _openai(
    model_id: str, *, settings: ModelSettings, base_dir: Path | None = None, debug: bool = False
) -> Model:
    """``openai:<model>`` on Chat Completions (key from ``OPENAI_API_KEY``; any key for a
    local OpenAI-compatible server at ``base_url``)."""
    from relay.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(model_id, settings=settings, debug=debug)


PROVIDERS: dict[str, ModelFactory] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "scripted": _scripted,
}
"""Provider prefix → factory."""


def create_model(
    spec: str,
    *,
    base_url: str | None = None,
    settings: ModelSettings | None = None,
    base_dir: Path | None = None,
    debug: bool = False,
) -> Model:
    """Build the model named by ``spec``.

    Args:
        spec: ``PROVIDER:MODEL``, e.g. ``anthropic:claude-sonnet-4-6``, ``openai:gpt-4.1`` or
            ``scripted:path/to/script.yaml``. Only the first colon separates the provider.
        base_url: an API base URL for OpenAI-compatible servers (``--base-url``); given, it
            replaces ``settings.base_url``.
        settings: the base URL, output cap and timeouts of the calls (default: the defaults
            of :class:`ModelSettings`).
        base_dir: the directory relative script paths are resolved against (default: cwd).
        debug: real providers keep the raw wire request/response of each call (secrets
            redacted) for the transcript (``--debug``).

    Raises:
        ConfigError: no colon, an empty model, an unknown provider (the message names the value
            and the allowed prefixes), or whatever the provider's factory rejects.
    """
    allowed = ", ".join(f"{p}:" for p in sorted(PROVIDERS))
    provider, sep, model_id = spec.strip().partition(":")
    if not sep or not provider or not model_id.strip():
        raise ConfigError(
            f"invalid model {spec!r}: expected PROVIDER:MODEL with a provider prefix of "
            f"{allowed} (e.g. scripted:script.yaml)"
        )
    factory = PROVIDERS.get(provider)
    if factory is None:
        raise ConfigError(
            f"invalid model {spec!r}: unknown provider {provider!r}; allowed prefixes: {allowed}"
        )
    settings = settings or ModelSettings()
    if base_url is not None:
        settings = replace(settings, base_url=base_url)
    return factory(model_id.strip(), settings=settings, base_dir=base_dir, debug=debug)
