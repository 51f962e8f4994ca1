"""Crash exactness at every point (SPEC §10, §11; issue 12).

A scripted goal of four rounds (a write, an edit, a shell command, a new file, an answer without
tool call, and a ``complete`` claim that the audit checks by running the project's check) runs
once uninterrupted: the reference. Then, for each point of that run (every write relay makes
into the tree or its state, every store commit, every git commit, the start of the model's
command and of the audit's command), the same goal runs again and is stopped at that point:

* with SIGKILL, then ``relay resume`` (for some points the resume is killed too, and resumed);
* with two Ctrl+C (SIGINT) at the same point or a few points apart; the state must then be
  committed and resumable at once;
* and with two real Ctrl+C 10–50 ms apart on a ``relay`` process.

Each end must be the reference's: the same files in the working tree and at HEAD, the same
status and reason, a clean tree, no round number committed twice, no commit lost, and the
store's rounds matching git's. The points are counted by :mod:`killpoints` in forked children,
without hooks in relay's code, so the kills are deterministic.

A kill can make relay make the step in flight again (at least once, SPEC §13): like a model's,
the script's edit is anchored on the text it replaces.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import call, complete, git, respond, state_dir
from killpoints import Outcome, Plan, points, run_relay, wait_gone
from test_user_controls import NOTES, WRITE_NOTES, Live, handoff, shell

from relay.store import Store

GOAL = "Implement add and mul in app.py; check_app.py must pass."
OWN = ".relay/"
TODO = "# mul: to do\n"
COMMAND = "started a command"


def goal_files(marker: str) -> dict[str, str]:
    """The goal's repository: a stub, the project's check, and the deliverables."""
    config = {
        "deliverables": [
            {"file": "app.py", "contains": "def mul"},
            {"command": f"python check_app.py  # {marker}", "timeout_s": 60},
        ]
    }
    return {
        "app.py": "def add(a, b):\n    raise NotImplementedError\n",
        "check_app.py": (
            "import app\n\nassert app.add(2, 3) == 5\nassert app.mul(2, 3) == 6\n"
            'print("checks passed")\n'
        ),
        ".gitignore": "__pycache__/\n",
        "relay.yaml": yaml.safe_dump(config, sort_keys=False),
    }


def goal_script(marker: str) -> list[dict[str, Any]]:
    """Round 1 writes, round 2 edits and runs a command, round 3 adds a file and answers
    without a tool call (the automatic handoff), round 4 claims ``complete``."""
    add = "def add(a, b):\n    return a + b\n"
    mul = "\n\ndef mul(a, b):\n    return a * b\n"
    command = f"python -c 'import app; print(app.mul(2, 3))' > out.txt  # {marker}"
    checklist = [{"requirement": "add and mul", "evidence": "app.py"}]
    return [
        respond(call("write_file", path="app.py", content=add + TODO), handoff("add")),
        respond(call("edit_file", path="app.py", old=TODO, new=mul)),
        respond(call("shell", command=command), handoff("mul added")),
        respond(call("write_file", path="NOTES.md", content="mul and add\n")),
        respond(text="Round 3 is done."),
        respond(call("update_goal", status="complete", summary="done", checklist=checklist)),
    ]


@dataclass(frozen=True)
class Final:
    """A goal's end as the user sees it."""

    status: str
    reason: str | None
    tree: dict[str, bytes]
    head: dict[str, bytes]


