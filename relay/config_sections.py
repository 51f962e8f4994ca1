"""The models of ``relay.yaml``'s sections and items (SPEC §12): limits, audit, guard, git,
progress, tools, sandbox, context, deliverables, prices.

Every key is a pydantic field with a docstring (``relay.yaml`` carries each docstring as the
comment above its key). :mod:`relay.config` assembles them into :class:`relay.config.Config`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from relay.config_paths import check_path_text, check_progress_on_disk, plain_progress_path
from relay.guard.settings import DEFAULT_WEIGHTS


class _Section(BaseModel):
    """A section of the configuration: unknown keys are errors, and values are taken strictly
    by type (pydantic's strict mode): a quoted ``'2'`` is text, not a number, and YAML's
    ``true``/``yes`` is no number either; a whole number is a number (``api_backoff_s: 2``).
    Numbers are finite (``.inf`` and ``.nan`` are refused: no setting means "unlimited").
    Validation may carry ``context={"root": <repository root>}`` for the path checks that
    look at the working tree (:mod:`relay.config_paths`)."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_default=True,
        strict=True,
        allow_inf_nan=False,
    )


PathText = Annotated[str, AfterValidator(check_path_text)]
"""A path setting: no NUL, no name over 255 bytes, no path over 4095 (:mod:`relay.config_paths`)."""


def root_of(info: ValidationInfo) -> Path | None:
    """The repository root validation was given (``context={"root": ...}``), if any."""
    context = info.context if isinstance(info.context, dict) else {}
    root = context.get("root")
    return Path(root) if root is not None else None


RENAMED_KEYS: dict[str, dict[str, str]] = {
    "limits": {"max_rounds_without_progress": "max_no_progress"},
}
"""Configuration keys that were renamed, per section: ``{section: {old: new}}``. The old name
keeps working; :func:`relay.config.load_config` says on stderr that it is deprecated."""


