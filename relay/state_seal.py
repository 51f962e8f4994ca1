"""relay's seal on the state it leaves where others can write (SPEC §14; issue 27).

The goal state relay commits on a goal's branch (``.relay/goal.json``) is written by whoever can
push the branch, and the caches in relay's state folder by whatever can write that folder (the
model's commands, without the sandbox). relay seals what it writes there with an HMAC-SHA256
over the canonical JSON of the content, and trusts on reading only what carries a seal made
with a key of this machine's:

* ``RELAY_STATE_KEY`` (a CI secret: the same value on every machine that continues the goals
  of one repository), at least :data:`MIN_KEY_CHARS` printable ASCII characters; or else
* the user's key file, ``$XDG_CONFIG_HOME/relay/state.key`` (else ``~/.config/relay/``),
  created with 32 random bytes, mode 0600, on first use. The sandbox hides that folder from
  the model's commands; without the sandbox they can read it (docs/audit.md).

A seal is ``{"alg": "HMAC-SHA256", "key_id": …, "mac": …}``: ``key_id`` names the key (an HMAC
of a fixed text, never the key), ``mac`` covers a purpose (``goal-state``, ``audit-base``) and
the content, so that a seal made for one kind of file never verifies another.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from relay.config_layers import user_config_path
from relay.errors import ConfigError

__all__ = [
    "ALGORITHM",
    "KEY_ENV",
    "MIN_KEY_CHARS",
    "StateKey",
    "Verdict",
    "canonical",
    "check_seal",
    "key_file_path",
    "seal",
    "sealing_key",
    "verifying_keys",
]

KEY_ENV = "RELAY_STATE_KEY"
"""The variable holding the key (e.g. a CI secret); when set, the key file is not needed."""
MIN_KEY_CHARS = 32
"""The shortest key ``RELAY_STATE_KEY`` may hold."""
KEY_FILE = "state.key"
"""The key file's name, beside the user configuration file."""
ALGORITHM = "HMAC-SHA256"

_HEX = re.compile(r"[0-9a-f]{12}")
"""A key id as :attr:`StateKey.key_id` writes it."""

Status = Literal["sealed", "unsealed", "other_key", "forged"]


