"""The process inside a kept sandbox that starts the model's commands (SPEC §14).

relay runs this file's source with ``python -I -S -c`` as the first process of a bubblewrap
sandbox started with ``--as-pid-1``: it is the init of the sandbox's PID namespace, so that no
process of the model can signal it (the kernel delivers to a namespace's init only the signals
it handles, and it handles none), and it is not dumpable, so that no process of the model can
trace it or read its memory or its file descriptors. Its seccomp filter, which every command
inherits, keeps the model away from the kernel's keyrings (they outlive every process). It
reads only the source relay held in memory before any command of the model ran; it imports
only the standard library.

It serves one connection (a ``SOCK_SEQPACKET`` socket relay passes as a file descriptor): it
says ``{"ready": true}`` once it is set up; then each message is a JSON request ``{"argv": [...], "env": {...}, "cwd": "..."}`` with the write ends
of the command's stdout and stderr pipes attached. It starts the command in a new session
with stdin from ``/dev/null`` and waits for it; then it kills every other process of the
namespace (``kill(-1, SIGKILL)`` from the init reaches all of them) and reaps them, so that no
process the command started outlives the call, and answers ``{"code": N, "used": bool}``
(code 127, and the reason on its stderr, when the command could not start). ``used`` says that the call left
something in the sandbox's private folders (``/tmp``, ``/run``, ``/dev``, hidden folders),
System V IPC objects, or changed what the server's next commands inherit from it (resource
limits, nice value, CPU affinity: :func:`process_state`): the server then exits after answering, so that the next command gets a
fresh sandbox, as every command did before relay kept one. It also exits when relay closes the
connection.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import socket
import stat
import sys

MAX_REQUEST = 262144
"""Bytes of the largest request (relay starts a one-off sandbox for a larger one)."""
SYSV_IPC = ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem")
KEYRING_SYSCALLS = {
    0xC000003E: (248, 249, 250),  # x86_64 (and x32, whose bit 30 the filter clears)
    0x40000003: (286, 287, 288),  # i386 (also int 0x80 from a 64-bit process)
    0xC00000B7: (217, 218, 219),  # aarch64
    0x40000028: (309, 310, 311),  # arm
}
"""Per audit architecture: the numbers of ``add_key``, ``request_key`` and ``keyctl``."""
SELF_FILES = ("/proc/self/oom_score_adj", "/proc/self/coredump_filter")


def not_dumpable() -> None:
    """No process of the namespace may trace this one or read its memory or descriptors."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def keyring_filter() -> list[tuple[int, int, int, int]]:
    """A classic BPF seccomp program, as ``(code, jt, jf, k)``, that fails ``add_key``,
    ``request_key`` and ``keyctl`` with ``ENOSYS`` on the architectures of
    :data:`KEYRING_SYSCALLS` and allows every other call."""
    allow, deny = (0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x00050000 | 38)  # RET; ERRNO(ENOSYS)
    program: list[tuple[int, int, int, int]] = [(0x20, 0, 0, 4)]  # A = arch
    block = 7
    end = 1 + block * len(KEYRING_SYSCALLS) + 1  # the index of the deny
    for arch, numbers in KEYRING_SYSCALLS.items():
        program.append((0x15, 0, block - 1, arch))  # not this arch: the next block
        program += [(0x20, 0, 0, 0), (0x54, 0, 0, 0xBFFFFFFF)]  # A = nr & ~x32 bit
        for number in numbers:
            program.append((0x15, end - len(program) - 1, 0, number))
        program.append(allow)
    return [*program, allow, deny]


def no_keyrings() -> None:
    """Keep the model's commands away from the kernel's keyrings: the user, user session and
    persistent keyrings outlive every process (they belong to the user, and to the host's
    user when relay runs as root), so a key added in one call would reach the next. The
    seccomp filter is inherited by every command the server starts (SPEC §14)."""
    libc = ctypes.CDLL(None, use_errno=True)
    program = keyring_filter()
    filters = (ctypes.c_uint64 * len(program))()
    for n, (code, jt, jf, k) in enumerate(program):
        filters[n] = code | jt << 16 | jf << 24 | k << 32  # struct sock_filter, little end
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(program), ctypes.addressof(filters))
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


RLIMITS = tuple(getattr(resource, name) for name in sorted(dir(resource)) if name[:7] == "RLIMIT_")
"""Every resource limit this Python knows."""


class ProcFiles:
    """Files of ``/proc`` read after every call, each opened once (a ``pread`` from the start
    shows the file as it is now; the descriptors are not inherited by the commands)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.fds: list[int | None] = []
        for name in names:
            try:
                self.fds.append(os.open(name, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                self.fds.append(None)

    def read(self) -> list[bytes]:
        """Each file's contents now (``b""`` for one that cannot be read)."""
        out = []
        for fd in self.fds:
            try:
                out.append(os.pread(fd, 1 << 20, 0) if fd is not None else b"")
            except OSError:
                out.append(b"")
        return out


