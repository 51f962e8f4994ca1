"""The sandbox in force for a run, and the command line of one sandboxed command (SPEC §14).

:func:`resolve_sandbox` turns ``sandbox.mode`` into the sandbox of this run, checked on this
machine once at start: ``auto`` uses bubblewrap when it works here and is otherwise off (the
run says so loudly), ``required`` refuses to start without it (:class:`SandboxUnavailable`),
``off`` never uses it. :meth:`Sandbox.command` wraps one command (``shell``, an audit command);
:meth:`Sandbox.environment` gives its allow-listed environment.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from relay.errors import ConfigError
from relay.fsread import real_path
from relay.sandbox.env import allowed_env
from relay.sandbox.gitconfig import git_config_views
from relay.sandbox.mounts import Mount, bwrap_argv, plan_mounts, protected_targets
from relay.sandbox.pidns import pid_namespace
from relay.sandbox.reaper import reaped_argv

__all__ = [
    "DEFAULT_HIDDEN",
    "INSTALL_HINT",
    "SANDBOX_DOCS",
    "Sandbox",
    "SandboxUnavailable",
    "probe",
    "resolve_sandbox",
]

DEFAULT_HIDDEN: tuple[str, ...] = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.yarnrc",
    "~/.vault-token",
    "~/.terraform.d",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/gh/hosts.yml",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.m2/settings.xml",
    "~/.gradle/gradle.properties",
    "~/.config/pip/pip.conf",
    "~/.pip/pip.conf",
    "~/.gem/credentials",
    "~/.config/containers/auth.json",
    "~/.config/git/credentials",
    "~/.config/openai",
    "~/.config/relay",
    "~/.anthropic",
    "~/.claude",
    "~/.claude.json",
    "~/.codex",
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_history",
    "~/.profile",
    "~/.zshrc",
    "~/.zshenv",
    "~/.zprofile",
    "~/.zsh_history",
    "~/.python_history",
    "~/.env",
    "/etc/shadow",
    "/etc/gshadow",
)
"""Files and folders always hidden inside the sandbox: credentials, and the shell start-up
files and histories where people export their API keys (``sandbox.hidden_paths`` adds more)."""

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf "
    "install bubblewrap; Arch: sudo pacman -S bubblewrap); on Ubuntu 24.04 and later also allow "
    "unprivileged user namespaces for it (an AppArmor profile for bwrap, or sysctl "
    "kernel.apparmor_restrict_unprivileged_userns=0)"
)

SANDBOX_DOCS = "https://github.com/goal-relay/goal-relay/blob/main/docs/sandbox.md"
"""Where a run without the sandbox points the user: what is then not guaranteed and how to turn
it on (the repository of ``[project.urls]`` in pyproject.toml)."""


class SandboxUnavailable(ConfigError):
    """``sandbox.mode: required`` on a machine where bubblewrap does not work (exit 1)."""


@dataclass(frozen=True)
class Sandbox:
    """How the commands of the model's actions run.

    Attributes:
        mode: ``bwrap`` (in bubblewrap) or ``off`` (as relay's user, under the reaper).
        requested: the configured ``sandbox.mode`` (``auto``, ``required``, ``off``).
        reason: why the sandbox is off although ``auto`` asked for it ("" otherwise).
        bwrap: the bubblewrap executable (``mode == "bwrap"``).
        network: ``allow`` or ``deny`` (``deny``: only a private loopback device).
        writable: absolute folders writable inside besides the working tree.
        hidden: absolute paths hidden inside (relay's state folders, credential files).
        git_dirs: the repository's git directories (read-only inside).
        env_names: extra variable names (or ``*`` globs) passed on (``sandbox.env``).
        visible: folders under the private ``/tmp`` or ``/run`` that stay visible (read-only)
            inside: the tools on ``PATH`` and relay's own installation (:func:`tool_folders`).
        pid_namespace: without bubblewrap, the ``unshare`` command line each command runs
            under (its own PID namespace, :mod:`relay.sandbox.pidns`); empty: none.
    """

    mode: Literal["bwrap", "off"] = "off"
    requested: Literal["auto", "required", "off"] = "off"
    reason: str = ""
    bwrap: str | None = None
    network: Literal["allow", "deny"] = "deny"
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    git_dirs: tuple[Path, ...] = ()
    env_names: tuple[str, ...] = field(default=())
    visible: tuple[Path, ...] = ()
    pid_namespace: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """True when commands run inside bubblewrap."""
        return self.mode == "bwrap" and self.bwrap is not None

    def warning(self) -> str | None:
        """The notice of a run without the sandbox, said once per run (at start and as its
        ``sandbox_off`` event): why it is off, in one short line with a link to
        :data:`SANDBOX_DOCS` (what is then not guaranteed, how to turn it on); None when
        commands run in bubblewrap."""
        if self.active:
            return None
        why = self.reason or "sandbox.mode is off"
        return (
            f"the sandbox is off ({why}): commands run as your user, unconfined (risks and "
            f"how to turn it on: {SANDBOX_DOCS})"
        )

    def environment(self, add: Mapping[str, str] | None = None) -> dict[str, str]:
        """The allow-listed environment of one command (:func:`relay.sandbox.env.allowed_env`)
        plus ``RELAY_SANDBOX`` (``bwrap`` or ``off``) and, inside the sandbox, ``TMPDIR=/tmp``."""
        env = allowed_env(extra_names=self.env_names, add=add)
        env["RELAY_SANDBOX"] = "bwrap" if self.active else "off"
        if self.active:  # tool caches in the private /tmp unless the user made theirs writable
            env["TMPDIR"] = "/tmp"
            for name, folder in SANDBOX_CACHES.items():
                env.setdefault(name, folder)
        return env

    def command(
        self,
        argv: Sequence[str],
        *,
        root: Path,
        protected: Iterable[str] = (),
        writable: Sequence[Path] = (),
    ) -> list[str]:
        """The argument list that runs ``argv`` in the working tree ``root``.

        Args:
            argv: the command, e.g. ``["/bin/bash", "-c", "pytest -q"]``.
            root: the working tree (the command's folder; writable).
            protected: the protected entries (``tools.protected_paths`` syntax; read-only).
            writable: extra writable folders for this command (e.g. a report folder).
        """
        if not self.active:
            return reaped_argv([*self.pid_namespace, *argv])
        assert self.bwrap is not None
        root = Path(real_path(root))
        mounts = self.plan(root, protected, writable)
        return bwrap_argv(self.bwrap, mounts, network=self.network, cwd=root, argv=argv)

    def plan(
        self,
        root: Path,
        protected: Iterable[str] = (),
        writable: Sequence[Path] = (),
        venvs: Sequence[Path] | None = None,
    ) -> list[Mount]:
        """The mounts of a command in the resolved working tree ``root`` (see
        :meth:`command`): git's configuration shown scrubbed, relay's state and the
        credential files hidden, the protected paths and the tree's virtual environments
        (``venvs``, found by :meth:`installed_tools` when None) read-only."""
        git_config = git_config_views((root / ".git", *self.git_dirs))
        return plan_mounts(
            root=root,
            git_dirs=(root / ".git", *self.git_dirs),
            protected=[
                *(v for v in self.visible if v != root and v not in root.parents),
                *protected_targets(root, protected),
                *(self.installed_tools(root) if venvs is None else venvs),
            ],
            writable=(*self.writable, *writable),
            hidden=(*self.hidden, *git_config.hidden),
            replaced=git_config.replaced,
        )

    def installed_tools(self, root: Path) -> list[Path]:
        """Virtual environments inside the working tree (folders with a ``pyvenv.cfg``, one
        or two levels down): read-only inside the sandbox, so that the model cannot edit the
        installed test runner (``.venv/lib/…/_pytest``) or its entry points; a folder listed
        in ``sandbox.writable_paths`` stays writable."""
        found = [Path(folder) for folder in _venvs(os.fspath(root), depth=2)]
        return [folder for folder in found if folder not in self.writable]


def _venvs(folder: str, depth: int) -> list[str]:
    """Folders up to ``depth`` levels below ``folder`` (not itself) that hold a
    ``pyvenv.cfg``, symlinked folders included (as ``glob`` finds them)."""
    found: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        try:
            if not entry.is_dir():
                continue
        except OSError:
            continue
        if os.path.isfile(os.path.join(entry.path, "pyvenv.cfg")):
            found.append(entry.path)
        if depth > 1:
            found += _venvs(entry.path, depth - 1)
    return found


@functools.lru_cache(maxsize=8)
def probe(bwrap: str, network: str) -> str | None:
    """Whether bubblewrap works on this machine with relay's options: None when a trial
    command ran, else the reason (bubblewrap's own message). Cached per process."""
    argv = bwrap_argv(
        bwrap,
        [],
        network="deny" if network == "deny" else "allow",
        cwd=Path("/"),
        argv=["/bin/sh", "-c", "exit 0"],
    )
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not run: {exc}"
    if proc.returncode != 0:
        message = " ".join((proc.stderr or proc.stdout).split())[:300]
        return f"{bwrap} does not work here: {message or f'exit code {proc.returncode}'}"
    return None


SANDBOX_CACHES = {
    "XDG_CACHE_HOME": "/tmp/.cache",
    "GOCACHE": "/tmp/.cache/go-build",
    "PIP_CACHE_DIR": "/tmp/.cache/pip",
    "npm_config_cache": "/tmp/.cache/npm",
}
"""Where tools cache inside the sandbox (the home folder is read-only there): the private
``/tmp``, gone after the call. A variable the user passes with ``sandbox.env`` wins."""

PRIVATE_MOUNTS = (Path("/tmp"), Path("/run"))
"""Folders that are empty and private inside the sandbox."""


def tool_folders(path_value: str | None = None) -> list[Path]:
    """Folders under :data:`PRIVATE_MOUNTS` that commands still need, shown read-only: every
    ``PATH`` entry there (the whole virtual environment when the entry is its ``bin``), the
    Python installation relay runs on, and relay's own package (its pytest plugin)."""
    path_value = os.environ.get("PATH", "") if path_value is None else path_value
    candidates = [Path(p) for p in path_value.split(os.pathsep) if p]
    candidates += [Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parents[1]]
    found: list[Path] = []
    for raw in candidates:
        if not raw.is_absolute() or not raw.is_dir():
            continue
        path = Path(real_path(raw))
        if not any(m in path.parents for m in PRIVATE_MOUNTS):
            continue
        if (path.parent / "pyvenv.cfg").is_file():
            path = path.parent
        if path not in found:
            found.append(path)
    return found


def _expand(paths: Iterable[str], home: str) -> list[Path]:
    out = []
    for raw in paths:
        text = raw.strip()
        if text == "~" or text.startswith("~/"):
            text = home + text[1:]
        out.append(Path(os.path.abspath(text)))
    return out


def resolve_sandbox(
    mode: Literal["auto", "required", "off"],
    *,
    network: Literal["allow", "deny"] = "deny",
    writable_paths: Iterable[str] = (),
    hidden_paths: Iterable[str] = (),
    env_names: Iterable[str] = (),
    state_dirs: Iterable[Path] = (),
    git_dirs: Iterable[Path] = (),
    hide_processes: Literal["auto", "off"] = "auto",
) -> Sandbox:
    """The sandbox of a run, checked on this machine (SPEC §14).

    Args:
        mode: ``sandbox.mode``.
        network: ``sandbox.network``.
        writable_paths: ``sandbox.writable_paths`` (``~`` is the user's home).
        hidden_paths: ``sandbox.hidden_paths``, hidden on top of :data:`DEFAULT_HIDDEN`.
        env_names: ``sandbox.env``.
        state_dirs: relay's state folders (hidden inside).
        git_dirs: the repository's git directories (read-only inside).
        hide_processes: ``sandbox.pid_namespace``: without bubblewrap, each command in a PID
            namespace of its own where the kernel allows it (``auto``), or never (``off``).

    Raises:
        SandboxUnavailable: ``mode`` is ``required`` and bubblewrap is missing or does not work
            here; the message says how to install it.
    """
    home = os.path.expanduser("~")
    common = {
        "requested": mode,
        "network": network,
        "writable": tuple(_expand(writable_paths, home)),
        "hidden": tuple(
            dict.fromkeys(
                [*(Path(p) for p in state_dirs), *_expand((*DEFAULT_HIDDEN, *hidden_paths), home)]
            )
        ),
        "git_dirs": tuple(Path(p) for p in git_dirs),
        "env_names": tuple(env_names),
        "visible": tuple(tool_folders()),
    }
    if mode == "off":
        hide = pid_namespace().argv if hide_processes == "auto" else ()
        return Sandbox(mode="off", pid_namespace=hide, **common)  # type: ignore[arg-type]
    found = shutil.which("bwrap")
    if not sys.platform.startswith("linux"):
        problem: str | None = f"bubblewrap needs Linux (this is {sys.platform})"
    elif found is None:
        problem = "bubblewrap (bwrap) is not installed"
    else:
        problem = probe(found, network)
    if problem is None:
        return Sandbox(mode="bwrap", bwrap=found, **common)  # type: ignore[arg-type]
    if mode == "required":
        raise SandboxUnavailable(
            f"sandbox.mode is required but {problem}; {INSTALL_HINT}, or set sandbox.mode to "
            "auto or off (--sandbox auto|off) to run without it"
        )
    hide = pid_namespace().argv if hide_processes == "auto" else ()
    return Sandbox(mode="off", reason=problem, pid_namespace=hide, **common)  # type: ignore[arg-type]
