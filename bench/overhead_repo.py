"""The bench repository, the scripted model's script, the physical floor of a round and the
git objects each round added (support of ``bench/overhead.py``)."""

from __future__ import annotations

import shutil
import sqlite3
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

MODULE_FILES = 5
BASE_FILES = MODULE_FILES + 2  # README.md, src/counter.py and the modules
T0 = 1_700_000_000
NOTES = 10
"""Round notes cycle over this many files, so that the tree (and what git scans) has the
same size at round 1,000 as at round 10: what grows is relay's, not the bench's."""
FILES_PER_ROUND = 5
"""Files a bench round changes: its note, src/counter.py, work/notes.md, and relay's progress
file and goal state."""


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run git in ``repo``; its stdout. Exits the bench with git's message on failure."""
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode(errors="replace")


def _module_text(k: int, version: int) -> bytes:
    lines = [f'"""Module {k} of the benchmark repository."""', "", f"VERSION = {version}", ""]
    for j in range(12):
        lines += [f"def helper_{j}(x):", f"    return x * {j + 1} + VERSION", ""]
    return ("\n".join(lines) + "\n").encode()


def build_repo(repo: Path, commits: int, tracked_files: int) -> float:
    """Create a repository with ``commits`` commits on ``main`` and ``tracked_files`` files;
    returns the seconds it took.

    The first commit adds every file (``data/dNN/fNNNNN.txt`` fill up to ``tracked_files``);
    each later commit changes one of the module files.
    """
    started = time.perf_counter()
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Bench")
    git(repo, "config", "user.email", "bench@example.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    out: list[bytes] = []

    def data(payload: bytes) -> None:
        out.append(b"data %d\n" % len(payload))
        out.append(payload)
        out.append(b"\n")

    def inline(path: str, payload: bytes) -> None:
        out.append(f"M 100644 inline {path}\n".encode())
        data(payload)

    for i in range(1, commits + 1):
        out.append(b"commit refs/heads/main\n")
        out.append(b"mark :%d\n" % i)
        out.append(b"committer Bench <bench@example.invalid> %d +0000\n" % (T0 + 60 * i))
        if i == 1:
            data(b"Initial commit\n")
            inline(
                "README.md", b"# Benchmark repository\n\nModules live in src/; notes in work/.\n"
            )
            inline("src/counter.py", b"counter = 0\n")
            for k in range(MODULE_FILES):
                inline(f"src/mod_{k}.py", _module_text(k, 1))
            for k in range(max(0, tracked_files - BASE_FILES)):
                inline(f"data/d{k // 500:02d}/f{k:05d}.txt", b"line %d\n" % k)
        else:
            k = i % MODULE_FILES
            data(f"Change module {k} (commit {i})\n\nTouches src/mod_{k}.py only.\n".encode())
            inline(f"src/mod_{k}.py", _module_text(k, i))
        out.append(b"\n")
    git(repo, "fast-import", "--quiet", stdin=b"".join(out))
    git(repo, "reset", "--hard", "-q", "main")
    return time.perf_counter() - started


# --------------------------------------------------------------------------------------------
# The scripted model's script (SPEC §13)
# --------------------------------------------------------------------------------------------


class CallMaker:
    """Makes the real tool calls of each round: a cycle of ten calls (3 read_file, 2 write_file,
    2 edit_file, 3 shell) that always succeed; cut or repeated to the wanted count."""

    def __init__(self) -> None:
        self.counter = 0  # value of ``counter`` in src/counter.py

    def round_calls(self, r: int, n: int) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        rep = 0
        while len(calls) < n:
            calls += self._cycle(r, rep, n - len(calls))
            rep += 1
        return calls

    def _cycle(self, r: int, rep: int, count: int) -> list[dict[str, Any]]:
        sfx = f"_{rep}" if rep else ""
        note = f"work/round_{r % NOTES:02d}{sfx}.md"
        old = self.counter
        cycle = [
            {"name": "read_file", "arguments": {"path": f"src/mod_{(r + rep) % MODULE_FILES}.py"}},
            {"name": "shell", "arguments": {"command": f"echo round {r}"}},
            {
                "name": "write_file",
                "arguments": {"path": note, "content": f"# Round {r}\n\nstatus: todo\n"},
            },
            {"name": "read_file", "arguments": {"path": note}},
            {
                "name": "edit_file",
                "arguments": {"path": note, "old": "status: todo", "new": "status: done"},
            },
            {"name": "shell", "arguments": {"command": "true"}},
            {"name": "read_file", "arguments": {"path": "README.md", "limit": 20}},
            {
                "name": "edit_file",
                "arguments": {
                    "path": "src/counter.py",
                    "old": f"counter = {old}\n",
                    "new": f"counter = {old + 1}\n",
                },
            },
            {
                "name": "write_file",
                "arguments": {"path": "work/notes.md", "content": f"Last round: {r}{sfx}\n"},
            },
            {"name": "shell", "arguments": {"command": "ls src"}},
        ][:count]
        if any(c["arguments"].get("path") == "src/counter.py" for c in cycle):
            self.counter += 1
        return cycle


def build_script(rounds: int, calls: int, per_step: int) -> tuple[dict[str, Any], int, list[str]]:
    """The script, the number of steps (model calls) per round and the shell commands of the
    last round (every round runs as many)."""
    maker = CallMaker()
    responses: list[dict[str, Any]] = []
    steps = 0
    shells: list[str] = []
    for r in range(1, rounds + 1):
        round_calls = maker.round_calls(r, calls)
        shells = [c["arguments"]["command"] for c in round_calls if c["name"] == "shell"]
        chunks = [round_calls[i : i + per_step] for i in range(0, len(round_calls), per_step)]
        if not chunks:
            chunks = [[]]
        note = (
            f"Round {r}: wrote work/round_{r % NOTES:02d}.md, bumped src/counter.py.\n"
            f"Next: continue with round {r + 1}."
        )
        chunks[-1] = [*chunks[-1], {"name": "handoff", "arguments": {"note": note}}]
        for i, chunk in enumerate(chunks):
            responses.append(
                {
                    "text": f"Round {r}, step {i + 1}: working on the notes and the counter.",
                    "tool_calls": chunk,
                    "usage": {"input": 3000 + 400 * i, "cached": 0, "output": 120},
                }
            )
        steps = len(chunks)
    return {"responses": responses, "when_exhausted": "error"}, steps, shells


# --------------------------------------------------------------------------------------------
# The physical floor of a round
# --------------------------------------------------------------------------------------------

FLOOR_PARTS = ("git add+commit", "sqlite tx+fsync", "shell spawns")


def round_files(n: int) -> dict[str, str]:
    """What bench round ``n`` changes (the ``FILES_PER_ROUND`` files), with contents of the
    sizes relay's round writes: its note (new in the first ``NOTES`` rounds),
    ``src/counter.py``, ``work/notes.md``, and the progress file and goal state of relay
    (about 2 kB and 5 kB)."""
    return {
        f"work/round_{n % NOTES:02d}.md": f"# Round {n}\n\nstatus: done\n",
        "src/counter.py": f"counter = {n}\n",
        "work/notes.md": f"Last round: {n}\n",
        ".relay/progress.md": f"# Progress, round {n}\n" + "- a round's line\n" * 120,
        ".relay/goal.json": f'{{"round": {n}, "rounds": [{", ".join(["{}"] * 1800)}]}}\n',
    }


class Floor:
    """What a round cannot avoid, measured in a copy of the bench repository (same files,
    same history): writing the files a round changes (:func:`round_files`) is not timed; one
    ``git add -A`` and one ``git commit``, one SQLite transaction with fsync (WAL,
    ``synchronous=FULL``) of a step-sized row, and one plain ``bash -c`` spawn per shell
    command of the round are. Before the first sample of a window, the rounds since the last
    one are written and committed untimed, so that the copy holds the notes relay's tree
    holds at that round (a round that makes a new note is sampled as making one).

    Args:
        repo: the bench repository, copied before relay touches it.
        where: a folder for the copy and the database.
        shells: the shell commands of one round.
    """

    def __init__(self, repo: Path, where: Path, shells: list[str]) -> None:
        self.repo = where / "floor-repo"
        shutil.copytree(repo, self.repo, symlinks=True)
        self.shells = shells
        self.sandbox = _bwrap(self.repo)
        self.samples: dict[int, dict[str, float]] = {}
        self.boxed: dict[int, float] = {}  # ms of the round's spawns in bubblewrap
        self._db = sqlite3.connect(where / "floor.db", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE steps (id INTEGER PRIMARY KEY, actions TEXT)")
        self._round = 0  # the last round whose files the copy holds

    def _write(self, n: int) -> None:
        for rel, text in round_files(n).items():
            path = self.repo / rel
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
        self._round = n

    def sample(self, n: int) -> None:
        """Measure the floor once, as round ``n`` (milliseconds of each of FLOOR_PARTS)."""
        if self._round < n - 1:  # catch up untimed: the notes of the rounds in between
            for m in range(max(self._round + 1, n - NOTES), n):
                self._write(m)
            git(self.repo, "add", "-A")
            git(self.repo, "commit", "-q", "-m", f"rounds up to {n - 1}")
        self._write(n)
        t0 = time.perf_counter()
        for args in (["add", "-A"], ["commit", "-q", "-m", f"round {n}"]):
            subprocess.run(["git", *args], cwd=self.repo, capture_output=True, check=True)
        t1 = time.perf_counter()
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("INSERT INTO steps (actions) VALUES (?)", ("x" * 4000,))
        self._db.execute("COMMIT")
        t2 = time.perf_counter()
        for command in self.shells:
            subprocess.run(["/bin/bash", "-c", command], capture_output=True, check=False)
        t3 = time.perf_counter()
        self.samples[n] = dict(
            zip(FLOOR_PARTS, (1000 * (t1 - t0), 1000 * (t2 - t1), 1000 * (t3 - t2)), strict=True)
        )
        if self.sandbox is not None:  # the same spawns, each in a bubblewrap sandbox
            box, env = self.sandbox
            t4 = time.perf_counter()
            for command in self.shells:
                subprocess.run(box(command), env=env, capture_output=True, check=False)
            self.boxed[n] = 1000 * (time.perf_counter() - t4)

    def median(self, rounds: list[int]) -> dict[str, float]:
        """Median milliseconds of each part, and their ``total``, over the samples taken at
        ``rounds`` (all samples when none was taken there)."""
        picked = [self.samples[n] for n in rounds if n in self.samples] or list(
            self.samples.values()
        )
        out = {part: statistics.median(s[part] for s in picked) for part in FLOOR_PARTS}
        out["total"] = statistics.median(sum(s.values()) for s in picked)
        return out

    def boxed_total(self, rounds: list[int]) -> float | None:
        """The median floor with each shell spawn in a bubblewrap sandbox (what a sandboxed
        command cannot avoid) instead of a plain spawn; None without bubblewrap."""
        picked = [n for n in rounds if n in self.boxed] or list(self.boxed)
        if not picked:
            return None
        return statistics.median(
            self.samples[n]["git add+commit"] + self.samples[n]["sqlite tx+fsync"] + self.boxed[n]
            for n in picked
        )

    def close(self) -> None:
        self._db.close()


def _bwrap(root: Path) -> tuple[Any, dict[str, str]] | None:
    """A function from a shell command to relay's bubblewrap argument list for it in ``root``,
    and the environment; None when bubblewrap is not usable here."""
    from relay.sandbox import SandboxUnavailable, resolve_sandbox

    try:
        sandbox = resolve_sandbox("required", state_dirs=[root / ".git" / "relay"])
    except SandboxUnavailable:
        return None

    def box(command: str) -> list[str]:
        return sandbox.command(["/bin/bash", "-c", command], root=root)

    return box, sandbox.environment()


def objects_per_round(repo: Path, branch: str, rounds: list[int]) -> dict[int, tuple[int, int]]:
    """``{round: (objects, bytes)}``: the git objects that round ``n``'s commit on ``branch``
    added (reachable from it, not from its parent) and their size, for each of ``rounds``."""
    shas = git(repo, "rev-list", "--reverse", f"main..{branch}").split()
    out: dict[int, tuple[int, int]] = {}
    for n in rounds:
        if not 1 <= n <= len(shas):
            continue
        listed = git(repo, "rev-list", "--objects", shas[n - 1], f"^{shas[n - 1]}^")
        ids = "\n".join(line.split()[0] for line in listed.splitlines() if line.strip())
        sizes = git(repo, "cat-file", "--batch-check=%(objectsize)", stdin=ids.encode() + b"\n")
        values = [int(v) for v in sizes.split()]
        out[n] = (len(values), sum(values))
    return out
