"""Provider keys leave relay's process environment as soon as relay starts (SPEC §14).

Every process relay starts inherits its environment unless told otherwise: git (gitpython runs
``git version`` the moment it is imported), helper programs, test commands. Rather than rely on
every one of those call sites, relay takes the model providers' secrets out of ``os.environ``
before anything else is imported and keeps them here; the provider clients get them passed
explicitly.

Taking a variable out of ``os.environ`` does not take it out of the kernel's copy of the
environment the process was started with (``/proc/<pid>/environ``), which the sandbox's PID
namespace hides but a command run as root without the sandbox can read. So the ``relay``
command re-executes itself at start (:func:`reexec_without_secrets`, issue 27): the new
process's environment block holds no credential variable; their values come through an
inherited pipe named by :data:`HELD_FD_VARIABLE`, read (and closed) when :mod:`relay` is
imported. Provider secrets are then held here; other secrets (a variable whose name has KEY,
TOKEN, SECRET, PASSWORD or CREDENTIAL in it, such as the ``GH_TOKEN`` a push needs) are put
back into ``os.environ``: in the process's memory, not in its environment block.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from collections.abc import MutableMapping

from relay.sandbox.env import has_secret_word, is_credential_name, is_provider_name

__all__ = [
    "HELD_FD_VARIABLE",
    "held",
    "hold_provider_keys",
    "provider_key",
    "reexec_without_secrets",
    "secret_values",
]

HELD_FD_VARIABLE = "RELAY_HELD_SECRETS_FD"
"""The variable naming the inherited pipe a re-executed relay reads its secrets from."""

_MAX_PIPE_BYTES = 60_000
"""At most this much goes through the pipe: it is written whole before the re-execution (a
pipe's buffer is 64 KiB); more credentials than that and relay goes on without re-executing."""

_held: dict[str, str] = {}
_taken: list[str] = []
"""Names of the credential variables this process's environment block holds (moved out of
``os.environ``, or to be moved out of the block by :func:`reexec_without_secrets`)."""


def _is_provider_variable(name: str) -> bool:
    """A provider's variable, moved out of ``os.environ`` at start (SPEC §14)."""
    return is_provider_name(name) and is_credential_name(name)


def hold_provider_keys(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Move every provider secret (a provider's prefix and a credential word in the name, e.g.
    ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``) out of ``environ``
    (default ``os.environ``) into relay's memory, and take the secrets a re-executing relay
    passed through :data:`HELD_FD_VARIABLE` (the variable is removed). Returns the names moved
    out of ``environ``."""
    source = os.environ if environ is None else environ
    moved = [n for n in list(source) if _is_provider_variable(n)]
    for name in moved:
        _held[name] = source.pop(name)
    others = [n for n in source if has_secret_word(n) and n != HELD_FD_VARIABLE]
    if HELD_FD_VARIABLE in source:  # re-executed (or told so): never once more
        _receive(source)
        _taken.clear()
    else:
        _taken[:] = [*moved, *others]
    return moved


def provider_key(name: str) -> str | None:
    """The value of the provider variable ``name``: from the environment if it is set there
    now (tests, embedding programs), else the one relay took at start."""
    return os.environ.get(name) or _held.get(name)


def held() -> dict[str, str]:
    """A copy of the secrets relay holds (for redaction)."""
    return dict(_held)


def secret_values() -> list[tuple[str, str]]:
    """``(variable name, value)`` of every provider secret relay knows (a provider's variable
    with a secret word in its name: ``OPENAI_API_KEY``, not ``OPENAI_BASE_URL``): those it
    holds and those set in ``os.environ`` now (tests, embedding programs). What no commit and no push
    may carry (:mod:`relay.gitsecrets`)."""
    pairs = {(n, v) for n, v in os.environ.items() if _is_provider_variable(n)}
    pairs.update(_held.items())
    return sorted((n, v) for n, v in pairs if has_secret_word(n))


def reexec_without_secrets() -> None:
    """Re-execute this process (same interpreter, same command line, same PID) with no
    secret variable in its environment block (a provider's secret, or a name with a secret
    word: :func:`relay.sandbox.env.has_secret_word`), when the block holds one; their values go
    through an inherited pipe (:data:`HELD_FD_VARIABLE`). Returns only when nothing needs to
    be done or the re-execution is impossible (not POSIX, too much to pass, ``execve``
    refused): relay then goes on as before, its keys out of ``os.environ`` only. Call it
    first thing in the process's own entry point, never when relay runs inside another
    program (a test calling :func:`relay.cli.main`)."""
    if not any(map(has_secret_word, _taken)) or os.name != "posix" or not sys.executable:
        return  # (``AWS_REGION`` is held too, but it is no secret)
    extra = {n: os.environ[n] for n in _taken if n in os.environ and n not in _held}
    data = json.dumps({"relay": 1, "held": _held, "environ": extra}).encode("utf-8")
    if len(data) > _MAX_PIPE_BYTES:
        return
    env = {n: v for n, v in os.environ.items() if n not in extra}
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)  # fits in the pipe's buffer: never blocks
    finally:
        os.close(write_end)
    os.set_inheritable(read_end, True)
    env[HELD_FD_VARIABLE] = str(read_end)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    argv = [sys.executable, *sys.orig_argv[1:]]
    try:
        os.execve(sys.executable, argv, env)
    except OSError:
        os.close(read_end)


def _receive(source: MutableMapping[str, str]) -> None:
    """Take the secrets a re-executing relay wrote into the pipe :data:`HELD_FD_VARIABLE`
    names (removed from ``source``), then close the pipe. Anything else under that name — a
    number that is no pipe's, a pipe still open for writing, text that is not relay's — is
    ignored without reading further or waiting."""
    text = source.pop(HELD_FD_VARIABLE, None)
    if text is None or not text.isdigit() or int(text) < 3:
        return
    fd = int(text)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
    except OSError:
        return
    try:
        os.set_blocking(fd, False)
        data = _read_all(fd)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    try:
        message = json.loads(data)
    except ValueError:
        return
    if not isinstance(message, dict) or message.get("relay") != 1:
        return
    for key, into in (("held", _held), ("environ", os.environ)):
        values = message.get(key)
        if isinstance(values, dict):
            for name, value in values.items():
                if isinstance(name, str) and isinstance(value, str) and "\0" not in value:
                    into[name] = value


def _read_all(fd: int) -> bytes:
    """What the pipe ``fd`` (non-blocking) holds up to its end; stops without waiting when
    its writer is still open (``BlockingIOError``) or after :data:`_MAX_PIPE_BYTES`."""
    parts: list[bytes] = []
    size = 0
    while size <= _MAX_PIPE_BYTES:
        try:
            block = os.read(fd, 65536)
        except BlockingIOError:
            return b""  # not relay's pipe: its writer is open
        if not block:
            break
        parts.append(block)
        size += len(block)
    return b"".join(parts)
