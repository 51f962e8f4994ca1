"""Configuration: defaults, the user file, ``relay.yaml``, ``--config``, the goal file's front
matter, ``RELAY_*`` variables, then flags (SPEC §12; the layers: :mod:`relay.config_layers`).

Every key is a pydantic field with a docstring (the sections are in
:mod:`relay.config_sections`); unknown keys and bad values raise
:class:`relay.errors.ConfigError` with a message that names the key, the value and what is
allowed, in relay's words (:mod:`relay.config_errors`). Values are read strictly by type: a
quoted ``'2'`` is text, not a number. Round limits are positive integers with no "unlimited"
value (SPEC §7.2). The path settings follow the rules of :mod:`relay.config_paths` (checked
before any change). A key under its old name (:data:`RENAMED_KEYS`) still works, with a
deprecation message on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from relay.config_errors import format_validation_error, written_names
from relay.config_flags import FLAGS, Flag, flag_overrides, resolve_model_spec
from relay.config_paths import check_state_on_disk, plain_state_dir, state_overlap
from relay.config_sections import (
    RENAMED_KEYS,
    AuditConfig,
    ContextConfig,
    Deliverable,
    GitConfig,
    GuardConfig,
    Limits,
    PathText,
    Price,
    ProgressConfig,
    SandboxConfig,
    ToolsConfig,
    _Section,
    parse_duration,
    root_of,
    with_new_names,
)
from relay.errors import ConfigError
from relay.models.base import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_REQUEST_TIMEOUT_S,
    ModelSettings,
)
from relay.provider_url import check_base_url
from relay.yaml_load import load_yaml

DEFAULT_AUTO_REPLY = (
    "No one is available. Choose the most reasonable option, record the decision in your "
    "handoff, and continue."
)

__all__ = [
    "DEFAULT_AUTO_REPLY",
    "FLAGS",
    "MACHINE_SETTINGS",
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
    "settings_carried",
    "upgrade_keys",
    "validate_config",
    "without_machine_settings",
]


class Config(_Section):
    """The whole configuration of a run (``relay.yaml``; SPEC §12)."""

    model: str | None = None
    """``anthropic:<model>``, ``openai:<model>`` or ``scripted:<file.yaml>`` (a relative
    script path is relative to the folder of this file)."""
    base_url: str | None = None
    """Base URL of the provider's API (a local OpenAI-compatible server, a proxy, an
    Anthropic-compatible endpoint)."""
    max_output_tokens: PositiveInt = DEFAULT_MAX_OUTPUT_TOKENS
    """Output tokens per model call, sent to every provider (``max_tokens``; on OpenAI's own
    API ``max_completion_tokens``); an answer cut off there has stop reason ``max_tokens``."""
    request_timeout_s: PositiveFloat = DEFAULT_REQUEST_TIMEOUT_S
    """Seconds a model call waits for the answer; a call that times out is retried (at most
    ``limits.api_retries`` times per step) and its time counts against the time budget."""
    connect_timeout_s: PositiveFloat = DEFAULT_CONNECT_TIMEOUT_S
    """Seconds to open the connection to the model's API (a server that is down fails fast)."""
    mode: Literal["relay", "session"] = "relay"
    """``relay``: a fresh context each round; ``session``: one long context."""
    worker: Literal["builtin", "claude-code", "codex"] = "builtin"
    """Who does a round's work: ``builtin`` (relay's own tools), ``claude-code`` or ``codex``
    (a fresh agent process per round, with relay as its API gateway; docs/workers.md)."""
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
    prompts_dir: PathText | None = None
    """Folder of prompt templates overriding the shipped ones (same file names)."""
    state_dir: str | None = None
    """Folder of relay's state (store, run folders, inbox): relative to the repository root
    (kept out of git through `.git/info/exclude`) or absolute; none = `relay/` in the working
    tree's git directory (`.git/relay/`), out of the working tree and the model's reach."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """USD per million tokens per model: ``{model: {input, cache_write, cached_input, output}}``;
    a model listed here is priced at these flat rates instead of the genai-prices catalogue."""

    @field_validator("state_dir")
    @classmethod
    def _state_folder(cls, value: str | None, info: ValidationInfo) -> str | None:
        """The rules of :mod:`relay.config_paths`: inside the repository when relative, never
        the root, a folder containing it, a file, or the place of the progress file."""
        if value is None:
            return None
        plain_state_dir(value)
        root = root_of(info)
        if root is not None:
            check_state_on_disk(root, value)
        progress = info.data.get("progress")
        if isinstance(progress, ProgressConfig):
            clash = state_overlap(root, value, progress.path)
            if clash:
                raise ValueError(clash)
        return value

    def model_settings(self) -> ModelSettings:
        """The settings of the model's calls (base URL, output cap, timeouts)."""
        return ModelSettings(
            self.base_url, self.max_output_tokens, self.request_timeout_s, self.connect_timeout_s
        )

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        """An http:// or https:// URL with a host (:func:`relay.provider_url.check_base_url`)."""
        return None if value is None else check_base_url(value)

    @field_validator("worker")
    @classmethod
    def _worker_mode(cls, value: str, info: ValidationInfo) -> str:
        """An agent worker is a fresh process per round: relay mode only (SPEC §15)."""
        if value != "builtin" and info.data.get("mode") == "session":
            raise ValueError(f"worker {value} starts a fresh agent each round: use mode relay")
        return value

    @field_validator("model")
    @classmethod
    def _model_spec(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if ":" not in value or not value.split(":", 1)[1]:
            raise ValueError("expected PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-6")
        return value


def validate_config(
    data: dict[str, Any],
    source: str,
    *,
    root: Path | None = None,
    written: dict[tuple[str, str], str] | None = None,
    variables: dict[tuple[str, ...], str] | None = None,
) -> Config:
    """Validate a configuration mapping (keys under old names are read under the new ones).

    Args:
        data: the mapping (from YAML, the front matter, flags, or stored with a goal).
        source: where it came from (a file, ``the command-line flags``), for messages.
        root: the repository root, for the path checks that look at the working tree
            (:mod:`relay.config_paths`); None: only the checks that need no file system.
        written: ``{(section, new key): old key}`` for keys the user wrote under an old
            name before ``data`` was renamed, so that a message names the key as written
            (keys under an old name in ``data`` itself are found without it).
        variables: ``{key path: RELAY_* variable}`` of the keys set by the environment
            (:mod:`relay.config_env`): messages name the variable.

    Raises:
        ConfigError: naming the source, the key as written, the value and what is allowed.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid configuration in {source}: expected a mapping of keys")
    names = {**written_names(data), **(written or {})}
    data = upgrade_keys(data, source, warn=False)
    try:
        return Config.model_validate(data, context={"root": root})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, Config, names, variables)) from None


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file that must hold a mapping (an empty file is ``{}``; a UTF-8 BOM is
    allowed).

    Raises ``ConfigError`` when the file is unreadable, not UTF-8, not YAML, nested too deeply
    to read, or not a mapping."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    data = load_yaml(text, str(path))
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


def upgrade_keys(
    data: dict[str, Any], source: str | None = None, *, warn: bool = True
) -> dict[str, Any]:
    """``data`` (a configuration mapping) with every key of :data:`RENAMED_KEYS` under its new
    name. With ``source`` (where the data came from: a file, the front matter), each old name
    found is said on stderr once per source (unless ``warn`` is false), naming the old and the
    new key; without it (the settings stored with a goal by an older relay) nothing is said.

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
            if warn and source is not None and (source, old) not in _warned:
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
    """Build the effective configuration of the working tree ``repo`` from its layers, lowest
    first: defaults, the user file, ``<repo>/relay.yaml``, ``config_path`` (``--config``), the
    goal file's ``front_matter``, ``RELAY_*`` variables, then ``overrides`` from flags (nested
    dicts, e.g. ``{"limits": {"max_rounds_total": 6}}``; :func:`flag_overrides` builds them).
    The rules are in :mod:`relay.config_layers`. Keys under an old name are renamed
    (:func:`upgrade_keys`, a deprecation message per source). Nothing is changed on disk.

    Raises:
        ConfigError: a file that cannot be read or is not a YAML mapping, an unknown key or a
            bad value (naming the source, the key or variable, the value and what is allowed).
    """
    from relay.config_layers import effective_config

    return effective_config(repo, config_path, front_matter, overrides).config


MACHINE_SETTINGS = ("sandbox", "base_url")
"""Settings of the machine a run runs on (SPEC §14): how its commands are confined and where
its provider key is sent. A goal's branch never carries them (its goal state is written by
whoever can push the branch: carried, they would turn off a CI machine's sandbox or send its
key to their server), and a goal file's front matter may not set them; the goal's own store
keeps them for the runs of this machine."""


def without_machine_settings(overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` (a goal's start settings) without :data:`MACHINE_SETTINGS`."""
    return {key: value for key, value in overrides.items() if key not in MACHINE_SETTINGS}


def settings_carried(overrides: dict[str, Any]) -> dict[str, Any]:
    """The settings a goal was started with (front matter, flags, as its store keeps them) as
    a later run of it applies them: old key names upgraded."""
    return upgrade_keys(overrides)  # an older relay stored the old key names
