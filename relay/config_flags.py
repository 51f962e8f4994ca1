"""The one mapping from command-line options to configuration keys (SPEC §12).

``relay run``, ``resume``, ``compare`` and the entries of a ``relay batch`` file all name
their settings with the same option names; :func:`flag_overrides` turns the values given into
the nested overrides :func:`relay.config.load_config` applies last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.errors import ConfigError

__all__ = ["FLAGS", "MODEL_FLAGS", "Flag", "flag_overrides", "resolve_model_spec"]


@dataclass(frozen=True)
class Flag:
    """One option that sets a configuration key.

    Attributes:
        option: the option as typed, e.g. ``--max-rounds`` (named in error messages).
        key: the configuration key it sets, e.g. ``("limits", "max_rounds_total")``.
        when_on: for an on/off option, the value the key gets when the option is given
            (None: the option's own value is the key's value).
        model: a setting of the model and its calls: every command that runs a model
            (``run``, ``resume``, ``compare``) takes it (:mod:`relay.cli.options`).
    """

    option: str
    key: tuple[str, ...]
    when_on: Any = None
    model: bool = False


FLAGS: dict[str, Flag] = {
    "mode": Flag("--mode", ("mode",)),
    "worker": Flag("--worker", ("worker",)),
    "model": Flag("--model", ("model",), model=True),
    "base_url": Flag("--base-url", ("base_url",), model=True),
    "max_output_tokens": Flag("--max-output-tokens", ("max_output_tokens",), model=True),
    "request_timeout": Flag("--request-timeout", ("request_timeout_s",), model=True),
    "connect_timeout": Flag("--connect-timeout", ("connect_timeout_s",), model=True),
    "force_tool_choice": Flag("--force-tool-choice", ("force_tool_choice",), True, model=True),
    "parse_text_calls": Flag("--parse-text-calls", ("tools", "parse_text_calls"), True, model=True),
    "max_rounds": Flag("--max-rounds", ("limits", "max_rounds_total")),
    "max_no_progress": Flag("--max-no-progress", ("limits", "max_no_progress")),
    "token_budget": Flag("--token-budget", ("limits", "token_budget")),
    "time_budget": Flag("--time-budget", ("limits", "time_budget")),
    "unattended": Flag("--unattended", ("on_needs_user_input",), "auto_reply"),
    "push": Flag("--push", ("git", "push"), True),
    "sandbox": Flag("--sandbox", ("sandbox", "mode")),
}
"""Option name (the parameter name of the commands, the key of a batch entry) → :class:`Flag`."""

MODEL_FLAGS = tuple(name for name, flag in FLAGS.items() if flag.model)
"""The options of the model's settings, which every command that runs a model takes."""


def resolve_model_spec(spec: str, base: Path) -> str:
    """``scripted:`` with a relative path becomes absolute (against ``base``), so that the
    goal's stored model works from any folder and on resume; other specs are unchanged."""
    provider, _, rest = spec.partition(":")
    if provider == "scripted" and rest and not Path(rest).is_absolute():
        return f"scripted:{(base / rest).resolve()}"
    return spec


def _value(name: str, flag: Flag, given: Any) -> Any:
    """The configuration value of option ``name`` given as ``given``."""
    if flag.when_on is not None:
        return flag.when_on
    if name == "model":
        return resolve_model_spec(str(given), Path.cwd())  # relative to where it was typed
    if name == "time_budget":
        from relay.config_sections import parse_duration

        try:
            return parse_duration(given)
        except ValueError as exc:
            raise ConfigError(f"{flag.option} {given!r}: {exc}") from None
    return given


def flag_overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """Configuration overrides from option values, as nested dicts for
    :func:`relay.config.load_config`: only the options given override the file (SPEC §12).

    Args:
        values: option name (a key of :data:`FLAGS`) → the value parsed from the command line
            (e.g. typer's ``ctx.params``, or a batch entry); other names are ignored, and
            ``None`` or ``False`` means "not given". ``time_budget`` is seconds or a duration
            such as ``90m``; a relative ``scripted:`` model path is made absolute against the
            current folder.

    Returns:
        e.g. ``{"model": "openai:x", "limits": {"max_rounds_total": 6}}``.

    Raises:
        ConfigError: a time budget that is not a duration (naming the option).
    """
    out: dict[str, Any] = {}
    for name, flag in FLAGS.items():
        given = values.get(name)
        if given is None or given is False:
            continue
        *parents, last = flag.key
        target = out
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = _value(name, flag, given)
    return out
