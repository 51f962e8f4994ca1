"""The scripted model's script format (SPEC §13), as pydantic models of what a script may say.

Unknown keys and bad values are rejected (``extra="forbid"``, strict types); the parser
(:mod:`relay.models.script_tree`) turns the errors into messages naming the entry, the value
and what is allowed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from relay.models.base import Usage

__all__ = [
    "ENTRY_SHAPES",
    "ERROR_DEFAULTS",
    "ERROR_KINDS",
    "ScriptError",
    "ScriptFile",
    "ScriptRepeat",
    "ScriptResponse",
    "ScriptToolCall",
    "ScriptUsage",
]

ERROR_DEFAULTS: dict[str, tuple[str, str | None]] = {
    "rate_limit": ("Rate limit reached for requests.", "rate_limit_exceeded"),
    "overloaded": ("Overloaded", "overloaded_error"),
    "insufficient_quota": (
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
    ),
    "auth": ("Invalid API key. Check the key in your environment.", "invalid_api_key"),
    "bad_request": ("Invalid request: the request body could not be processed.", "invalid_request"),
    "timeout": ("Request timed out.", None),
    "connection": ("Connection error: could not reach the API server.", None),
    "server": ("Internal server error. Please retry your request.", "server_error"),
    "permission": (
        "Your API key does not have permission to use the specified resource.",
        "permission_denied",
    ),
    "not_found": (
        "The model does not exist or you do not have access to it.",
        "model_not_found",
    ),
}
"""``kind -> (default message, default code)`` of the error entries a script may contain."""

ERROR_KINDS: tuple[str, ...] = tuple(ERROR_DEFAULTS)
"""Error kinds allowed in ``{error: KIND}`` entries (SPEC §13; SPEC §7.6 classifies them)."""

ENTRY_SHAPES = (
    "a response {text, tool_calls, usage}, a repeat block {repeat, response | responses} "
    "or an error {error, message, retry_after_s, code}"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _whole_number(value: Any, *, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"must be {what}")
    return value


class ScriptUsage(_Strict):
    """Reported usage of one scripted response, in tokens (all optional, default 0)."""

    input: int = 0
    """Uncached input tokens."""
    cached: int = 0
    """Cache reads (reported, not counted in the token budget)."""
    cache_write: int = 0
    """Cache writes."""
    output: int = 0
    """Output tokens."""

    @field_validator("input", "cached", "cache_write", "output", mode="before")
    @classmethod
    def _count(cls, value: Any) -> int:
        return _whole_number(value, minimum=0, what="a whole number of tokens, 0 or more")

    def to_usage(self) -> Usage:
        """The provider-neutral :class:`Usage` (``estimated`` false: the script reports it)."""
        return Usage(
            uncached_input=self.input,
            cache_write=self.cache_write,
            cached_input=self.cached,
            output=self.output,
        )


class ScriptToolCall(_Strict):
    """One scripted tool call: ``name`` (required), ``arguments`` (a mapping), optional ``id``."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)

    @field_validator("arguments", mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must be a mapping of argument names to values")
        return value


class ScriptResponse(_Strict):
    """A plain response entry; ``{}`` is an empty response (no text, no tool calls)."""

    text: str | None = None
    tool_calls: list[ScriptToolCall] | None = None
    usage: ScriptUsage | None = None


class ScriptError(_Strict):
    """An error entry: the call raises ``ModelError(kind)``; it consumes the entry."""

    error: str
    message: str | None = Field(default=None, min_length=1)
    retry_after_s: float | None = Field(default=None, ge=0)
    code: str | None = Field(default=None, min_length=1)

    @field_validator("error", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        if value not in ERROR_KINDS:
            raise ValueError(f"unknown error kind; allowed: {', '.join(ERROR_KINDS)}")
        return value


class ScriptRepeat(_Strict):
    """A repeat entry: ``response`` (one entry) or ``responses`` (a block) repeated ``repeat``
    times. The nested entries are checked separately, so they are kept raw here."""

    repeat: int
    response: Any = None
    responses: list[Any] | None = None

    @field_validator("repeat", mode="before")
    @classmethod
    def _positive(cls, value: Any) -> int:
        return _whole_number(value, minimum=1, what="a positive whole number (1, 2, …)")


class ScriptFile(_Strict):
    """The top level of a script."""

    responses: list[Any]
    rejects_forced_tool_choice: bool = False
    when_exhausted: Literal["error", "repeat_last"] = "error"

    @field_validator("responses", mode="after")
    @classmethod
    def _not_empty(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("a script needs at least one entry")
        return value

    @field_validator("when_exhausted", mode="before")
    @classmethod
    def _exhausted(cls, value: Any) -> Any:
        if value not in ("error", "repeat_last"):
            raise ValueError("allowed: error (fail with script_exhausted), repeat_last")
        return value
