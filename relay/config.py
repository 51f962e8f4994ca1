"""Configuration: ``relay.yaml`` (or ``--config``), goal-file front matter, then flags (SPEC §12).

Every key is a pydantic field with a docstring (the sections are in
:mod:`relay.config_sections`); unknown keys and bad values raise
:class:`relay.errors.ConfigError` with a message that names the key, the value and what is
allowed. Round limits are positive integers with no "unlimited" value (SPEC §7.2). A key under
its old name (:data:`RENAMED_KEYS`) still works, with a deprecation message on stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from relay.config_flags import FLAGS, Flag, flag_overrides, resolve_model_spec
from relay.config_sections import (
    RENAMED_KEYS,
    AuditConfig,
    ContextConfig,
    Deliverable,
    GitConfig,
    GuardConfig,
    Limits,
    Price,
    ProgressConfig,
    SandboxConfig,
    ToolsConfig,
    _Section,
    parse_duration,
    with_new_names,
)
from relay.errors import ConfigError

DEFAULT_AUTO_REPLY = (
    "No one is available. Choose the most reasonable option, record the decision in your "
    "handoff, and continue."
)

__all__ = [
    "DEFAULT_AUTO_REPLY",
    "FLAGS",
    "RENAMED_KEYS",
    "AuditConfig",
    "Config",
    "ContextConfig",
    "Deliverable",
    "Flag",
    "GitConfig",
    "GuardConfig",
    "Limits",
    "Price",
    "ProgressConfig",
    "SandboxConfig",
    "ToolsConfig",
    "deep_merge",
    "flag_overrides",
    "load_config",
    "parse_duration",
    "read_yaml_mapping",
    "resolve_model_spec",
    "upgrade_keys",
    "validate_config",
]


class Config(_Section):
    """The whole configuration of a run (``relay.yaml``; SPEC §12)."""

    model: str | None = None
    """``anthropic:<model>``, ``openai:<model>`` or ``scripted:<file.yaml>`` (a relative
    script path is relative to the folder of this file); none: ``--model`` must name one."""
    base_url: str | None = None
    """Base URL of the provider's API (OpenAI-compatible servers, proxies)."""
    mode: Literal["relay", "session"] = "relay"
    """``relay``: a fresh context each round; ``session``: one long context."""
    limits: Limits = Field(default_factory=Limits)
    """Round limits, budgets, retry policy."""
    force_tool_choice: bool = False
    """Force a tool call on every step of supervisor-triggered rounds (SPEC §7.5)."""
    on_needs_user_input: Literal["stop", "auto_reply"] = "stop"
    """``stop``: end the run and ask; ``auto_reply``: answer with ``auto_reply`` (unattended)."""
    auto_reply: str = DEFAULT_AUTO_REPLY
    """The answer given to ``needs_user_input`` in unattended runs."""
    deliverables: list[Deliverable] = Field(default_factory=list)
    """What the audit checks before accepting ``complete`` (frozen when the goal starts)."""
    audit: AuditConfig = Field(default_factory=AuditConfig)
    """Completion audit settings."""
    guard: GuardConfig = Field(default_factory=GuardConfig)
    """Early-termination settings."""
    git: GitConfig = Field(default_factory=GitConfig)
    """Git settings."""
    progress: ProgressConfig = Field(default_factory=ProgressConfig)
    """Progress file settings."""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    """Worker tool settings."""
    context: ContextConfig = Field(default_factory=ContextConfig)
    """Session-mode context settings."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Where the model's commands run (bubblewrap sandbox)."""
    prompts_dir: str | None = None
    """Folder of prompt templates overriding the shipped ones (same file names)."""
    state_dir: str | None = None
    """Folder of relay's state (store, run folders, inbox): relative to the repository root
    (kept out of git through `.git/info/exclude`) or absolute; none = `relay/` in the working
    tree's git directory (`.git/relay/`), out of the working tree and the model's reach."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """USD per million tokens per model: ``{model: {input, cache_write, cached_input, output}}``."""

    @field_validator("state_dir")
    @classmethod
    def _state_folder(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip() or "\x00" in value:
            raise ValueError("expected a folder path, or null for the default (.git/relay)")
        if not Path(value).expanduser().is_absolute() and os.path.normpath(value) == ".":
            raise ValueError("the repository root itself cannot be relay's state folder")
        return value

    @field_validator("model")
    @classmethod
    def _model_spec(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if ":" not in value or not value.split(":", 1)[1]:
            raise ValueError("expected PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-6")
        return value


def _format_error(exc: ValidationError, source: str, data: dict[str, Any]) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        key = ".".join(loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            parent = ".".join(loc[:-1])
            allowed = sorted(_fields_at(loc[:-1]))
            where = f" in {parent}" if parent else ""
            lines.append(
                f"  unknown key {key!r}{where}; allowed keys: {', '.join(allowed) or '(none)'}"
            )
            continue
        value = err.get("input")
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {key} = {value!r}: {msg}")
    return "\n".join(lines)


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The pydantic model an annotation holds, and whether it sits in a list or dict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = getattr(annotation, "__origin__", None)
    for arg in getattr(annotation, "__args__", ()):
        model, _ = _model_in(arg)
        if model is not None:
            return model, origin in (list, dict)
    return None, False


def _fields_at(path: list[str]) -> set[str]:
    """The keys allowed at ``path`` (a location in the configuration), for error messages."""
    model: type[BaseModel] | None = Config
    skip_next = False
    for part in path:
        if skip_next:  # a list index or a dict key
            skip_next = False
            continue
        field = model.model_fields.get(part) if model else None
        if field is None:
            return set()
        model, skip_next = _model_in(field.annotation)
    return set(model.model_fields) if model and not skip_next else set()


def validate_config(data: dict[str, Any], source: str) -> Config:
    """Validate a configuration mapping. Raises ``ConfigError`` naming key, value and what is
    allowed; ``source`` names where the data came from (a file, ``flags``)."""
    if not isinstance(data, dict):
        raise ConfigError(f"invalid configuration in {source}: expected a mapping of keys")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, source, data)) from None


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping (an empty file is ``{}``).

    Raises ``ConfigError`` when the file is unreadable, not YAML, or not a mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of configuration keys")
    return data


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Merge ``override`` into a copy of ``base``; nested mappings merge, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


_warned: set[tuple[str, str]] = set()


def upgrade_keys(data: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """``data`` (a configuration mapping) with every key of :data:`RENAMED_KEYS` under its new
    name. With ``source`` (where the data came from: a file, the front matter), each old name
    found is said on stderr once per source, naming the old and the new key; without it (the
    settings stored with a goal by an older relay) nothing is said.

    Raises ``ConfigError`` when a key is given under both names."""
    out = dict(data)
    for section, renames in RENAMED_KEYS.items():
        value = out.get(section)
        if not isinstance(value, dict):
            continue  # not a mapping: validation names the problem
        try:
            out[section] = with_new_names(value, renames)
        except ValueError as exc:
            raise ConfigError(
                f"invalid configuration in {source or 'the stored settings'}: {section}: {exc}"
            ) from None
        for old in sorted(set(value) & set(renames)):
            if source is not None and (source, old) not in _warned:
                _warned.add((source, old))
                print(
                    f"warning: {source}: {section}.{old} is deprecated, use "
                    f"{section}.{renames[old]} (the old name still works for now)",
                    file=sys.stderr,
                    flush=True,
                )
    return out


def load_config(
    repo: Path,
    config_path: Path | None = None,
    front_matter: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Build the effective configuration.

    Order (later wins): defaults, ``config_path`` or ``<repo>/relay.yaml`` if present, the goal
    file's front matter, then ``overrides`` from flags (nested dicts, e.g.
    ``{"limits": {"max_rounds_total": 6}}``; :func:`flag_overrides` builds them). Keys under
    an old name are renamed (:func:`upgrade_keys`, a deprecation message per source). Raises
    ``ConfigError``.
    """
    data: dict[str, Any] = {}
    source = "defaults"
    path = config_path if config_path is not None else repo / "relay.yaml"
    if config_path is not None and not config_path.exists():
        raise ConfigError(f"configuration file {config_path} does not exist")
    if path.exists():
        source = str(path)
        data = upgrade_keys(read_yaml_mapping(path), source)
        validate_config(data, source)
    if front_matter:
        where = "the goal file's front matter"
        data = deep_merge(data, upgrade_keys(front_matter, where))
        validate_config(data, where)
    if overrides:
        source = "the command-line flags"
        data = deep_merge(data, upgrade_keys(overrides, source))
    return validate_config(data, source)
