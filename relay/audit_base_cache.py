"""The base commit's collections kept in relay's state folder, sealed (SPEC §9, §14; issue 27).

Collecting the base commit's tests (:mod:`relay.audit_base`) exports the commit and runs the
collection: seconds per audit. Its result is kept across processes in
``<state_dir>/audit-base/<commit>-<command digest>.json``. Without the sandbox the model's
commands can write that folder, and an empty collection written there would blind the audit's
"tests not run" check. So the file carries relay's seal (:mod:`relay.state_seal`, purpose
:data:`PURPOSE`, over the command, the commit and the ids): a file without a seal that
verifies with this machine's key is ignored, the base commit collected again, and the file
written anew. Without a key (a bad ``RELAY_STATE_KEY``, a key file that cannot be made) the
disk cache is not used at all.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from relay.errors import ConfigError
from relay.fsread import read_regular_text
from relay.fswrite import replace_file
from relay.state_seal import StateKey, check_seal, seal, sealing_key

__all__ = ["PURPOSE", "cache_file", "load_ids", "save_ids"]

PURPOSE = "audit-base"
"""What a cached collection's seal is made for."""
MAX_CACHE_BYTES = 64 << 20
"""A cache file larger than this is not read (collected again instead)."""


def cache_file(cache_dir: Path, commit: str, command: str) -> Path:
    """The cache file of ``command``'s collection at ``commit`` in ``cache_dir``."""
    digest = hashlib.sha256(command.encode()).hexdigest()[:16]
    return cache_dir / f"{commit}-{digest}.json"


def _key() -> StateKey | None:
    try:
        return sealing_key()
    except ConfigError:
        return None


def load_ids(file: Path, command: str, commit: str) -> tuple[str, ...] | None:
    """The test ids cached in ``file`` for ``command`` at ``commit``; None when there is no
    such file, or it is not one relay sealed with this machine's key for them (it is then
    never trusted: the caller collects again)."""
    key = _key()
    text = read_regular_text(file, MAX_CACHE_BYTES) if key is not None else None
    if key is None or text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    payload = {k: v for k, v in data.items() if k != "seal"}
    ids = payload.get("ids")
    if payload.get("command") != command or payload.get("commit") != commit:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return None
    if not check_seal(payload, data.get("seal"), PURPOSE, (key,)).trusted:
        return None
    return tuple(ids)


def save_ids(file: Path, command: str, commit: str, ids: tuple[str, ...]) -> None:
    """Keep ``ids`` (``command``'s collection at ``commit``) in ``file``, sealed; nothing
    when there is no key or the folder cannot be written (the cache is an optimisation)."""
    key = _key()
    if key is None:
        return
    payload = {"command": command, "commit": commit, "ids": list(ids)}
    data = {**payload, "seal": seal(payload, PURPOSE, key)}
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        replace_file(file, json.dumps(data).encode("utf-8"), 0o600)
    except OSError:
        pass
