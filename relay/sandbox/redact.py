"""Secret values never reach the model, the transcript or the store (SPEC §14).

Defence in depth behind the sandbox: relay knows the values of the credential variables in its
own environment (provider keys and the like); any tool result or audit evidence that contains one
of them - a key that sat in a ``.env`` file of the repository, say - has it replaced by
``[redacted: NAME]`` before anything records or sends it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MIN_SECRET_CHARS", "Redactor"]

MIN_SECRET_CHARS = 16
"""Shorter values are not treated as secrets: ``postgres`` or ``true`` would redact ordinary
text, and the model would write the marker back into code. Provider keys are far longer."""

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


@dataclass(frozen=True)
class Redactor:
    """Replaces known secret values in text. ``secrets`` is ``((name, value), …)``, longest
    value first (so that a value containing another is replaced whole)."""

    secrets: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """The values of the secret variables of ``environ`` (default: ``os.environ`` and the
        keys relay holds): names with KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL in them (not
        every provider variable: ``AWS_REGION`` is no secret), values of at least
        :data:`MIN_SECRET_CHARS` characters."""
        if environ is None:
            from relay.secrets import held

            environ = {**held(), **os.environ}
        source = environ
        found = {
            value: name
            for name, value in source.items()
            if any(word in name.upper() for word in _SECRET_WORDS)
            and len(value.strip()) >= MIN_SECRET_CHARS
        }
        ordered = sorted(found.items(), key=lambda item: -len(item[0]))
        return cls(tuple((name, value.strip()) for value, name in ordered))

    def redact_file(self, path: Path, chunk_bytes: int = 1 << 20) -> bool:
        """Replace every secret value in the file at ``path`` in place, reading it in chunks
        (memory stays bounded however large the file is). Returns True when something was
        replaced. OS errors propagate."""
        if not self.secrets:
            return False
        pairs = [(value.encode(), f"[redacted: {name}]".encode()) for name, value in self.secrets]
        keep = max(len(value) for value, _ in pairs) - 1
        changed = False
        tmp = path.with_name(path.name + ".redacting")
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            carry = b""
            while True:
                block = src.read(chunk_bytes)
                data = carry + block
                for value, mark in pairs:
                    if value in data:
                        data, changed = data.replace(value, mark), True
                if not block:
                    dst.write(data)
                    break
                cut = max(0, len(data) - keep)
                dst.write(data[:cut])
                carry = data[cut:]
        if changed:
            os.replace(tmp, path)
        else:
            tmp.unlink()
        return changed

    def __call__(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[redacted: NAME]``."""
        for name, value in self.secrets:
            if value in text:
                text = text.replace(value, f"[redacted: {name}]")
        return text