def process_state(own: ProcFiles) -> tuple[object, ...]:
    """What a process of the namespace can change in this one without tracing it, and what
    every command it starts inherits: resource limits (``prlimit``), nice value, CPU
    affinity, scheduling policy, and (``own``: :data:`SELF_FILES`) OOM score adjustment and
    core dump filter."""
    return (
        tuple(resource.getrlimit(limit) for limit in RLIMITS),
        os.getpriority(os.PRIO_PROCESS, 0),
        tuple(sorted(os.sched_getaffinity(0))),
        os.sched_getscheduler(0),
        os.sched_getparam(0).sched_priority,
        *own.read(),
    )


def folders_of(roots: list[str]) -> list[str]:
    """The folders of the private file systems under ``roots`` (mount points not followed):
    the roots and the folders bubblewrap made to hold its mounts."""
    found: list[str] = []
    for root in roots:
        try:
            device = os.lstat(root).st_dev
        except OSError:
            continue
        pending = [root]
        while pending:
            path = pending.pop()
            found.append(path)
            try:
                entries = list(os.scandir(path))
            except OSError:
                continue
            for entry in entries:
                try:
                    sub = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(sub.st_mode) and sub.st_dev == device:
                    pending.append(entry.path)
    return found


def folders_state(roots: list[str], folders: list[str]) -> list[tuple[int, ...]]:
    """What a call can change in the private file systems: per root the inodes and blocks in
    use (a file, folder or link made anywhere in it), per folder made before any call its
    times and mode (an entry removed or replaced, a mode changed)."""
    state: list[tuple[int, ...]] = []
    for root in roots:
        try:
            fs = os.statvfs(root)
        except OSError:
            state.append(())
            continue
        state.append((fs.f_files - fs.f_ffree, fs.f_blocks - fs.f_bfree))
    for path in folders:
        try:
            st = os.lstat(path)
        except OSError:
            state.append(())
            continue
        state.append((st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_mode))
    return state


class IpcObjects:
    """Whether System V shared memory, message queues or semaphores exist in the namespace:
    the kernel's counts (``shmctl(SHM_INFO)``, ``msgctl(MSG_INFO)``, ``semctl(SEM_INFO)``:
    a few microseconds), else, where a count cannot be had, the tables of :data:`SYSV_IPC`
    (a header line each when empty; tens of microseconds)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._buffer = buffer = ctypes.create_string_buffer(512)
        self._counts = (  # the call, the offset of the count in the structure it fills
            (lambda: libc.shmctl(0, 14, buffer), 0),  # struct shm_info.used_ids
            (lambda: libc.msgctl(0, 12, buffer), 0),  # struct msginfo.msgpool
            (lambda: libc.semctl(0, 0, 19, buffer), 28),  # struct seminfo.semusz
        )
        self._tables = ProcFiles(SYSV_IPC)

    def exist(self) -> bool:
        """True when an object of any of the three kinds exists."""
        for call, offset in self._counts:
            if call() < 0:
                return any(len(text.splitlines()) > 1 for text in self._tables.read())
            if ctypes.c_int.from_buffer(self._buffer, offset).value:
                return True
        return False


def sweep() -> None:
    """Kill every process of the namespace but this one and reap them all."""
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        try:
            while True:
                os.waitpid(-1, 0)
        except ChildProcessError:
            pass
        try:
            os.kill(-1, 0)
        except ProcessLookupError:
            return


def run(request: dict[str, object], fds: list[int]) -> dict[str, object]:
    """Run one command with ``fds`` (stdout, stderr) and wait for it; the answer. The caller
    closes ``fds``."""
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
    try:
        os.chdir(str(request["cwd"]))
        pid = os.posix_spawn(
            argv[0],
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, fds[0], 1),
                (os.POSIX_SPAWN_DUP2, fds[1], 2),
            ],
            setsid=True,
        )
    except OSError as exc:
        message = f"relay: cannot start {argv[0]}: {exc.strerror or exc}\n"
        with contextlib.suppress(OSError):
            os.write(fds[1], message.encode("utf-8", "replace"))
        return {"code": 127}
    _, status = os.waitpid(pid, 0)
    sweep()
    return {"code": os.waitstatus_to_exitcode(status)}


def main() -> int:
    """Serve the connection on descriptor ``argv[1]``; ``argv[2]`` is the JSON list of the
    private folders."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the init ignores what it does not handle
    not_dumpable()
    no_keyrings()
    conn = socket.socket(fileno=int(sys.argv[1]))
    conn.set_inheritable(False)
    roots = [str(r) for r in json.loads(sys.argv[2])]
    folders = folders_of(roots)
    before = folders_state(roots, folders)
    own, ipc = ProcFiles(SELF_FILES), IpcObjects()
    itself = process_state(own)
    conn.send(b'{"ready": true}')
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 2)
        except OSError:
            return 0
        if not message:
            return 0
        for fd in fds:
            os.set_inheritable(fd, False)
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return 1  # not relay's request: end the sandbox
        try:
            answer = run(json.loads(message), fds)
            used = ipc.exist() or folders_state(roots, folders) != before
            answer["used"] = used or process_state(own) != itself
        finally:  # the pipes end with the answer: relay wakes once for both
            for fd in fds:
                os.close(fd)
        conn.send(json.dumps(answer).encode())
        if answer["used"]:
            return 0


if __name__ == "__main__":
    sys.exit(main())