class Goal:
    """One copy of the goal's repository and the runs on it (forked, counted)."""

    def __init__(self, setup: dict[str, Any], name: str) -> None:
        self.repo = setup["tmp"] / name
        shutil.copytree(setup["base"], self.repo, symlinks=True)
        self.script: Path = setup["script"]
        self.marker: str = setup["marker"]
        self.logs = setup["tmp"] / f"{name}-logs"
        self.logs.mkdir()
        self.runs = 0

    def run(self, actions: dict[int, str] | None = None, *, resume: bool = False) -> Outcome:
        """``relay run GOAL`` (or ``relay resume``) with ``actions`` at its points."""
        self.runs += 1
        argv = ["resume"] if resume else ["run", GOAL, "--model", f"scripted:{self.script}"]
        plan = Plan(self.logs / f"points-{self.runs}.tsv", dict(actions or {}))
        argv += ["--repo", str(self.repo), "--json"]
        outcome = run_relay(argv, self.logs, plan=plan, marker=self.marker)
        wait_gone(self.marker)  # a command the stopped run left ends on its own
        return outcome

    def go_on(self, actions: dict[int, str] | None = None) -> Outcome | None:
        """What the user does next: ``relay resume`` an open goal, ``relay run`` the goal
        again when none was stored; nothing when it had ended (None)."""
        status = self.status()
        if status in ("complete", "cleared"):
            return None
        return self.run(actions, resume=status is not None)

    def _store(self) -> Store | None:
        db = state_dir(self.repo) / "relay.db"
        return Store(db) if db.exists() else None

    def status(self) -> str | None:
        """The latest goal's status, or None when no goal was stored."""
        store = self._store()
        if store is None:
            return None
        try:
            goal = store.latest_goal()
            return goal.status if goal else None
        finally:
            store.close()

    def final(self) -> Final:
        store = self._store()
        assert store is not None
        try:
            goal = store.latest_goal()
            assert goal is not None
            return Final(goal.status, goal.reason, self._files(), self._head())
        finally:
            store.close()

    def _files(self) -> dict[str, bytes]:
        listed = git(self.repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        paths = [p for p in listed.split("\0") if p and not p.startswith(OWN)]
        return {p: (self.repo / p).read_bytes() for p in paths if (self.repo / p).is_file()}

    def _head(self) -> dict[str, bytes]:
        listed = git(self.repo, "ls-tree", "-r", "-z", "--name-only", "HEAD")
        paths = [p for p in listed.split("\0") if p and not p.startswith(OWN)]
        return {p: git(self.repo, "show", f"HEAD:{p}").encode() for p in paths}

    def problems(self, reference: Final, before: set[str]) -> list[str]:
        """How the end differs from the reference's, or breaks a rule of git and the store;
        ``before`` are the commits that existed when the run was stopped."""
        found: list[str] = []
        end = self.final()
        if (end.status, end.reason) != (reference.status, reference.reason):
            found.append(f"ended {end.status} ({end.reason}), not {reference.status}")
        if end.tree != reference.tree:
            found.append(f"working tree differs: {_diff(end.tree, reference.tree)}")
        if end.head != reference.head:
            found.append(f"HEAD differs: {_diff(end.head, reference.head)}")
        lost = [c for c in before if not _ancestor(self.repo, c)]
        if lost:
            found.append(f"commits lost: {lost}")
        found += self.settled()
        committed = json.loads(git(self.repo, "show", f"HEAD:{OWN}goal.json"))["goal"]
        if committed["status"] != end.status:
            found.append(f"HEAD's goal state says {committed['status']}, the store {end.status}")
        return found

    def settled(self) -> list[str]:
        """What keeps the state from being committed and consistent: uncommitted files, a
        round number committed twice, rounds of the store and of git that disagree."""
        found: list[str] = []
        dirty = git(self.repo, "status", "--porcelain", "--untracked-files=all")
        if dirty:
            found.append(f"uncommitted: {dirty.split()}")
        store = self._store()
        if store is None:
            return found
        try:
            goal = store.latest_goal()
            rows = {r.n: r for r in store.rounds(goal.id)} if goal else {}
        finally:
            store.close()
        if goal is None:
            return found
        commits = _round_commits(self.repo)
        found += [f"round {n} committed {len(s)} times" for n, s in commits.items() if len(s) > 1]
        if goal.rounds != max(rows, default=0):
            found.append(f"the store counts {goal.rounds} rounds but has {sorted(rows)}")
        for n, shas in commits.items():
            if n not in rows or rows[n].commit_sha not in shas:
                found.append(f"round {n} is committed as {shas}, the store has {rows.get(n)}")
        for n, row in rows.items():
            if not row.finished:
                found.append(f"round {n} never ended in the store")
            elif n not in commits and (row.commit_sha or row.end_reason != "interrupted"):
                found.append(f"round {n} ({row.end_reason}) has no commit")
        return found


def _round_commits(repo: Path) -> dict[int, list[str]]:
    log = git(repo, "log", "--format=%H %(trailers:key=Relay-Round,valueonly,separator=%x2C)")
    commits: dict[int, list[str]] = {}
    for line in log.splitlines():
        sha, _, n = line.partition(" ")
        if n.strip():
            commits.setdefault(int(n), []).append(sha)
    return commits


def _ancestor(repo: Path, sha: str) -> bool:
    args = ["git", "merge-base", "--is-ancestor", sha, "HEAD"]
    return subprocess.run(args, cwd=repo, capture_output=True, check=False).returncode == 0


def _diff(got: dict[str, bytes], want: dict[str, bytes]) -> str:
    return ", ".join(n for n in sorted(set(got) | set(want)) if got.get(n) != want.get(n))


def _said(outcome: Outcome) -> str:
    """What a run that failed said, in one line."""
    try:
        data = json.loads(outcome.stdout)
        said = f"{data['status']} ({data['reason']}): {data['message']}"
    except (ValueError, KeyError):
        said = outcome.stderr.strip()[-300:]
    return f"exit {outcome.code}: " + " ".join(said.split())[:300]


@pytest.fixture()
def setup(tmp_path: Path, make_repo: Any, write_script: Any) -> dict[str, Any]:
    """The goal's base repository and script, and the reference run's end and points."""
    marker = f"kp-{uuid.uuid4().hex[:10]}"
    found = {
        "tmp": tmp_path,
        "base": make_repo(goal_files(marker), name="base"),
        "script": write_script(goal_script(marker)),
        "marker": marker,
    }
    reference = Goal(found, "reference")
    outcome = reference.run()
    assert outcome.code == 0, outcome.stderr
    found["final"] = reference.final()
    found["labels"] = points(reference.logs / "points-1.tsv")
    assert found["final"].status == "complete"
    return found


def _go_on_and_compare(goal: Goal, where: str, setup: dict[str, Any]) -> list[str]:
    before = set(git(goal.repo, "rev-list", "--all").split())
    resumed = goal.go_on()
    if resumed is not None and resumed.code != 0:
        return [f"{where}: {_said(resumed)}"]
    return [f"{where}: {problem}" for problem in goal.problems(setup["final"], before)]


def test_a_kill_at_any_point_ends_like_the_uninterrupted_run(setup) -> None:
    labels: list[str] = setup["labels"]
    failures: list[str] = []
    for point in range(1, len(labels) + 1):
        where = f"kill at point {point} ({labels[point - 1]})"
        goal = Goal(setup, f"kill{point}")
        first = goal.run({point: "kill"})
        if not first.killed:
            failures.append(f"{where}: not reached ({_said(first)})")
            continue
        if point % 9 == 0:  # the resume is killed too, in its first round
            second = goal.go_on({12: "kill"})
            where += " and the resume's point 12"
            if second is not None and not second.killed and second.code != 0:
                failures.append(f"{where}: {_said(second)}")
                continue
        failures += _go_on_and_compare(goal, where, setup)
    assert not failures, "\n".join(failures)


def test_two_ctrl_c_at_any_point_leave_a_committed_resumable_goal(setup) -> None:
    """Two Ctrl+C at one point: the second interrupts what the first one's request reached,
    and the end is the reference's. A few points apart: the first is a pause (the step's calls
    that had not run are not run; the script does not know), so the end is only required to be
    committed, consistent and resumable."""
    labels: list[str] = setup["labels"]
    pairs = [(point, point) for point in range(1, len(labels) + 1, 3)]
    pairs += [(point, point + gap) for point in range(2, len(labels) - 3, 7) for gap in (1, 3)]
    failures: list[str] = []
    for first_at, second_at in pairs:
        where = f"Ctrl+C at points {first_at} ({labels[first_at - 1]}) and {second_at}"
        goal = Goal(setup, f"int{first_at}-{second_at}")
        actions = {first_at: "sigint", second_at: "sigint"}
        stopped = goal.run({first_at: "sigint2"} if first_at == second_at else actions)
        if stopped.code not in (0, 130) or "Traceback" in stopped.stderr:
            failures.append(f"{where}: {_said(stopped)}")
            continue
        failures += [f"{where}: then {problem}" for problem in goal.settled()]
        if first_at == second_at:
            failures += _go_on_and_compare(goal, where, setup)
            continue
        resumed = goal.go_on()
        if resumed is not None and (resumed.code == 1 or "Traceback" in resumed.stderr):
            failures.append(f"{where}: resume refused: {_said(resumed)}")
        failures += [f"{where}: after the resume: {problem}" for problem in goal.settled()]
    assert not failures, "\n".join(failures)


@pytest.fixture()
def live(tmp_path: Path) -> Any:
    lv = Live(tmp_path)
    try:
        yield lv
    finally:
        lv.cleanup()


@pytest.mark.parametrize("gap_ms", [10, 25, 50])
def test_two_real_ctrl_c_10_to_50_ms_apart_leave_a_committed_resumable_goal(
    make_repo, write_script, live, gap_ms
) -> None:
    repo = make_repo(config=NOTES)
    slow = live.slow()
    script = write_script([respond(WRITE_NOTES, handoff("notes written")), respond(shell(slow))])
    run = live.run(repo, script)
    live.wait_started(run, slow)
    os.killpg(run.pid, signal.SIGINT)  # like a terminal: the whole foreground group
    time.sleep(gap_ms / 1000)
    if run.proc.poll() is None:  # else the first one's shutdown was over already
        os.killpg(run.pid, signal.SIGINT)
    code = run.wait()
    assert code in {130, -signal.SIGINT}, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    store = Store(state_dir(repo) / "relay.db")
    goal = store.latest_goal()
    assert goal is not None and goal.status == "paused"
    rows = store.rounds(goal.id)
    store.close()
    assert goal.rounds == max(r.n for r in rows) >= 1  # round 1 was committed
    assert all(r.finished for r in rows)
    commits = _round_commits(repo)
    assert all(len(shas) == 1 for shas in commits.values()), commits
    assert {r.n: r.commit_sha for r in rows if r.commit_sha} == {
        n: shas[0] for n, shas in commits.items()
    }

    resumed = live.start(
        "resume", "--repo", repo, "--model", f"scripted:{write_script([complete()])}", "--json"
    )
    assert resumed.wait() == 0, resumed.stderr
    assert resumed.json()["status"] == "complete"
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    assert git(repo, "status", "--porcelain") == ""
    assert all(len(shas) == 1 for shas in _round_commits(repo).values())


def test_a_kill_after_the_commit_that_ended_the_goal_keeps_its_status(
    tmp_path, make_repo, write_script
) -> None:
    """The goal ended ``needs_user_input`` with round 2's commit; the kill came before the store
    knew: the resume takes the status from the commit, as a fresh clone of the branch would,
    and continues it as the user's resume of a stopped goal (who answered: the script's last
    response completes it)."""
    question = call("update_goal", status="needs_user_input", summary="?", question="Which?")
    found = {
        "tmp": tmp_path,
        "base": make_repo(config=NOTES, name="base"),
        "script": write_script(
            [respond(WRITE_NOTES, handoff("notes")), respond(question), complete()]
        ),
        "marker": f"kp-{uuid.uuid4().hex[:10]}",
    }
    reference = Goal(found, "reference")
    assert reference.run().code == 2
    labels = points(reference.logs / "points-1.tsv")
    commit = next(i for i, s in enumerate(labels, 1) if s.startswith("git commit relay: round 2"))
    goal = Goal(found, "killed")
    assert goal.run({commit: "kill"}).killed
    assert goal.status() == "active"
    resumed = goal.go_on()
    assert resumed is not None and resumed.code == 0, _said(resumed)
    data = json.loads(resumed.stdout)
    details = {e["kind"]: e["detail"] for e in data["events"]}
    assert "round 2 was committed" in details["recovered"]
    assert details["resumed"].startswith("resumed from needs_user_input")
    assert sorted(_round_commits(goal.repo)) == [1, 2, 3]
    assert goal.settled() == []