def with_new_names(section: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """``section`` (one section's mapping) with the ``renames`` (``{old: new}``) applied.

    Raises ``ValueError`` when a key is given under both names (which one would win?)."""
    out = dict(section)
    for old, new in renames.items():
        if old in out:
            if new in out:
                raise ValueError(f"give {new} only ({old} is its deprecated old name)")
            out[new] = out.pop(old)
    return out


def _read_as(section: str, key: str) -> AliasChoices:
    """The names a key of ``section`` is read under: its own and its old ones (RENAMED_KEYS)."""
    return AliasChoices(key, *(old for old, new in RENAMED_KEYS[section].items() if new == key))


def parse_duration(value: Any) -> float | None:
    """Parse a duration into seconds: a number of seconds, or ``"90s"``, ``"90m"``, ``"8h"``,
    ``"1h30m"``. ``None`` stays ``None``. Raises ``ValueError`` for anything else."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("expected seconds or a duration such as 90m or 8h")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smhd])", text)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != text.replace(" ", ""):
        raise ValueError("expected seconds or a duration such as 90m, 8h or 1h30m")
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return float(sum(float(n) * scale[u] for n, u in parts))


class Limits(_Section):
    """Round limits, budgets and API retry policy (SPEC §7.2, §7.4, §7.6)."""

    max_rounds_total: PositiveInt = 50
    """Rounds in total before the goal stops as ``limit_reached``/``total_rounds``."""
    max_no_progress: PositiveInt = Field(5, validation_alias=_read_as("limits", "max_no_progress"))
    """Rounds in a row without a real tool call (or with rejected update_goal) before stopping
    (formerly ``max_rounds_without_progress``, still accepted)."""
    blocked_accept_at: PositiveInt = 3
    """The n-th ``blocked`` report of a goal is accepted; earlier ones are rejected."""
    max_steps_per_round: PositiveInt = 40
    """Model calls per round; the round ends after this many."""
    auto_replies: PositiveInt = 2
    """With ``on_needs_user_input: auto_reply``: automatic answers before stopping."""
    token_budget: PositiveInt | None = None
    """Tokens (uncached input + cache writes + output) for the goal; none = no token budget."""
    time_budget: PositiveFloat | None = None
    """Wall time in seconds (or ``90m``, ``8h``) while the goal is active; none = no time budget."""
    cost_budget: PositiveFloat | None = None
    """USD for the goal, each model call priced with genai-prices' data or ``prices`` (below);
    none = no cost budget."""
    api_retries: Annotated[int, Field(ge=0)] = 5
    """Retries per step of a transient model error (rate limit, overload, 5xx, timeout)."""
    api_backoff_s: PositiveFloat = 1.0
    """Base of the exponential backoff between retries, in seconds (capped at 60 s)."""
    api_max_wait_s: PositiveFloat = 120.0
    """Longest provider ``Retry-After`` honoured, in seconds; a longer one stops the run."""

    @field_validator("time_budget", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value)

    @field_validator(
        "max_rounds_total",
        "max_no_progress",
        "blocked_accept_at",
        "max_steps_per_round",
        "auto_replies",
        mode="before",
    )
    @classmethod
    def _no_unlimited(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("a positive whole number is required; there is no unlimited setting")
        return value


class AuditConfig(_Section):
    """Completion audit settings (SPEC §9)."""

    command_timeout_s: PositiveFloat = 600.0
    """Default timeout of a ``command`` deliverable that gives no ``timeout_s``, in seconds."""
    evidence_chars: PositiveInt = 2000
    """Characters of command output kept as evidence (the tail)."""
    suspicious: Literal["reject", "warn"] = "reject"
    """What a finding of the suspicious-code scan does (code that is not a test and ends,
    traces or detects the test run, docs/audit.md): ``reject`` rejects ``complete``,
    ``warn`` accepts it with a warning."""


class GuardConfig(_Section):
    """Early-termination risk engine (SPEC §8)."""

    enabled: bool = True
    """Turn the guard on or off."""
    threshold: Annotated[int, Field(gt=0, le=100)] = 70
    """Risk score at which the goal is terminated."""
    weights: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS)
    )
    """Weight of each event kind added to the score."""
    detectors: list[Literal["loop", "drift", "tool_failures", "api_errors", "tamper"]] = Field(
        default_factory=lambda: ["loop", "drift", "tool_failures", "api_errors", "tamper"]
    )
    """Enabled detectors."""
    loop_window: PositiveInt = 4
    """Previous rounds compared with each round by the loop detector."""
    loop_similarity: Annotated[float, Field(gt=0, le=1)] = 0.95
    """Similarity of action sequences at or above which two rounds count as a loop."""
    repeat_limit: PositiveInt = 5
    """Near-identical calls with the same result in a row inside a round that count as a loop."""
    failure_streak: PositiveInt = 3
    """Failed real tool calls in a row that raise a ``tool_failures`` event."""
    decay: Annotated[float, Field(ge=0, le=1)] = 0.5
    """Factor applied to the score after a productive round without new events."""
    drift: Literal["lexical", "embedding", "off"] = "lexical"
    """Drift scorer."""

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, value: dict[str, int]) -> dict[str, int]:
        known = {"loop", "drift", "tool_failures", "api_errors", "tamper"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown event kind {unknown[0]!r}; allowed: {sorted(known)}")
        defaults = GuardConfig.model_fields["weights"].default_factory()  # type: ignore[misc]
        return {**defaults, **value}


class GitConfig(_Section):
    """Git behaviour (SPEC §11)."""

    branch_prefix: str = "relay/"
    """Prefix of the branch a new goal creates (``relay/<goal-slug>``)."""
    log_commits: PositiveInt = 10
    """Recent commits summarised in each round message."""
    push: bool = False
    """Push the branch after each round (never force)."""
    author_name: str = "goal-relay"
    """Author name of relay's commits when the repository sets none."""
    author_email: str = "relay@localhost"
    """Author e-mail of relay's commits when the repository sets none."""


class ProgressConfig(_Section):
    """The progress file (SPEC §6)."""

    path: str = ".relay/progress.md"
    """Path of the progress file, relative to the repository root."""
    keep_rounds: PositiveInt = 5
    """Most recent rounds kept in full; older rounds are one line each."""
    max_chars: Annotated[int, Field(ge=2000)] = 12000
    """Upper bound of the whole file, in characters."""

    @field_validator("path")
    @classmethod
    def _file_in_the_tree(cls, value: str, info: ValidationInfo) -> str:
        """A file inside the working tree (:mod:`relay.config_paths`), in its plain form."""
        plain = plain_progress_path(value)
        root = root_of(info)
        if root is not None:
            check_progress_on_disk(root, plain)
        return plain


class ToolsConfig(_Section):
    """Worker tools (SPEC §5)."""

    output_limit_bytes: Annotated[int, Field(ge=256)] = 16384
    """Tool output the model sees: characters of a ``shell`` result's text (not bytes of the
    raw output; a cut output that is mostly not text is one line), bytes of a file
    ``read_file`` shows; more is cut to head + tail with a marker."""
    kept_output_bytes: Annotated[int, Field(ge=4096)] = 8 * 1024 * 1024
    """Bytes of a ``shell`` command's output kept in the run folder when it was cut: the first
    and last halves, with a note between them naming the full size and the bytes dropped."""
    shell_timeout_s: PositiveFloat = 120.0
    """Default timeout of a ``shell`` call, in seconds (the process group is killed)."""
    max_shell_timeout_s: PositiveFloat = 3600.0
    """Largest ``timeout_s`` the model may ask for in a ``shell`` call, in seconds."""
    protected_paths: list[PathText] = Field(default_factory=list)
    """Extra paths or globs the file tools refuse to write (the progress file, ``relay.yaml``
    and the goal file are always protected)."""
    parse_text_calls: bool = False
    """Run a tool call the model wrote as text (a JSON block, ``<tool_call>`` tags) as a real
    tool call, when its answer called no tool; off: relay tells the model to call tools."""

    def context_limits(self) -> dict[str, float]:
        """The limits of :class:`relay.tools.ToolContext` these settings give, by field name."""
        return {
            "output_limit_bytes": self.output_limit_bytes,
            "kept_output_bytes": self.kept_output_bytes,
            "shell_timeout_s": self.shell_timeout_s,
            "max_shell_timeout_s": self.max_shell_timeout_s,
        }


class SandboxConfig(_Section):
    """Where the model's commands run (SPEC §14; docs/sandbox.md)."""

    mode: Literal["auto", "required", "off"] = "auto"
    """``auto``: bubblewrap when it works on this machine (checked at start), else off with a
    loud warning; ``required``: refuse to start without it; ``off``: never (unconfined)."""
    network: Literal["allow", "deny"] = "deny"
    """Network access of sandboxed commands: ``deny`` (only a private loopback; no package
    downloads, no exfiltration of what the model can read) or ``allow``."""
    writable_paths: list[PathText] = Field(default_factory=list)
    """Folders outside the repository that sandboxed commands may write (``~`` allowed), e.g.
    tool caches such as ``~/.cache/pip``; everything else outside the tree is read-only."""
    hidden_paths: list[PathText] = Field(default_factory=list)
    """Files and folders hidden from sandboxed commands on top of the built-in list of
    credential files (``~/.ssh``, ``~/.aws``, shell start-up files, …)."""
    pid_namespace: Literal["auto", "off"] = "auto"
    """Without bubblewrap, each command in a PID namespace of its own where the kernel allows
    it (``auto``: relay and its watchdog are not visible to it), or never (``off``: commands
    can see and signal relay; for commands that need ``sudo`` as a normal user)."""
    env: list[str] = Field(default_factory=list)
    """Extra environment variable names (``*`` globs allowed) passed to the model's commands on
    top of the built-in allow-list; names that look like credentials, and relay's own ``RELAY_*``
    settings, are refused."""

    @field_validator("env")
    @classmethod
    def _no_credentials(cls, value: list[str]) -> list[str]:
        from relay.sandbox.env import is_credential_name

        settings = [name for name in value if name.upper().startswith("RELAY_")]
        if settings:
            raise ValueError(
                f"{', '.join(settings)}: relay's settings variables (RELAY_*) are never passed "
                "to the model's commands"
            )
        bad = [name for name in value if is_credential_name(name.replace("*", ""))]
        if bad:
            raise ValueError(
                f"{', '.join(bad)} look like credentials, which are never passed to the "
                "model's commands (names containing KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, "
                "or a provider's prefix such as ANTHROPIC_ or OPENAI_)"
            )
        return value


class ContextConfig(_Section):
    """Session-mode context management (SPEC §3)."""

    max_tokens: PositiveInt = 150000
    """Estimated request size at which the oldest tool results are masked."""


class Deliverable(_Section):
    """One deliverable (SPEC §9): exactly one of ``file``, ``command``, ``changed``."""

    file: PathText | None = None
    """A path that must exist."""
    contains: str | None = None
    """With ``file``: text the file must contain."""
    matches: str | None = None
    """With ``file``: a regular expression the file must match."""
    command: str | None = None
    """A command the orchestrator runs in the repository root; exit 0 required."""
    timeout_s: PositiveFloat | None = None
    """With ``command``: timeout in seconds (default ``audit.command_timeout_s``)."""
    changed: PathText | None = None
    """A glob under which something must have changed since the goal's base commit."""

    @model_validator(mode="after")
    def _one_kind(self) -> Deliverable:
        kinds = [k for k in ("file", "command", "changed") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("a deliverable needs exactly one of file, command, changed")
        if (self.contains or self.matches) and not self.file:
            raise ValueError("contains/matches go with file")
        if self.timeout_s and not self.command:
            raise ValueError("timeout_s goes with command")
        if self.matches:
            try:
                re.compile(self.matches)
            except re.error as exc:
                raise ValueError(f"matches is not a valid regular expression: {exc}") from None
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("file", "command", "changed") if getattr(self, k))

    @property
    def target(self) -> str:
        return str(getattr(self, self.kind))


class Price(_Section):
    """USD per million tokens of one model (SPEC §7.4)."""

    input: Annotated[float, Field(ge=0)] = 0.0
    """Uncached input tokens."""
    cache_write: Annotated[float, Field(ge=0)] = 0.0
    """Tokens written to the prompt cache."""
    cached_input: Annotated[float, Field(ge=0)] = 0.0
    """Tokens read from the prompt cache."""
    output: Annotated[float, Field(ge=0)] = 0.0
    """Output tokens."""
