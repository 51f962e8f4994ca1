"""git's configuration as the model's commands see it: without credentials (SPEC §14).

The sandbox shows ``.git`` read-only, so that git commands that only read work. But git's
configuration files often hold a credential: a CI checkout writes the job's token into the
repository's configuration (GitHub's ``actions/checkout`` as
``http.https://github.com/.extraheader = AUTHORIZATION: basic …``; GitLab runners in the
remote's URL, ``https://gitlab-ci-token:…@…``), people put tokens into remote URLs and
``url.<base>.insteadOf``, and ``credential.*`` names helpers and users. A model that reads
``.git/config`` or runs ``git remote -v`` would get a push credential of the repository.

Inside the sandbox each such file is replaced (a read-only bind mount) by a copy that git
itself parsed (``git config --file F --list -z --no-includes``: git's own reader, which runs
nothing) and relay wrote back without:

* the ``credential`` section and its subsections (helpers, user names);
* ``extraheader`` entries (``http.extraheader``, ``http.<url>.extraheader``);
* passwords kept in clear text (``sendemail.smtpPass``, ``sendemail.<identity>.smtpPass``,
  ``imap.pass``);
* the files of a session's or a client's credentials: ``http.cookieFile``, ``http.sslCert``,
  ``http.sslKey``, ``http.proxySSLCert``, ``http.proxySSLKey`` (also per URL); the entries
  are dropped and the files they name are hidden;
* ``include.path`` / ``includeIf.<condition>.path``: an included file is not read; the
  files they name are hidden (``actions/checkout`` keeps its header in such a file);
* the user information of every URL (``https://user:token@host/…`` becomes
  ``https://host/…``, up to the authority's last ``@``: a password may hold a raw one), in
  values and in subsection names (``[url "https://t@host/"]``).

The files are the repository's (``config`` and ``config.worktree`` of its git directories,
of its submodules' and of its linked worktrees')
and the user's and the system's (``$GIT_CONFIG_GLOBAL`` or ``~/.gitconfig`` and
``$XDG_CONFIG_HOME/git/config``; ``$GIT_CONFIG_SYSTEM`` or ``/etc/gitconfig``). A copy is
written once per content into a private folder of relay's process (mode 0700, removed when
relay exits) and only made again when its file changed. A file git cannot parse is hidden.
relay's own git calls run outside the sandbox and read the real files.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "GitConfigView",
    "git_config_candidates",
    "git_config_files",
    "git_config_views",
    "scrub_entries",
]

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
"""A URL's ``scheme://userinfo@`` (to the authority's last ``@``): the user information is
removed."""

_DROPPED_SECTIONS = frozenset({"credential", "include", "includeif"})
_CREDENTIAL_FILES = frozenset({"cookiefile", "sslcert", "sslkey", "proxysslcert", "proxysslkey"})
"""Names whose value is a file of credentials: the entry is dropped, the file hidden."""
_DROPPED_NAMES = frozenset({"extraheader", "smtppass", *_CREDENTIAL_FILES})
_DROPPED_KEYS = frozenset({("imap", "pass")})
"""``(section, name)`` pairs dropped where the name alone says too little."""
_SECRET_NAME = re.compile(r"(?i)key|token|secret|pass|credential|oauth|auth")
"""Any other name that may hold a credential (``hub.oauthtoken``, ``gitlab.token``,
``github.password``, …): dropped too, whatever tool reads it."""


@dataclass(frozen=True)
class GitConfigView:
    """What the sandbox shows of git's configuration files: ``replaced`` maps each file to
    the scrubbed copy mounted over it; ``hidden`` are files to hide (included files, and
    files git could not parse)."""

    replaced: tuple[tuple[Path, Path], ...] = ()
    hidden: tuple[Path, ...] = ()


def git_config_candidates(
    git_dirs: Iterable[Path], environ: Mapping[str, str] | None = None
) -> list[Path]:
    """Every configuration file git would read for a command in the repository of
    ``git_dirs``, whether it exists or not (as named, not resolved)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    xdg = env.get("XDG_CONFIG_HOME") or ""
    xdg_base = Path(xdg) if os.path.isabs(xdg) else home / ".config"
    candidates = [
        folder / name
        for git_dir in git_dirs
        for folder in (git_dir, *_nested_git_dirs(git_dir))
        for name in ("config", "config.worktree")
    ]
    candidates += [home / ".gitconfig", xdg_base / "git" / "config", Path("/etc/gitconfig")]
    candidates += [Path(env[n]) for n in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM") if env.get(n)]
    return candidates


def git_config_files(
    git_dirs: Iterable[Path], environ: Mapping[str, str] | None = None
) -> list[Path]:
    """The configuration files git reads for a command in the repository of ``git_dirs``
    (existing regular files only, resolved, without repeats)."""
    found: list[Path] = []
    for path in git_config_candidates(git_dirs, environ):
        real = Path(os.path.realpath(path))
        if real.is_file() and real not in found:
            found.append(real)
    return found


def _nested_git_dirs(git_dir: Path, depth: int = 4) -> list[Path]:
    """The git directories kept inside ``git_dir``: its submodules' (``modules/<name>``,
    nested submodules below them, up to ``depth`` levels) and its linked worktrees'
    (``worktrees/<name>``), whose configuration files hold credentials as the main one's."""
    found: list[Path] = []
    for kind in ("modules", "worktrees"):
        try:
            entries = list(os.scandir(git_dir / kind))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                found.append(Path(entry.path))
                if kind == "modules" and depth > 1:
                    found += _nested_git_dirs(Path(entry.path), depth - 1)
    return found


def scrub_entries(entries: list[tuple[str, str | None]]) -> tuple[str, list[str]]:
    """The configuration text of ``entries`` (``(key, value)`` as ``git config --list``
    gives them; value None for a bare boolean key) without credentials (module docstring),
    and the files the dropped entries name (``include`` paths, cookie, certificate and key
    files), to hide."""
    lines: list[str] = []
    includes: list[str] = []
    header = None
    for key, value in entries:
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        if section.lower() in _DROPPED_SECTIONS:
            if name.lower() == "path" and value:
                includes.append(value)
            continue
        if name.lower() in _CREDENTIAL_FILES and value:
            includes.append(value)  # cookies, a client's key: the file is hidden
        if (
            name.lower() in _DROPPED_NAMES
            or (section.lower(), name.lower()) in _DROPPED_KEYS
            or _SECRET_NAME.search(name)
        ):
            continue
        wanted = f"[{section}]"
        if subsection:
            wanted = f'[{section} "{_quoted(_without_userinfo(subsection))}"]'
        if wanted != header:
            lines.append(wanted)
            header = wanted
        if value is None:
            lines.append(f"\t{name}")
        else:
            lines.append(f'\t{name} = "{_quoted(_without_userinfo(value), value=True)}"')
    return "\n".join(lines) + "\n", includes


def _without_userinfo(text: str) -> str:
    """``text`` with the user information of every URL in it removed."""
    return _USERINFO.sub(lambda m: m.group(1), text)


def _quoted(text: str, *, value: bool = False) -> str:
    """``text`` for the inside of double quotes in a git configuration file."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    if value:
        text = text.replace("\n", "\\n").replace("\t", "\\t")
    return text


def _entries(path: Path) -> list[tuple[str, str | None]] | None:
    """The entries of the file ``path`` as git parses it, or None when it cannot."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_CONFIG_GLOBAL": os.devnull, "HOME": os.devnull, "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "config", "--file", str(path), "--list", "-z", "--no-includes"],
            capture_output=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    out: list[tuple[str, str | None]] = []
    for item in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if item:
            key, newline, value = item.partition("\n")
            out.append((key, value if newline else None))
    return out


class _Copies:
    """The scrubbed copies of one relay process, by file (remade when the file changed). A
    copy is checked against what it must hold each time it is handed out, and written again
    (a new file renamed over it) when it differs or is gone: its folder is out of the
    sandbox's sight (the private ``/tmp``) unless a writable path shows it, and a cleaner of
    ``/tmp`` may remove it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folder: Path | None = None
        self._made: dict[Path, tuple[tuple[int, int, int], bytes | None, tuple[Path, ...]]] = {}

    def _where(self) -> Path:
        if self._folder is None or not self._folder.is_dir():
            self._folder = Path(tempfile.mkdtemp(prefix="relay-gitconfig-"))
            atexit.register(shutil.rmtree, self._folder, True)
        return self._folder

    def _copy(self, data: bytes) -> Path:
        copy = self._where() / (hashlib.sha256(data).hexdigest()[:24] + ".gitconfig")
        with contextlib.suppress(OSError):
            if not copy.is_symlink() and copy.read_bytes() == data:
                return copy
        fd, tmp = tempfile.mkstemp(dir=copy.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o444)
        os.replace(tmp, copy)
        return copy

    def view(self, path: Path) -> tuple[Path | None, tuple[Path, ...]]:
        """``(copy or None when the file cannot be parsed, included files)`` of ``path``."""
        try:
            st = path.stat()
        except OSError:
            return None, ()
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            known = self._made.get(path)
            if known is None or known[0] != stamp:
                entries = _entries(path)
                data: bytes | None = None
                included: tuple[Path, ...] = ()
                if entries is not None:
                    text, includes = scrub_entries(entries)
                    data = text.encode("utf-8", "surrogateescape")
                    included = tuple(_included(path, p) for p in includes)
                known = self._made[path] = (stamp, data, included)
            _, data, included = known
            try:
                return (None if data is None else self._copy(data)), included
            except OSError:
                return None, included  # no copy: the file is hidden instead


def _included(config: Path, value: str) -> Path:
    """The file an ``include.path`` value of ``config`` names (``~/`` is the home folder, a
    relative path is relative to the including file's folder, as git reads it)."""
    raw = os.path.expanduser(value)
    return Path(os.path.abspath(raw if os.path.isabs(raw) else config.parent / raw))


_COPIES = _Copies()


def git_config_views(git_dirs: Iterable[Path]) -> GitConfigView:
    """The :class:`GitConfigView` of a command in the repository of ``git_dirs``."""
    replaced: list[tuple[Path, Path]] = []
    hidden: list[Path] = []
    for path in git_config_files(git_dirs):
        copy, included = _COPIES.view(path)
        if copy is None:
            hidden.append(path)
        else:
            replaced.append((path, copy))
        hidden += [p for p in included if p not in hidden]
    return GitConfigView(tuple(replaced), tuple(hidden))
