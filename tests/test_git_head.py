"""HEAD's sha read in-process and remembered while the files it comes from are unchanged
(relay.gitrefs): whatever moves HEAD — a commit by another process, a branch switch, packed
refs, a detached HEAD, a reset — is seen at the next call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import relay.gitrefs
from relay.errors import RepoStateError
from relay.gitrepo import GitRepo
from tests.conftest import git


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name, encoding="utf-8")
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD").strip()


def test_head_follows_every_move_made_outside_relay(make_repo: Callable[..., Path]) -> None:
    repo = make_repo()
    g = GitRepo(repo)
    first = g.head_sha()
    assert first == git(repo, "rev-parse", "HEAD").strip()
    assert g.head_sha() == first  # remembered
    second = commit(repo, "a.txt")  # another process commits
    assert g.head_sha() == second
    git(repo, "checkout", "-q", "-b", "side", first)  # a branch switch
    assert g.head_sha() == first
    git(repo, "pack-refs", "--all")  # the ref is now only in packed-refs
    assert not (repo / ".git" / "refs" / "heads" / "side").exists()
    assert g.head_sha() == first
    git(repo, "update-ref", "refs/heads/side", second)  # a packed ref moved
    assert g.head_sha() == second
    git(repo, "checkout", "-q", "--detach", first)  # detached
    assert g.head_sha() == first
    git(repo, "reset", "-q", "--hard", second)
    assert g.head_sha() == second


def test_a_ref_that_is_itself_symbolic_is_followed(make_repo: Callable[..., Path]) -> None:
    repo = make_repo()
    g = GitRepo(repo)
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    assert g.head_sha() == git(repo, "rev-parse", "HEAD").strip()
    moved = commit(repo, "b.txt")  # moves main through the alias
    assert g.head_sha() == moved


def test_an_unborn_branch_still_says_so(make_repo: Callable[..., Path]) -> None:
    repo = make_repo(commit=False)
    with pytest.raises(RepoStateError, match="no commits yet"):
        GitRepo(repo).head_sha()


def test_commit_trailers_newest_first_and_all_history_when_the_base_is_gone(
    make_repo: Callable[..., Path],
) -> None:
    repo = make_repo()
    base = git(repo, "rev-parse", "HEAD").strip()
    for n in (1, 2):
        (repo / f"r{n}.txt").write_text(str(n))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"round {n}\n\nRelay-Goal: g1\nRelay-Round: {n}")
    g = GitRepo(repo)
    found = g.commit_trailers(base)
    assert [t.get("Relay-Round") for _, t in found] == ["2", "1"]
    assert found[0][0] == git(repo, "rev-parse", "HEAD").strip()
    assert len(g.commit_trailers("0" * 40)) == 3  # an unknown base: the whole history


def test_a_loose_ref_or_a_detached_head_is_read_without_gitpython(
    make_repo: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sha HEAD names through a loose ref (or a detached HEAD's own) is the content relay
    already read to know whether HEAD moved; gitpython is only asked for packed refs."""
    repo = make_repo()
    g = GitRepo(repo)
    asked: list[str] = []

    def dereference(_repo: object, ref: str) -> str:
        asked.append(ref)
        return git(repo, "rev-parse", ref).strip()

    monkeypatch.setattr(
        "relay.gitrefs.SymbolicReference.dereference_recursive", staticmethod(dereference)
    )
    first = git(repo, "rev-parse", "HEAD").strip()
    assert g.head_sha() == first
    second = commit(repo, "a.txt")
    assert g.head_sha() == second
    git(repo, "checkout", "-q", "--detach", first)
    assert g.head_sha() == first
    assert asked == []
    git(repo, "checkout", "-q", "main")
    git(repo, "pack-refs", "--all")
    assert g.head_sha() == second and asked == ["HEAD"]


def test_an_unmoved_head_is_not_read_again(
    make_repo: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the kernel tells of no change to HEAD, its ref or packed-refs, the remembered
    sha is the answer without reading them; a commit by another process is still seen."""
    repo = make_repo()
    g = GitRepo(repo)
    g.remember_scans(watch_head=True)  # as in the sandbox, where .git is read-only
    first = g.head_sha()
    reads: list[object] = []
    real = relay.gitrefs.read_regular_bytes
    monkeypatch.setattr(
        relay.gitrefs, "read_regular_bytes", lambda *a, **k: reads.append(a) or real(*a, **k)
    )
    assert [g.head_sha() for _ in range(5)] == [first] * 5 and reads == []
    second = commit(repo, "c.txt")
    assert g.head_sha() == second and reads


def test_outside_the_sandbox_head_is_read_at_every_question(
    make_repo: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command outside the sandbox could write a ref through mmap, which the kernel's file
    events do not tell of: HEAD's files are then compared at every question."""
    repo = make_repo()
    g = GitRepo(repo)
    g.remember_scans()
    g.head_sha()
    reads: list[object] = []
    real = relay.gitrefs.read_regular_bytes
    monkeypatch.setattr(
        relay.gitrefs, "read_regular_bytes", lambda *a, **k: reads.append(a) or real(*a, **k)
    )
    g.head_sha()
    assert reads