@dataclass(frozen=True)
class StateKey:
    """A key relay seals with: its bytes and where it came from (the variable or the file)."""

    secret: bytes
    source: str

    @property
    def key_id(self) -> str:
        """A name of the key that reveals nothing of it (12 hexadecimal digits)."""
        return hmac.new(self.secret, b"relay state key id", hashlib.sha256).hexdigest()[:12]

    def mac(self, purpose: str, payload: Any) -> str:
        """The HMAC-SHA256 of ``purpose`` and the canonical JSON of ``payload``, in hex."""
        data = purpose.encode() + b"\0" + canonical(payload)
        return hmac.new(self.secret, data, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """What a seal says about its content: ``sealed`` (made with ``key``, one of this
    machine's), ``unsealed`` (no seal, or not one relay writes), ``other_key`` (made with a
    key this machine does not have, named ``key_id``), ``forged`` (this machine's key, but
    the content is not what was sealed)."""

    status: Status
    key_id: str | None = None
    key: StateKey | None = None

    @property
    def trusted(self) -> bool:
        return self.status == "sealed"


def canonical(payload: Any) -> bytes:
    """The canonical JSON of ``payload``: sorted keys, no spaces, ASCII, so that the same
    content read back from any file gives the same bytes."""
    return json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode()


def key_file_path(environ: Mapping[str, str] | None = None) -> Path:
    """``state.key`` beside the user configuration file (``$XDG_CONFIG_HOME/relay/``, else
    ``~/.config/relay/``)."""
    return user_config_path(environ).parent / KEY_FILE


def _env_key(environ: Mapping[str, str]) -> StateKey | None:
    """The key of ``RELAY_STATE_KEY`` (None when unset or empty). Raises ``ConfigError``
    naming the variable and what is allowed (never the value) when it is not a key."""
    value = environ.get(KEY_ENV, "").strip()
    if not value:
        return None
    printable = all(" " < ch <= "~" for ch in value)
    if len(value) < MIN_KEY_CHARS or not printable:
        found = f"{len(value)} characters" if printable else "a character that is not printable"
        raise ConfigError(
            f"{KEY_ENV} must hold at least {MIN_KEY_CHARS} printable ASCII characters without "
            f"spaces (found {found}): the key relay seals its goal state with, the same on "
            "every machine that continues a goal, e.g. a CI secret made with "
            "`python3 -c 'import secrets; print(secrets.token_hex(32))'`; unset it to use "
            f"this machine's key file {key_file_path(environ)}"
        )
    return StateKey(value.encode(), KEY_ENV)


def _read_key_file(path: Path) -> StateKey | None:
    """The key in ``path``, None when there is no file. Raises ``ConfigError`` for a file
    that cannot be read or holds no key."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as file:
            text = file.read(4096).decode("ascii", "replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read relay's key file {path}: {exc.strerror}") from None
    if len(text) < MIN_KEY_CHARS or not all(" " < ch <= "~" for ch in text):
        raise ConfigError(
            f"relay's key file {path} holds no key (at least {MIN_KEY_CHARS} printable "
            "characters): remove it to have relay make a new one (goal states sealed with "
            f"the old key then no longer verify), or set {KEY_ENV}"
        )
    return StateKey(text.encode(), str(path))


def _make_key_file(path: Path) -> StateKey:
    """Create ``path`` with a new random key (mode 0600; its folder 0700 when made), unless
    another process made it first: then that one is read. Raises ``ConfigError`` when the
    file cannot be written, naming it and the variable that replaces it."""
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(secrets.token_hex(32).encode() + b"\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another relay made one meanwhile: it wins
            os.link(tmp, path)
    except OSError as exc:
        raise ConfigError(
            f"cannot write relay's key file {path} ({exc.strerror}): relay seals the goal "
            f"state it commits with it; set {KEY_ENV} to a key of at least {MIN_KEY_CHARS} "
            "characters instead"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    key = _read_key_file(path)
    assert key is not None
    return key


def sealing_key(environ: Mapping[str, str] | None = None) -> StateKey:
    """The key relay seals with: ``RELAY_STATE_KEY``, else the key file (made on first use).

    Raises:
        ConfigError: a bad ``RELAY_STATE_KEY``, or a key file that cannot be read or made.
    """
    env = os.environ if environ is None else environ
    key = _env_key(env)
    if key is not None:
        return key
    path = key_file_path(env)
    return _read_key_file(path) or _make_key_file(path)


def verifying_keys(environ: Mapping[str, str] | None = None) -> tuple[StateKey, ...]:
    """The keys a seal may be made with to be trusted here: ``RELAY_STATE_KEY`` and the key
    file, when they exist (nothing is created). Raises ``ConfigError`` for a bad one."""
    env = os.environ if environ is None else environ
    keys = [k for k in (_env_key(env), _read_key_file(key_file_path(env))) if k is not None]
    return tuple(dict.fromkeys(keys))


def seal(payload: Any, purpose: str, key: StateKey) -> dict[str, str]:
    """The seal of ``payload`` for ``purpose`` made with ``key``."""
    return {"alg": ALGORITHM, "key_id": key.key_id, "mac": key.mac(purpose, payload)}


def check_seal(
    payload: Any, found: Any, purpose: str, keys: tuple[StateKey, ...] | None = None
) -> Verdict:
    """What the seal ``found`` (as read from a file) says about ``payload`` (the file's content
    without it), with ``keys`` (default: :func:`verifying_keys`).

    Raises:
        ConfigError: a bad ``RELAY_STATE_KEY`` or key file (when ``keys`` is None).
    """
    if not isinstance(found, dict) or found.get("alg") != ALGORITHM:
        return Verdict("unsealed")
    key_id, mac = found.get("key_id"), found.get("mac")
    if not isinstance(key_id, str) or not _HEX.fullmatch(key_id) or not isinstance(mac, str):
        return Verdict("unsealed")
    for key in verifying_keys() if keys is None else keys:
        if key.key_id != key_id:
            continue
        try:
            expected = key.mac(purpose, payload)
        except ValueError:  # not JSON relay writes (NaN, infinity)
            return Verdict("forged", key_id, key)
        if hmac.compare_digest(expected, mac):
            return Verdict("sealed", key_id, key)
        return Verdict("forged", key_id, key)
    return Verdict("other_key", key_id)
