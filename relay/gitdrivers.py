"""Which ``filter``/``diff``/``merge`` drivers the git configuration defines, and the
overrides that make the new ones run nothing (SPEC §14; used by :class:`relay.gitsafe.SafeGit`).

Every driver configured anywhere (system, global, repository, worktree, and every file those
include) *after* relay first looked is overridden through ``GIT_CONFIG_COUNT``: empty ``clean``,
``smudge`` and ``process`` with ``required=false`` (git then stores and checks out bytes
unfiltered), empty ``textconv``/``command`` and an empty merge ``driver`` (git then fails
instead of running anything). Git 2.39 has no ``--attr-source``, so the drivers are enumerated
with ``git config --get-regexp`` (includes followed); :class:`DriverWatch` caches the answer
and enumerates again only when the ``stat`` of a file it depends on changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["LISTING_REGEX", "DriverWatch", "driver_overrides", "parse_driver_listing"]

#: The settings of each driver kind that run a program, with the value that neutralises them.
_DRIVER_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}

LISTING_REGEX = r"^(filter|diff|merge|include|includeif)\."

#: At most this many rounds of "enumerate, find new include files, enumerate again".
_MAX_INCLUDE_ROUNDS = 12


def parse_driver_listing(raw: bytes, cwd: Path) -> tuple[set[tuple[str, str]], set[Path]]:
    """Parse ``git config -z --show-origin --get-regexp <LISTING_REGEX>``.

    Args:
        raw: git's output: records ``origin NUL key LF value NUL`` (``key NUL`` without value).
        cwd: the directory git ran in (relative origins are relative to it).

    Returns:
        ``(drivers, files)``: the configured drivers as ``(kind, name)`` pairs, kind one of
        ``"filter"``, ``"diff"``, ``"merge"`` (names keep their case), and every config file
        the answer depends on: each file that set a listed key, and each ``include.path`` /
        ``includeIf.<condition>.path`` target (present or not, active or not).
    """
    drivers: set[tuple[str, str]] = set()
    files: set[Path] = set()
    fields = raw.split(b"\0")
    for i in range(0, len(fields) - 1, 2):
        origin = os.fsdecode(fields[i])
        key_raw, _, value_raw = fields[i + 1].partition(b"\n")
        if not origin.startswith("file:"):
            continue  # "command line:" - relay's own overrides
        source = cwd / origin[len("file:") :]
        files.add(source)
        key = key_raw.decode("utf-8", "surrogateescape")
        section, _, rest = key.partition(".")
        subsection, _, variable = rest.rpartition(".")
        if section in _DRIVER_KEYS and subsection:
            drivers.add((section, subsection))
        elif variable == "path" and (section == "include" or (section == "includeif")):
            target = os.fsdecode(value_raw)
            if target:
                files.add(source.parent / os.path.expanduser(target))
    return drivers, files


def driver_overrides(drivers: Sequence[tuple[str, str]] | set[tuple[str, str]]) -> dict[str, str]:
    """``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_<n>``/``GIT_CONFIG_VALUE_<n>`` variables that make
    each ``(kind, name)`` driver run nothing (any name, even with ``=`` or spaces, works).

    Returns:
        The variables; ``{}`` when there are no drivers.
    """
    entries = [
        (f"{kind}.{name}.{key}", value)
        for kind, name in sorted(drivers)
        for key, value in _DRIVER_KEYS[kind]
    ]
    if not entries:
        return {}
    env = {"GIT_CONFIG_COUNT": str(len(entries))}
    for n, (key, value) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


_StatKey = tuple[tuple[str, tuple[int, ...] | None], ...]

#: Runs the driver listing: ``(drivers, files it depends on)`` as :func:`parse_driver_listing`.
Enumerate = Callable[[], tuple[set[tuple[str, str]], set[Path]]]


def _stat_key(paths: Sequence[Path]) -> _StatKey:
    key = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            key.append((str(path), None))
        else:
            stamp = (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            key.append((str(path), stamp))
    return tuple(key)


class DriverWatch:
    """The driver overrides of one repository, enumerated again only when a file they depend
    on changed.

    Args:
        git_dir: the working tree's own git directory.
        common_dir: the repository's shared git directory.

    Attributes:
        trusted: the drivers configured when the first enumeration ran (before any model
            action): the user's own (Git LFS, git-crypt…) keep working; None until then.
    """

    def __init__(self, git_dir: Path, common_dir: Path) -> None:
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.trusted: frozenset[tuple[str, str]] | None = None
        self._watched: tuple[Path, ...] = ()
        self._key: _StatKey | None = None
        self._env: dict[str, str] = {}

    def candidates(self) -> list[Path]:
        """Config files git may read although nothing names them yet (they may appear later)."""
        paths = [
            self.git_dir / "HEAD",  # includeIf.onbranch conditions
            self.common_dir / "config",
            self.git_dir / "config.worktree",
            self.common_dir / "config.worktree",
        ]
        nosystem = os.environ.get("GIT_CONFIG_NOSYSTEM", "").strip().lower()
        if nosystem in ("", "0", "false", "no", "off"):
            paths.append(Path(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
        if os.environ.get("GIT_CONFIG_GLOBAL"):
            paths.append(Path(os.environ["GIT_CONFIG_GLOBAL"]))
        else:
            home = Path(os.environ.get("HOME") or os.path.expanduser("~"))
            xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
            paths += [xdg / "git" / "config", home / ".gitconfig"]
        return paths

    def overrides(self, enumerate_drivers: Enumerate) -> dict[str, str]:
        """The :func:`driver_overrides` of every driver but the trusted ones.

        Args:
            enumerate_drivers: runs the listing and parses it (:func:`parse_driver_listing`);
                called only when a watched file's ``stat`` changed, again while new include
                files turn up (at most :data:`_MAX_INCLUDE_ROUNDS` times).
        """
        watched = list(dict.fromkeys([*self.candidates(), *self._watched]))
        key = _stat_key(watched)
        if key == self._key:
            return self._env
        for _ in range(_MAX_INCLUDE_ROUNDS):
            drivers, files = enumerate_drivers()
            new = [path for path in sorted(files) if path not in watched]
            if not new:
                break
            # An include file seen for the first time: watch it from before the next listing.
            watched += new
            key = _stat_key(watched)
        self._watched = tuple(watched)
        self._key = key
        if self.trusted is None:  # what the user configured before relay let any model act
            self.trusted = frozenset(drivers)
        self._env = driver_overrides(set(drivers) - self.trusted)
        return self._env
