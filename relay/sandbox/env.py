"""The environment of everything the model's actions run (SPEC §5, §14).

A command the model starts (``shell``, and the audit's test runs of model-written code) never
inherits relay's environment: it gets a new one built from an **allow-list** of variable names
that tools need (paths, locale, language toolchains' homes) plus the names a user adds with
``sandbox.env``. A name that looks like a credential is never passed, whatever list names it:
provider keys cannot reach a process the model starts through its environment.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Mapping

__all__ = [
    "ALLOWED_NAMES",
    "allowed_env",
    "has_secret_word",
    "is_credential_name",
    "is_provider_name",
    "scrubbed_env",
]

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
_PROVIDER_PREFIXES = (
    "ANTHROPIC_",
    "OPENAI_",
    "CLAUDE_",
    "CODEX_",
    "AWS_",
    "AZURE_",
    "GEMINI_",
    "GOOGLE_",
    "VERTEX_",
    "MISTRAL_",
    "COHERE_",
    "GROQ_",
    "DEEPSEEK_",
    "OPENROUTER_",
    "TOGETHER_",
    "FIREWORKS_",
    "PERPLEXITY_",
    "XAI_",
)
"""Name prefixes of model providers' and clouds' variables: never passed on."""

_CREDENTIAL_NAMES = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "NETRC", "KRB5CCNAME"})

ALLOWED_NAMES: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
    "CI",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "PYTHONUTF8",
    "PYTHONIOENCODING",
    "PYTHONDONTWRITEBYTECODE",
    "JAVA_HOME",
    "MAVEN_HOME",
    "GRADLE_HOME",
    "GOPATH",
    "GOROOT",
    "GOCACHE",
    "GOMODCACHE",
    "GOFLAGS",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "NVM_DIR",
    "NODE_PATH",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
)
"""Variables passed on when relay's own environment has them (``*`` is a wildcard)."""

SETTINGS_PREFIX = "RELAY_"
"""relay's settings variables (:mod:`relay.config_env`): never taken from relay's environment,
whatever ``sandbox.env`` allows (a ``*`` glob included); only relay's own marks such as
``RELAY_RUN`` are set for a command (``add``)."""

FIXED: dict[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
}
"""Set in every command's environment: nothing waits for a person or a pager."""


@functools.lru_cache(maxsize=4096)  # asked for every variable of every process relay starts
def is_credential_name(name: str) -> bool:
    """True when a variable named ``name`` is never passed to what the model runs: its name
    contains KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL (any case), it belongs to a model
    provider or cloud (``ANTHROPIC_*``, ``OPENAI_*``, ``AWS_*``, ``GOOGLE_*``, …), or it
    gives access to an agent holding keys (``SSH_AUTH_SOCK``)."""
    upper = name.upper()
    return (
        has_secret_word(name) or upper.startswith(_PROVIDER_PREFIXES) or upper in _CREDENTIAL_NAMES
    )


def has_secret_word(name: str) -> bool:
    """True when ``name`` contains KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL (any
    case): its value is a secret (``GH_TOKEN``), unlike ``AWS_REGION`` or ``SSH_AUTH_SOCK``."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


@functools.lru_cache(maxsize=4096)
def is_provider_name(name: str) -> bool:
    """True when ``name`` belongs to a model provider or cloud (``ANTHROPIC_*``, ``OPENAI_*``,
    ``AWS_*``, …): never passed to anything relay starts, not even to a ``git push``."""
    return name.upper().startswith(_PROVIDER_PREFIXES)


def scrubbed_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``environ`` (default ``os.environ``) without credential variables (see
    :func:`is_credential_name`); everything else is kept."""
    source = os.environ if environ is None else environ
    return {name: value for name, value in source.items() if not is_credential_name(name)}


@functools.lru_cache(maxsize=16)
def _allow_list(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One expression matching every name one of ``patterns`` (``fnmatch`` globs, case
    sensitive) matches: a command's environment is filtered with one match per variable."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns) or "(?!)")


def allowed_env(
    environ: Mapping[str, str] | None = None,
    *,
    extra_names: Iterable[str] = (),
    add: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a command the model's actions start (SPEC §14).

    Args:
        environ: relay's environment (default ``os.environ``); only allow-listed names are
            taken from it.
        extra_names: names or ``*`` globs the user allows on top of :data:`ALLOWED_NAMES`
            (``sandbox.env``).
        add: variables set for this command (e.g. ``{"CI": "1"}`` for the audit).

    Returns:
        A new mapping: allow-listed variables of ``environ`` (never a ``RELAY_*`` one,
        :data:`SETTINGS_PREFIX`), then :data:`FIXED`, then ``add``; a credential name
        (:func:`is_credential_name`) is dropped wherever it comes from.
    """
    source = os.environ if environ is None else environ
    key = (tuple(source.items()), tuple(extra_names), tuple((add or {}).items()))
    env = _ALLOWED.get(key)
    if env is None:
        env = _allowed(key[0], key[1], add or {})
        if len(_ALLOWED) >= 64:
            _ALLOWED.clear()
        _ALLOWED[key] = env
    return dict(env)


_ALLOWED: dict[tuple[object, ...], dict[str, str]] = {}
"""The last answers of :func:`allowed_env` (every command asks, mostly with the same
environment): keyed by the whole environment, so a changed variable is a new answer."""


def _allowed(
    items: tuple[tuple[str, str], ...], extra_names: tuple[str, ...], add: Mapping[str, str]
) -> dict[str, str]:
    allowed = _allow_list((*ALLOWED_NAMES, *extra_names)).match
    env = {
        name: value
        for name, value in items
        if allowed(name) and not name.upper().startswith(SETTINGS_PREFIX)
    }
    env.update(FIXED)
    env.update(add)
    return {name: value for name, value in env.items() if not is_credential_name(name)}
