"""What the git tests share: the git processes relay starts (:class:`Spawns`, the
``spawns`` fixture), a repository object that remembers its scans as the goal loop's does
(``remembering``), and what the history and the tree hold."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import relay.gitsafe
from relay.gitrepo import GitRepo
from tests.conftest import call, git, respond

#: git subcommands that scan the whole working tree (a listed-paths ``git add`` does not).
_FULL_SCANS = ("status", "add -A")


class Spawns:
    """The git processes relay started, as their subcommand and arguments."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def subcommands(self) -> list[str]:
        names = []
        for command in self.commands:
            i = 1
            while command[i] == "-c" or command[i].startswith("-"):
                i += 2 if command[i] == "-c" else 1
            names.append(" ".join(command[i : i + 2]) if command[i] == "add" else command[i])
        return names

    def full_scans(self) -> int:
        scans = 0
        for command, name in zip(self.commands, self.subcommands(), strict=True):
            listed = "--pathspec-from-file=-" in command
            scans += name in _FULL_SCANS and not listed
        return scans

    def staging(self) -> list[str]:
        """The subcommands but the identity look-up (``git config``, once per repository)."""
        return [name for name in self.subcommands() if name != "config"]

    def clear(self) -> None:
        self.commands.clear()


@pytest.fixture()
def spawns(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spawns]:
    seen = Spawns()
    real = relay.gitsafe._spawn

    def spawn(command: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.commands.append(list(command))
        return real(command, *args, **kwargs)

    monkeypatch.setattr(relay.gitsafe, "_spawn", spawn)
    yield seen


@pytest.fixture()
def remembering(make_repo: Callable[..., Path]) -> Iterator[tuple[Path, GitRepo]]:
    root = make_repo({"src/a.py": "a = 1\n", "src/b.py": "b = 1\n", "docs/x.md": "x\n"})
    repo = GitRepo(root)
    repo.remember_scans()
    yield root, repo
    repo.close()


def committed_files(root: Path) -> dict[str, str]:
    out = git(root, "ls-tree", "-r", "--name-only", "-z", "HEAD")
    return {p: git(root, "show", f"HEAD:{p}") for p in out.split("\0") if p}


def porcelain(root: Path) -> str:
    return git(root, "status", "--porcelain=v1", "--untracked-files=all")


def note_rounds(rounds: int) -> list[dict[str, Any]]:
    """A script's responses for ``rounds`` rounds that each write a note with ``write_file``,
    set ``counter.txt`` with ``shell`` and hand off."""
    responses = []
    for n in range(1, rounds + 1):
        responses.append(
            respond(
                call("write_file", path=f"notes/r{n}.md", content=f"round {n}\n"),
                call("shell", command=f"echo {n} > counter.txt"),
            )
        )
        responses.append(respond(call("handoff", note=f"round {n} done")))
    return responses
