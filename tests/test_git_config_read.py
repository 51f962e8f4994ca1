"""relay reads git's configuration (its drivers) with one ``git config`` process: one that
ends without a word (killed by a signal, as in a busy CI machine's second Ctrl+C) is asked
again, and a failure names git's exit status (CI flake of test_interrupt_model_call, issue 12)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import git

import relay.gitsafe as gitsafe
from relay.errors import RepoStateError
from relay.gitsafe import SafeGit


@pytest.fixture()
def safe(tmp_path: Path) -> SafeGit:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "filter.lfs.clean", "git-lfs clean -- %f")
    return SafeGit(tmp_path, tmp_path / ".git", tmp_path / ".git")


def _killed_first(count: list[int], kills: int):
    real = gitsafe._spawn

    def spawn(command, cwd, env, stdin, stderr=subprocess.PIPE):
        count[0] += 1
        if count[0] <= kills:  # a git config that a signal ends before it says anything
            return real(["sh", "-c", "kill -9 $$"], cwd, env, stdin, stderr)
        return real(command, cwd, env, stdin, stderr)

    return spawn


def test_a_git_config_killed_once_is_asked_again(safe: SafeGit, monkeypatch) -> None:
    count = [0]
    monkeypatch.setattr(gitsafe, "_spawn", _killed_first(count, 1))
    drivers, _files = safe._enumerate()
    assert ("filter", "lfs") in drivers and count[0] == 2


def test_a_git_config_that_keeps_failing_names_its_status(safe: SafeGit, monkeypatch) -> None:
    monkeypatch.setattr(gitsafe, "_spawn", _killed_first([0], 5))
    with pytest.raises(RepoStateError, match="git config ended with status -9"):
        safe._enumerate()
