"""What the sandbox's file system looks like (SPEC §14): a pure plan of bubblewrap mounts.

Inside the sandbox:

* the whole file system is visible **read-only** (tools, interpreters, libraries);
* ``/tmp`` and ``/run`` are private and empty (no sockets of the host's services, such as a
  Docker daemon or an SSH agent, are reachable through them);
* the working tree is **writable**, except the ``.git`` entry and the git directories (the model
  cannot change git's configuration, hooks or refs, so it can neither make relay's git calls run
  code nor rewrite relay's commits), the protected paths (progress file, ``relay.yaml``, the
  goal file, ``tools.protected_paths``) and virtual environments inside the tree (the installed
  test runner), which are read-only;
* relay's state folders (store, run folders, inbox) and the user's credential files
  (``~/.ssh``, ``~/.aws``, shell start-up files, …; ``sandbox.hidden_paths``) are hidden: an
  empty private folder, or a file that cannot be read;
* ``sandbox.writable_paths`` (tool caches the user asks for) and the folders a call adds (the
  audit's report folder) are writable.

Mounts are applied shallowest first, so that a deeper rule wins over the folder it lies in: a
working tree under ``/tmp`` is visible although ``/tmp`` is private, and ``.git`` inside the
writable tree is read-only. At the same path a hiding rule beats a read-only one, which beats a
writable one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from relay.fsread import real_path
from relay.globs import existing_matches

__all__ = ["MAX_PROTECTED_MOUNTS", "Mount", "bwrap_argv", "plan_mounts", "protected_targets"]

MountKind = Literal["bind", "ro-bind", "hide"]

MAX_PROTECTED_MOUNTS = 256
"""Protected paths matched by a glob get one read-only mount each, up to this many; a change
to the rest fails the audit (any change of a protected path since the base commit does)."""

_STRENGTH = {"bind": 0, "ro-bind": 1, "hide": 2}


@dataclass(frozen=True)
class Mount:
    """One mount of the plan: ``bind`` (writable), ``ro-bind`` (read-only) or ``hide`` (an
    empty folder, or an unreadable file) at the absolute ``path``."""

    kind: MountKind
    path: Path
    source: Path | None = None
    """For ``ro-bind``: the file shown at ``path`` instead of its own (a scrubbed copy)."""


def _real(path: Path) -> Path:
    return Path(real_path(path))


def _absolute(text: str) -> str:
    """``text`` absolute and normalised (``os.path.abspath``), without the work when it is
    already: the sandbox's own lists are, and a call plans about fifty of them."""
    if (
        text.startswith("/")
        and "//" not in text
        and "/./" not in text
        and "/../" not in text
        and not text.endswith(("/.", "/..", "/"))
    ) or text == "/":
        return text
    return os.path.abspath(text)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def protected_targets(root: Path, entries: Iterable[str]) -> list[Path]:
    """Existing paths of the working tree that ``entries`` protect (``tools.protected_paths``
    syntax, :mod:`relay.globs`), resolved, inside ``root``, without symlinks; at most
    :data:`MAX_PROTECTED_MOUNTS`. A folder that is protected whole is one path; every file the
    file tools refuse lies at or below one of them (the same matcher decides).

    Args:
        root: the working tree's resolved root.
        entries: repo-relative entries such as ``"relay.yaml"``, ``"tests/**"``, ``"*.lock"``.
    """
    return existing_matches(root, entries, MAX_PROTECTED_MOUNTS)


def plan_mounts(
    *,
    root: Path,
    git_dirs: Sequence[Path] = (),
    protected: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    replaced: Sequence[tuple[Path, Path]] = (),
) -> list[Mount]:
    """The ordered mounts on top of a read-only ``/`` (see the module docstring).

    Args:
        root: the working tree (writable).
        git_dirs: the ``.git`` entry of the tree and the git directories (read-only).
        protected: existing protected paths (read-only; :func:`protected_targets`).
        writable: extra writable folders (``sandbox.writable_paths``, a call's report folder).
        hidden: relay's state folders and credential files (hidden).
        replaced: ``(file, copy)``: files shown read-only with the content of ``copy`` (git's
            configuration without credentials, :mod:`relay.sandbox.gitconfig`).

    Returns:
        Mounts shallowest first; paths that do not exist are left out (nothing is created on
        the host), and of two rules for one path the stronger wins (hide > read-only >
        writable).
    """
    chosen: dict[Path, Mount] = {}
    rules: list[tuple[MountKind, Iterable[Path]]] = [
        ("bind", [root, *writable]),
        ("ro-bind", [*git_dirs, *protected]),
        ("hide", hidden),
    ]
    for kind, paths in rules:
        for raw in paths:
            text = _absolute(os.fspath(raw))
            if not os.path.lexists(text):
                continue
            path = Path(text)
            if os.path.islink(path):
                path = _real(path)
                if not path.exists():
                    continue
            old = chosen.get(path)
            if old is None or _STRENGTH[kind] >= _STRENGTH[old.kind]:
                chosen[path] = Mount(kind, path)
    for target, copy in replaced:
        path = Path(_absolute(os.fspath(target)))
        old = chosen.get(path)
        if os.path.isfile(path) and (old is None or old.kind != "hide"):
            chosen[path] = Mount("ro-bind", path, Path(copy))
    return sorted(chosen.values(), key=lambda m: (len(m.path.parts), _STRENGTH[m.kind]))


def _resolver_folder() -> Path | None:
    """The folder under ``/run`` holding ``/etc/resolv.conf``'s target, if any (kept visible
    when the network is allowed, so that names still resolve)."""
    try:
        target = _real(Path("/etc/resolv.conf"))
    except OSError:
        return None
    return target.parent if _inside(target, Path("/run")) and target.exists() else None


def bwrap_argv(
    bwrap: str,
    mounts: Sequence[Mount],
    *,
    network: Literal["allow", "deny"],
    cwd: Path,
    argv: Sequence[str],
    as_pid_1: bool = False,
) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in ``cwd`` inside the sandbox.

    Namespaces: a new PID namespace with its own ``/proc`` (no relay process, and no other
    process of the user, is visible; when the command's first process ends, every process it
    started is killed), IPC, UTS and cgroup namespaces, a new session (no terminal control),
    all capabilities dropped (also when relay runs as root), and a new network namespace with
    only a loopback device when ``network`` is ``deny``. ``--die-with-parent``: the sandbox is
    killed when relay dies, even by ``kill -9``. ``as_pid_1``: ``argv`` is the init of the PID
    namespace itself (a kept sandbox's server, :mod:`relay.sandbox.session`), not a child of
    bubblewrap's.
    """
    args = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        *(["--as-pid-1"] if as_pid_1 else []),
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/run",
    ]
    if network == "deny":
        args.append("--unshare-net")
    else:
        resolver = _resolver_folder()
        if resolver is not None:
            args += ["--ro-bind", str(resolver), str(resolver)]
    for mount in mounts:
        where = str(mount.path)
        if mount.kind == "hide":
            if mount.path.is_dir():
                args += ["--tmpfs", where]  # writable but private: nothing reaches the host
            else:
                args += ["--ro-bind", os.devnull, where]
        else:
            args += [f"--{mount.kind}", str(mount.source or mount.path), where]
    args += ["--chdir", str(cwd), "--", *argv]
    return args
