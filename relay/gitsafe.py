"""Safe git processes for relay's own git calls (SPEC §11, §14).

Everything here exists because the model (whose ``shell`` may write ``.git/config``, include
files, ``.gitattributes`` and so on when there is no sandbox) must not be able to make relay's
own ``git status`` / ``git add`` / ``git commit`` / ``git push`` run its code, nor see relay's
environment. Three mechanisms, applied to every git process :class:`SafeGit` starts:

* **A scrubbed environment** (:func:`git_environment`): ``os.environ`` without credentials
  (:func:`relay.tools.shell.is_credential_name`: provider keys, ``*KEY*``, ``*TOKEN*``,
  ``*SECRET*``, ``SSH_AUTH_SOCK``, …) and without every ``GIT_*`` variable except identity and
  config-file selection (:data:`GIT_KEPT`) — so no ``GIT_DIR``, ``GIT_INDEX_FILE``,
  ``GIT_CONFIG_PARAMETERS``, ``GIT_EXEC_PATH``, ``GIT_SSH_COMMAND``, ``GIT_PAGER``,
  ``GIT_TRACE*``… A network call (``network=True``: ``git push``) also keeps what a push
  authenticates with (``SSH_AUTH_SOCK``, ``GH_TOKEN``, ``GIT_ASKPASS``, ``GIT_SSH_COMMAND``, …)
  but never a model provider's variable (:func:`is_provider_name`). ``GIT_TERMINAL_PROMPT=0``.
* **Configuration overrides** (:data:`HARDENING`): ``-c`` options that switch off everything in
  git's configuration that runs a program relay did not ask for: fsmonitor, hooks, signing,
  pagers, editors, external diff, ``ext::`` transports, ``core.alternateRefsCommand``,
  automatic gc/maintenance, submodule recursion, and (outside a push) ssh commands, askpass
  programs and credential helpers.
* **Neutralised drivers**: every ``filter.<driver>``, ``diff.<driver>`` and ``merge.<driver>``
  configured anywhere (system, global, repository, worktree, and every file those include)
  *after* this repository object first looked (when relay opened it, before any model action:
  the user's own drivers such as Git LFS or git-crypt keep working for relay's commits) is
  overridden through ``GIT_CONFIG_COUNT`` so that it runs nothing: empty ``clean``, ``smudge``
  and ``process`` with ``required=false`` (git then stores and checks out bytes unfiltered),
  empty ``textconv``/``command`` and an empty merge ``driver`` (git then fails instead of
  running anything; relay's own calls never need them). Git 2.39 has no ``--attr-source``,
  so the drivers are enumerated with ``git config --get-regexp`` (includes followed). The
  enumeration is cached and redone when the ``stat`` of any file it depends on changes
  (the config files, each include target, ``HEAD`` for ``includeIf.onbranch``).

Processes are started with :mod:`subprocess` directly (gitpython's ``execute`` always merges
the whole ``os.environ``), in their own session so that a Ctrl+C in the terminal cannot kill
git mid-commit; a timeout kills the whole process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from relay.errors import RepoStateError
from relay.sandbox.env import is_credential_name, is_provider_name

__all__ = [
    "GIT_KEPT",
    "HARDENING",
    "SafeGit",
    "driver_overrides",
    "git_environment",
    "is_provider_name",
    "parse_driver_listing",
]

#: ``GIT_*`` variables every relay git process keeps: identity and which config files to read.
GIT_KEPT = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_GLOBAL",
    }
)

#: Prefixes of the further ``GIT_*`` variables a network call (push) keeps.
_GIT_NETWORK_PREFIXES = (
    "GIT_SSH",
    "GIT_ASKPASS",
    "GIT_PROXY_",
    "GIT_SSL_",
    "GIT_HTTP_",
    "GIT_ALLOW_PROTOCOL",
    "GIT_PROTOCOL_FROM_USER",
)

#: ``-c`` overrides of every relay git process: nothing in the configuration runs a program.
HARDENING: tuple[tuple[str, str], ...] = (
    ("core.quotepath", "false"),
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("diff.external", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("protocol.ext.allow", "never"),
    ("core.alternateRefsCommand", ""),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("color.ui", "false"),
    ("color.status", "false"),
)

#: Further overrides of calls that never talk to a remote (everything but a push).
_LOCAL_ONLY: tuple[tuple[str, str], ...] = (
    ("core.sshCommand", ""),
    ("core.askPass", ""),
    ("credential.helper", ""),
)

#: The settings of each driver kind that run a program, with the value that neutralises them.
_DRIVER_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}

_LISTING_REGEX = r"^(filter|diff|merge|include|includeif)\."

#: Seconds to wait for output after a timed-out process group was killed.
_DRAIN_S = 5.0

#: At most this many rounds of "enumerate, find new include files, enumerate again".
_MAX_INCLUDE_ROUNDS = 12


def git_environment(
    *, network: bool = False, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of one relay git process.

    Args:
        network: the process talks to a remote (``git push``): keep the non-provider
            credentials and transport variables it may authenticate with.
        environ: the source (default ``os.environ``).

    Returns:
        A new dict: ``environ`` without credentials (all of them unless ``network``; provider
        variables always), without ``GIT_*`` variables other than :data:`GIT_KEPT` (and the
        transport ones when ``network``), with ``GIT_TERMINAL_PROMPT=0``, and with replacement
        objects and grafts off (``git replace`` or ``.git/info/grafts`` cannot make a diff
        against the base commit lie).
    """
    source = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for name, value in source.items():
        upper = name.upper()
        if is_provider_name(name):
            continue
        if upper.startswith("GIT_"):
            keep = upper in GIT_KEPT or (network and upper.startswith(_GIT_NETWORK_PREFIXES))
        else:
            keep = network or not is_credential_name(name)
        if keep:
            env[name] = value
    env["GIT_TERMINAL_PROMPT"] = "0"
    # relay compares with the real history: no replacement objects or grafts the model set up
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env["GIT_GRAFT_FILE"] = os.devnull
    return env


