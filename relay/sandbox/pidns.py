"""Without bubblewrap, relay hidden from the model's commands by a PID namespace (SPEC §14).

With the sandbox off, each model command (a ``shell`` call, an audit command, an agent worker)
runs in a PID namespace of its own where the kernel allows it: ``unshare --pid --fork
--mount-proc`` when relay runs as root, and with ``--user --map-current-user`` (or
``--map-root-user``) for a normal user where unprivileged user namespaces work. The command is
PID 1 there and sees only its own processes: ``$PPID`` is 0, ``/proc``, ``ps`` and ``pgrep``
list no relay process and no watchdog (:mod:`relay.watchdog`), and ``kill`` cannot name them.
When the command's first process ends the kernel kills the rest of the namespace, so nothing it
started can leave the call either.

The network, the files, the user's identity (``--map-current-user``) and inherited descriptors
(the audit's report pipe) are as without the namespace. :func:`pid_namespace` tries it once per
process; where it does not work, relay runs commands without it and says so (the watchdog
still continues relay when a command stops it; docs/sandbox.md names what is then left).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["PidNamespace", "candidates", "pid_namespace"]

PROBE = ["/bin/sh", "-c", "exec cat /proc/self/stat"]
"""The trial command: inside a PID namespace with its own ``/proc`` it is PID 1 there."""

PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PidNamespace:
    """The PID namespace of the model's commands without the sandbox.

    Attributes:
        argv: the ``unshare`` command line put before each command; empty when the kernel
            (or a missing ``unshare``) does not allow it here.
        reason: why it is not in effect ("" when it is).
    """

    argv: tuple[str, ...] = ()
    reason: str = ""

    @property
    def active(self) -> bool:
        """True when the model's commands run in a PID namespace of their own."""
        return bool(self.argv)

    def describe(self) -> str:
        """The protection in words, as a run's notes give it."""
        if not self.active:
            return (
                f"no PID namespace for the model's commands ({self.reason}): they can see and "
                "signal relay; the watchdog continues relay when a command stops it"
            )
        how = " ".join(self.argv[1:])
        return (
            f"each command in a PID namespace of its own (unshare {how}): relay and its "
            "watchdog are not visible to it"
        )


def candidates(unshare: str, root: bool) -> list[tuple[str, ...]]:
    """The ``unshare`` command lines to try, best first: as root a PID namespace alone (a user
    namespace as well where root may not make one alone, as in some containers); as a normal
    user inside a user namespace, keeping the user's own uid, else mapped to root."""
    pid = ("--pid", "--fork", "--mount-proc", "--kill-child")
    user = [("--user", "--map-current-user"), ("--user", "--map-root-user")]
    if root:
        return [(unshare, *pid), (unshare, *user[1], *pid)]
    return [(unshare, *flags, *pid) for flags in user]


@functools.lru_cache(maxsize=1)
def pid_namespace() -> PidNamespace:
    """Whether the model's commands can run in a PID namespace of their own here, tried once
    per process (cached): the first of :func:`candidates` whose trial command runs as PID 1
    of a namespace with its own ``/proc``. Never raises."""
    if not sys.platform.startswith("linux"):
        return PidNamespace(reason=f"PID namespaces need Linux (this is {sys.platform})")
    unshare = shutil.which("unshare") or next(
        (p for p in ("/usr/bin/unshare", "/bin/unshare") if os.access(p, os.X_OK)), None
    )
    if unshare is None:
        return PidNamespace(reason="unshare (util-linux) is not installed")
    problem = ""
    for argv in candidates(unshare, os.geteuid() == 0):
        problem = _try(argv)
        if not problem:
            return PidNamespace(argv=argv)
    return PidNamespace(reason=problem)


def _try(argv: tuple[str, ...]) -> str:
    """ "" when ``argv`` runs the trial command as PID 1 of a new namespace, else why not."""
    try:
        proc = subprocess.run(
            [*argv, *PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unshare could not run: {exc}"
    if proc.returncode == 0 and proc.stdout.split()[:1] == ["1"]:
        return ""
    message = " ".join((proc.stderr or proc.stdout).split())[:200]
    return f"unshare does not work here: {message or f'exit code {proc.returncode}'}"
