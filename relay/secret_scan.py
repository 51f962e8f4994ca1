"""Finding relay's secrets in bytes, also encoded (SPEC §14; issue 27): pure policy, no I/O.

A hostile model that got hold of a provider key may write it into a file of the repository
for relay's round-end commit (or a push) to carry off, and it may disguise it. A
:class:`SecretScanner` is made once from the secret values relay holds and looks for each of
them in these forms (the *encoding* a :class:`Finding` names):

* ``plain``: the value itself; ``reversed``: its characters in reverse order;
* ``base64`` and ``base64url``: the value base64-encoded (standard and URL-safe alphabets) at
  each of the 3 byte offsets it may have inside a longer encoded blob — only the characters
  that depend on the value's bytes alone are looked for, so a key in the middle of an encoded
  ``.env`` file is found as well as a key encoded alone;
* ``hex``: lower- or upper-case hexadecimal;
* ``percent-encoded``: URL-encoded (``quote`` with nothing kept) and every byte as ``%XX``.

Line breaks are not looked at (``\r`` and ``\n`` are left out of the data and of every
form): a value the ``base64`` tool wrapped at 76 columns, ``xxd -p`` at 60 or ``fold`` at
any width is found like one on a single line.

Values shorter than :data:`MIN_SECRET_CHARS` are not looked for (``true``, ``postgres``
would be found everywhere). Every form is precomputed once (a handful of needles per value),
and a search is one substring search per needle: linear in the data's size.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["MIN_SECRET_CHARS", "Finding", "SecretScanner", "encoded_forms"]

MIN_SECRET_CHARS = 12
"""Shorter values are not secrets to look for: provider keys are far longer."""

_DROPPED_LEADING = (0, 2, 3)
"""Base64 characters at the start of a value placed at byte offset 0, 1, 2 of a 3-byte group
that also depend on the bytes before it (and so are not looked for)."""


@dataclass(frozen=True, order=True)
class Finding:
    """One secret found.

    Attributes:
        name: the variable that holds the secret (e.g. ``OPENAI_API_KEY``), never its value.
        encoding: how it was written: ``plain``, ``reversed``, ``base64``, ``base64url``,
            ``hex`` or ``percent-encoded``.
    """

    name: str
    encoding: str


def _base64_forms(value: bytes) -> list[tuple[str, bytes]]:
    """The characters of ``value`` base64-encoded at byte offsets 0, 1 and 2 of a longer
    input that do not depend on the bytes around it, in both alphabets."""
    forms: list[tuple[str, bytes]] = []
    for offset, dropped in enumerate(_DROPPED_LEADING):
        total = offset + len(value)
        encoded = base64.b64encode(b"\0" * offset + value)
        # the last group of a length not divisible by 3: its first 1 or 2 characters only
        kept = 4 * (total // 3) + total % 3
        core = encoded[dropped:kept]
        forms.append(("base64", core))
        forms.append(("base64url", core.translate(_URLSAFE)))
    return forms


_URLSAFE = bytes.maketrans(b"+/", b"-_")
_BREAKS = b"\r\n"


def encoded_forms(value: str) -> list[tuple[str, bytes]]:
    """Every form of ``value`` a :class:`SecretScanner` looks for, as ``(encoding, bytes)``;
    a form already listed (the URL-safe base64 of a value without ``+``/``/``, the
    percent-encoding of a key of letters and digits) is listed once, under its first name.

    Args:
        value: the secret, already stripped of surrounding whitespace.
    """
    raw = value.encode("utf-8")
    forms: list[tuple[str, bytes]] = [("plain", raw), ("reversed", value[::-1].encode("utf-8"))]
    forms += _base64_forms(raw)
    forms += [("hex", raw.hex().encode()), ("hex", raw.hex().upper().encode())]
    quoted = urllib.parse.quote(value, safe="").encode("ascii")
    every = "".join(f"%{b:02X}" for b in raw).encode("ascii")
    forms += [("percent-encoded", quoted), ("percent-encoded", every)]
    forms.append(("percent-encoded", every.lower()))
    seen: set[bytes] = set()
    unique: list[tuple[str, bytes]] = []
    for encoding, needle in forms:
        if needle and needle not in seen:
            seen.add(needle)
            unique.append((encoding, needle))
    return unique


class SecretScanner:
    """Looks for secret values, plain and encoded, in bytes (see the module docstring).

    Args:
        secrets: ``{variable name: value}`` or ``(name, value)`` pairs (a name may come twice,
            with two values); values are stripped, and those shorter than ``min_chars``
            skipped. The same value under two names is reported under the first in name order.
        min_chars: the shortest value looked for (default :data:`MIN_SECRET_CHARS`).
    """

    def __init__(
        self,
        secrets: Mapping[str, str] | Iterable[tuple[str, str]],
        *,
        min_chars: int = MIN_SECRET_CHARS,
    ) -> None:
        pairs = secrets.items() if isinstance(secrets, Mapping) else secrets
        needles: dict[bytes, Finding] = {}
        for name, value in sorted(pairs):
            value = value.strip()
            if len(value) < min_chars:
                continue
            for encoding, form in encoded_forms(value):
                needle = form.translate(None, _BREAKS)
                if needle:
                    needles.setdefault(needle, Finding(name, encoding))
        self._needles = tuple(needles.items())
        self.overlap = max((len(n) for n in needles), default=1) - 1
        """Bytes of one chunk kept in front of the next by :meth:`find_in_chunks`: a needle
        split between two chunks is still found."""

    def __bool__(self) -> bool:
        """Whether there is anything to look for (no secret: nothing needs scanning)."""
        return bool(self._needles)

    def find(self, data: bytes) -> list[Finding]:
        """The secrets in ``data`` (line breaks left out), sorted, each (name, encoding)
        once."""
        return sorted(self._found(data.translate(None, _BREAKS)))

    def find_in_chunks(self, chunks: Iterable[bytes]) -> list[Finding]:
        """The secrets in the concatenation of ``chunks`` (a file or object read piece by
        piece: memory stays bounded), sorted, each once."""
        found: set[Finding] = set()
        carry = b""
        for chunk in chunks:
            view = carry + chunk.translate(None, _BREAKS)
            if len(view) == len(carry):
                continue
            found |= self._found(view)
            carry = view[-self.overlap :] if self.overlap else b""
        return sorted(found)

    def _found(self, view: bytes) -> set[Finding]:
        return {finding for needle, finding in self._needles if needle in view}