def parse_driver_listing(raw: bytes, cwd: Path) -> tuple[set[tuple[str, str]], set[Path]]:
    """Parse ``git config -z --show-origin --get-regexp <_LISTING_REGEX>``.

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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _spawn(
    command: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    stdin: int,
    stderr: int = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            close_fds=True,
            # its own session: a Ctrl+C in the terminal must not kill git mid-commit
            start_new_session=True,
        )
    except FileNotFoundError:
        raise RepoStateError("the git program was not found; install git") from None
    except OSError as exc:
        raise RepoStateError(f"cannot start git: {exc}") from None


class SafeGit:
    """Starts hardened git processes for one repository (see the module docstring).

    Args:
        root: the working tree's top directory (the processes' current directory).
        git_dir: the repository's git directory (a linked worktree's own one).
        common_dir: the common git directory (``git_dir`` itself outside linked worktrees).
    """

    def __init__(self, root: Path, git_dir: Path, common_dir: Path) -> None:
        self.root = root
        self.git_dir = git_dir
        self.common_dir = common_dir
        self._watched: tuple[Path, ...] = ()
        self._drivers_key: _StatKey | None = None
        self._drivers_env: dict[str, str] = {}
        self.trusted: frozenset[tuple[str, str]] | None = None

    # ------------------------------------------------------------------ commands

    def command(self, args: Sequence[str], *, read_only: bool, network: bool) -> list[str]:
        """The full argument list: ``git``, the repository, the overrides, then ``args``."""
        command = [
            "git",
            "--no-pager",
            f"--git-dir={self.git_dir}",
            f"--work-tree={self.root}",
        ]
        for key, value in HARDENING if network else HARDENING + _LOCAL_ONLY:
            command += ["-c", f"{key}={value}"]
        if read_only:
            command.append("--no-optional-locks")
        command.extend(args)
        return command

    def environment(
        self, extra: Mapping[str, str] | None = None, *, network: bool = False
    ) -> dict[str, str]:
        """:func:`git_environment` plus the driver overrides plus ``extra``."""
        env = git_environment(network=network)
        env.update(self._driver_env())
        if extra:
            env.update(extra)
        return env

    def run(
        self,
        args: Sequence[str],
        *,
        read_only: bool = True,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        stdin_bytes: bytes | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, bytes, str]:
        """Run one git command; return ``(exit status, stdout bytes, stderr text stripped)``.

        Args:
            args: git's arguments after the global options, e.g. ``["status", "-z"]``.
            read_only: add ``--no-optional-locks`` (looking never writes the index).
            network: the command talks to a remote (see :func:`git_environment`).
            env: extra variables, e.g. the commit identity.
            stdin_bytes: written to git's standard input (else it reads nothing).
            timeout_s: seconds after which git's whole process group is killed; the status is
                then ``-9`` and the error text says so.

        Raises:
            RepoStateError: git is not installed or cannot be started.
        """
        command = self.command(args, read_only=read_only, network=network)
        environment = self.environment(env, network=network)
        stdin = subprocess.PIPE if stdin_bytes is not None else subprocess.DEVNULL
        proc = _spawn(command, self.root, environment, stdin)
        try:
            out, err = proc.communicate(stdin_bytes, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=_DRAIN_S)
            except subprocess.TimeoutExpired:
                out, err = b"", b""
            message = err.decode("utf-8", "replace").strip()
            stopped = f"git was stopped after {timeout_s:g} s"
            return -9, out, f"{message}\n{stopped}" if message else stopped
        return proc.returncode, out, err.decode("utf-8", "replace").strip()

    @contextlib.contextmanager
    def lines(self, args: Sequence[str]) -> Iterator[Iterator[bytes]]:
        """Run a read-only git command and yield its output line by line (newline removed).

        Leaving the ``with`` block early kills the process group; a failing command just
        yields the lines it printed (its error text is discarded).
        """
        command = self.command(args, read_only=True, network=False)
        env = self.environment()
        proc = _spawn(command, self.root, env, subprocess.DEVNULL, subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            yield (line.rstrip(b"\n") for line in proc.stdout)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
            proc.stdout.close()
            proc.wait()

    # ------------------------------------------------------------------ drivers

    def _candidates(self) -> list[Path]:
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

    def _driver_env(self) -> dict[str, str]:
        """The driver overrides, enumerated again only when a watched file changed."""
        candidates = self._candidates()
        watched = list(dict.fromkeys([*candidates, *self._watched]))
        key = _stat_key(watched)
        if key == self._drivers_key:
            return self._drivers_env
        for _ in range(_MAX_INCLUDE_ROUNDS):
            drivers, files = self._enumerate()
            new = [path for path in sorted(files) if path not in watched]
            if not new:
                break
            # An include file seen for the first time: watch it from before the next listing.
            watched += new
            key = _stat_key(watched)
        self._watched = tuple(watched)
        self._drivers_key = key
        if self.trusted is None:  # what the user configured before relay let any model act
            self.trusted = frozenset(drivers)
        self._drivers_env = driver_overrides(set(drivers) - self.trusted)
        return self._drivers_env

    def _enumerate(self) -> tuple[set[tuple[str, str]], set[Path]]:
        command = self.command(
            ["config", "-z", "--show-origin", "--get-regexp", _LISTING_REGEX],
            read_only=True,
            network=False,
        )
        proc = _spawn(command, self.root, git_environment(), subprocess.DEVNULL)
        out, err = proc.communicate()
        if proc.returncode not in (0, 1):  # 1: nothing matched
            message = err.decode("utf-8", "replace").strip()
            raise RepoStateError(f"cannot read the git configuration: {message}")
        return parse_driver_listing(out, self.root)
