"""Tests for relay.gitrepo against real temporary git repositories."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.errors import RepoStateError
from relay.gitrepo import CommitSummary, GitRepo, goal_slug

# --------------------------------------------------------------------------- helpers


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    """Run git in ``cwd``; return stdout (text)."""
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def init_repo(path: Path, *, user: bool = True, first_commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    if user:
        git(path, "config", "user.name", "Test User")
        git(path, "config", "user.email", "test@example.com")
    if first_commit:
        write(path, "README.md", "hello\n")
        git(path, "add", "README.md")
        git(path, "commit", "-q", "-m", "initial")
    return path


def commit_file(root: Path, rel: str, text: str, message: str) -> str:
    write(root, rel, text)
    git(root, "add", "--", rel)
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def snapshot(root: Path) -> tuple[object, ...]:
    """Everything a refusal must leave untouched: refs, HEAD, index, tree, exclude file."""
    gitdir = Path(git(root, "rev-parse", "--absolute-git-dir").strip())
    index = gitdir / "index"
    exclude = gitdir / "info" / "exclude"
    files = sorted(
        (str(p.relative_to(root)), hashlib.sha1(p.read_bytes()).hexdigest())
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    )
    return (
        (gitdir / "HEAD").read_text(),
        git(root, "for-each-ref"),
        index.read_bytes() if index.exists() else b"",
        exclude.read_bytes() if exclude.exists() else b"",
        files,
        sorted(p.name for p in gitdir.iterdir()),
    )


def refuse(repo: GitRepo, match: str, **kwargs: bool) -> str:
    """Assert preflight refuses with a message matching ``match`` and changes nothing."""
    before = snapshot(repo.root)
    with pytest.raises(RepoStateError, match=match) as info:
        repo.preflight(**kwargs)
    assert snapshot(repo.root) == before
    return str(info.value)


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user/system git config and no inherited GIT_* variables."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    for name in list(os.environ):
        if name.startswith("GIT_") or name == "EMAIL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "work")


@pytest.fixture
def repo(root: Path) -> Iterator[GitRepo]:
    r = GitRepo(root)
    yield r
    r.close()


def conflict_branches(root: Path) -> None:
    """main and 'other' both change conflict.txt differently from a common base."""
    commit_file(root, "conflict.txt", "base\n", "base")
    git(root, "switch", "-q", "-c", "other")
    commit_file(root, "conflict.txt", "other\n", "other side")
    git(root, "switch", "-q", "main")
    commit_file(root, "conflict.txt", "main\n", "main side")


# --------------------------------------------------------------------------- opening


def test_not_a_git_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RepoStateError, match=r"is not a git repository.*--repo.*git init"):
        GitRepo(plain)
    with pytest.raises(RepoStateError, match="missing does not exist"):
        GitRepo(tmp_path / "missing")


def test_bare_repository_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    with pytest.raises(RepoStateError, match="bare"):
        GitRepo(bare)


def test_opens_from_subdirectory_and_file(root: Path) -> None:
    sub = root / "src" / "deep"
    sub.mkdir(parents=True)
    assert GitRepo(sub).root == root.resolve()
    assert GitRepo(root / "README.md").root == root.resolve()


# --------------------------------------------------------------------------- preflight


def test_clean_repo_passes(repo: GitRepo) -> None:
    repo.preflight()
    repo.preflight(in_place=True)


def test_empty_repository_refused(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "empty", first_commit=False)
    write(root, "untracked.txt", "x")
    msg = refuse(GitRepo(root), "no commits yet; make a first commit", allow_dirty=True)
    assert "git commit" in msg


def test_dirty_tracked_file_refused(repo: GitRepo) -> None:
    write(repo.root, "README.md", "changed\n")
    msg = refuse(repo, "uncommitted")
    assert "README.md" in msg
    assert "--allow-dirty" in msg
    assert "stash" in msg


def test_staged_file_refused(repo: GitRepo) -> None:
    write(repo.root, "new.py", "x = 1\n")
    git(repo.root, "add", "new.py")
    assert "new.py" in refuse(repo, "uncommitted")


def test_untracked_files_listed_and_capped(repo: GitRepo) -> None:
    for i in range(25):
        write(repo.root, f"u{i:02d}.txt", "x")
    write(repo.root, "dir/inner.txt", "x")
    msg = refuse(repo, "26 uncommitted paths")
    assert "u00.txt" in msg
    assert "… and 6 more" in msg
    assert msg.count("\n  ") == 21  # 20 paths + the "and N more" line


def test_ignored_files_never_count(repo: GitRepo) -> None:
    commit_file(repo.root, ".gitignore", "*.log\nbuild/\n", "ignore")
    write(repo.root, "debug.log", "x")
    write(repo.root, "build/out.bin", "x")
    info = repo.root / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "exclude").write_text("secret.txt\n")
    write(repo.root, "secret.txt", "x")
    repo.preflight()
    assert repo.is_dirty_paths() == []
    assert repo.status_short() == ""


def test_allow_dirty_passes(repo: GitRepo) -> None:
    write(repo.root, "README.md", "changed\n")
    write(repo.root, "new.txt", "x")
    repo.preflight(allow_dirty=True)
    repo.preflight(allow_dirty=True, in_place=True)


def test_merge_in_progress_refused(repo: GitRepo) -> None:
    conflict_branches(repo.root)
    git(repo.root, "merge", "other", check=False)
    msg = refuse(repo, "a merge is in progress", allow_dirty=True)
    assert "git merge --abort" in msg


def test_unmerged_paths_refused_and_listed(repo: GitRepo) -> None:
    commit_file(repo.root, "a.txt", "1\n", "a1")
    write(repo.root, "a.txt", "2\n")
    git(repo.root, "stash", "-q")
    commit_file(repo.root, "a.txt", "3\n", "a3")
    git(repo.root, "stash", "pop", check=False)  # conflicts without MERGE_HEAD
    assert not (repo.root / ".git" / "MERGE_HEAD").exists()
    msg = refuse(repo, "unmerged paths", allow_dirty=True)
    assert "a.txt" in msg


def test_rebase_in_progress_refused(repo: GitRepo) -> None:
    conflict_branches(repo.root)
    git(repo.root, "switch", "-q", "other")
    git(repo.root, "rebase", "main", check=False)
    msg = refuse(repo, "a rebase is in progress", allow_dirty=True)
    assert "git rebase --abort" in msg
    assert "git rebase --continue" in msg


def test_cherry_pick_in_progress_refused(repo: GitRepo) -> None:
    conflict_branches(repo.root)
    git(repo.root, "cherry-pick", "other", check=False)
    msg = refuse(repo, "a cherry-pick is in progress", allow_dirty=True)
    assert "git cherry-pick --abort" in msg


def test_revert_in_progress_refused(repo: GitRepo) -> None:
    commit_file(repo.root, "r.txt", "1\n", "r1")
    commit_file(repo.root, "r.txt", "2\n", "r2")
    git(repo.root, "revert", "--no-edit", "HEAD~1", check=False)
    assert "git revert --abort" in refuse(repo, "a revert is in progress", allow_dirty=True)


def test_bisect_in_progress_refused(repo: GitRepo) -> None:
    git(repo.root, "bisect", "start")
    assert "git bisect reset" in refuse(repo, "a bisect is in progress")


def test_detached_head(repo: GitRepo) -> None:
    commit_file(repo.root, "b.txt", "b\n", "second")
    git(repo.root, "switch", "-q", "--detach", "HEAD~1")
    assert repo.current_branch() is None
    msg = refuse(repo, "HEAD is detached", in_place=True)
    assert "--in-place" in msg
    repo.preflight()  # a new relay branch can start from a detached HEAD


# --------------------------------------------------------------------------- exclude


def test_exclude_idempotent_and_effective(repo: GitRepo) -> None:
    exclude = repo.root / ".git" / "info" / "exclude"
    if exclude.exists():
        exclude.write_text("# no trailing newline")
    write(repo.root, ".relay/state/relay.db", "x")
    assert repo.is_dirty_paths() == [".relay/"]
    repo.exclude(".relay/state/")
    repo.exclude(".relay/state/")
    lines = exclude.read_text().splitlines()
    assert lines.count(".relay/state/") == 1
    assert repo.is_dirty_paths() == []
    repo.preflight()
    write(repo.root, ".relay/progress.md", "p")  # only the state dir is excluded
    assert repo.is_dirty_paths() == [".relay/"]  # an untracked directory is one entry
    assert repo.changed_paths("HEAD") == [".relay/progress.md"]


def test_exclude_creates_missing_info_dir(repo: GitRepo) -> None:
    info = repo.root / ".git" / "info"
    for p in info.glob("*"):
        p.unlink()
    info.rmdir()
    repo.exclude(".relay/state/")
    assert (info / "exclude").read_text() == ".relay/state/\n"


def test_worktree_uses_common_dir(repo: GitRepo, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(repo.root, "worktree", "add", "-q", "-b", "wtb", str(wt))
    other = GitRepo(wt)
    assert other.root == wt.resolve()
    assert other.current_branch() == "wtb"
    assert other.head_sha() == repo.head_sha()
    other.exclude(".relay/state/")
    assert ".relay/state/" in (repo.root / ".git" / "info" / "exclude").read_text()
    write(wt, ".relay/state/db", "x")
    other.preflight(in_place=True)
    write(wt, "w.txt", "w")
    sha = other.commit_all("in worktree")
    assert git(wt, "rev-parse", "HEAD").strip() == sha
    assert repo.current_branch() == "main"
    assert repo.is_dirty_paths() == []


# --------------------------------------------------------------------------- branches


def test_branches(repo: GitRepo) -> None:
    assert repo.current_branch() == "main"
    assert repo.branch_exists("main")
    assert not repo.branch_exists("relay/x")
    assert repo.unique_branch("relay/x") == "relay/x"
    git(repo.root, "branch", "relay/x")
    git(repo.root, "branch", "relay/x-2")
    assert repo.unique_branch("relay/x") == "relay/x-3"
    assert repo.branch_exists("relay/x")


def test_create_branch_carries_changes_and_checkout(repo: GitRepo) -> None:
    start = repo.head_sha()
    write(repo.root, "README.md", "dirty\n")
    repo.create_branch("relay/fix-login")
    assert repo.current_branch() == "relay/fix-login"
    assert repo.head_sha() == start
    assert repo.is_dirty_paths() == ["README.md"]
    with pytest.raises(RepoStateError, match="cannot create branch"):
        repo.create_branch("relay/fix-login")
    repo.checkout("main")
    assert repo.current_branch() == "main"
    with pytest.raises(RepoStateError, match="cannot check out"):
        repo.checkout("no-such-branch")


@pytest.mark.parametrize("name", ["bad..name", "-x", "a b", "x.lock", "@{-1}", "", "a~1", "q?"])
def test_create_branch_invalid_name(repo: GitRepo, name: str) -> None:
    git(repo.root, "switch", "-q", "-c", "prev")
    git(repo.root, "switch", "-q", "main")
    before = snapshot(repo.root)
    with pytest.raises(RepoStateError, match="not a valid git branch name"):
        repo.create_branch(name)
    assert snapshot(repo.root) == before


# --------------------------------------------------------------------------- commits


def test_commit_all_message_trailers_and_deletions(repo: GitRepo) -> None:
    commit_file(repo.root, "gone.txt", "bye\n", "add gone")
    commit_file(repo.root, ".gitignore", "*.log\n", "ignore logs")
    (repo.root / "gone.txt").unlink()
    write(repo.root, "README.md", "changed\n")
    write(repo.root, "dossier été/a b.txt", "new\n")
    write(repo.root, "debug.log", "ignored\n")
    sha = repo.commit_all(
        "relay: round 3: fixed the\nlogin form",
        body="# Handoff\n\nNext: write tests.",
        trailers={"Relay-Goal": "12", "Relay-Round": "3"},
    )
    assert sha == git(repo.root, "rev-parse", "HEAD").strip()
    message = git(repo.root, "log", "-1", "--format=%B")
    assert message.splitlines()[0] == "relay: round 3: fixed the login form"
    assert "# Handoff" in message
    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"],
        input=message,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert parsed.splitlines() == ["Relay-Goal: 12", "Relay-Round: 3"]
    assert repo.head_trailers() == {"Relay-Goal": "12", "Relay-Round": "3"}
    files = git(repo.root, "show", "--name-status", "--format=", "-z", "HEAD").split("\0")
    changes = dict(zip(files[1::2], files[0::2], strict=False))
    assert changes == {"README.md": "M", "dossier été/a b.txt": "A", "gone.txt": "D"}
    assert repo.is_dirty_paths() == []
    assert "debug.log" not in git(repo.root, "ls-files")
    # the configured identity is used
    assert git(repo.root, "log", "-1", "--format=%an <%ae> %cn").strip() == (
        "Test User <test@example.com> Test User"
    )


def test_commit_all_empty_commit(repo: GitRepo) -> None:
    before = repo.head_sha()
    sha = repo.commit_all("relay: round 1: nothing")
    assert sha != before
    assert git(repo.root, "rev-parse", "HEAD~1").strip() == before
    assert repo.head_trailers() == {}


def test_commit_all_without_any_user_config(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "anon", user=False, first_commit=False)
    write(root, "a.txt", "a\n")
    repo = GitRepo(root)
    sha = repo.commit_all("first", trailers={"Relay-Goal": "1"})
    assert git(root, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha).strip() == (
        "goal-relay <relay@localhost>|goal-relay <relay@localhost>"
    )
    assert not (tmp_path / "home" / ".gitconfig").exists()
    assert "user" not in git(root, "config", "--local", "--list")
    repo.commit_all("second", author_name="Bot", author_email="bot@example.org")
    assert git(root, "log", "-1", "--format=%an <%ae>").strip() == "Bot <bot@example.org>"


def test_commit_all_does_not_run_hooks(repo: GitRepo) -> None:
    hook = repo.root / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\ntouch hook-ran\nexit 1\n")
    hook.chmod(0o755)
    write(repo.root, "x.txt", "x")
    repo.commit_all("no hooks")
    assert not (repo.root / "hook-ran").exists()


# --------------------------------------------------------------------------- changes


def test_changed_paths_and_changes_since(repo: GitRepo) -> None:
    commit_file(repo.root, "old name.txt", "content that is long enough\n" * 5, "add")
    commit_file(repo.root, "keep.txt", "k\n", "keep")
    commit_file(repo.root, "del.txt", "d\n", "del")
    since = repo.head_sha()
    commit_file(repo.root, "committed.txt", "c\n", "after since")
    git(repo.root, "mv", "old name.txt", "new name.txt")
    write(repo.root, "keep.txt", "changed\n")
    (repo.root / "del.txt").unlink()
    write(repo.root, "dossier été/a b.txt", "untracked\n")
    write(repo.root, ".gitignore", "*.tmp\n")
    write(repo.root, "x.tmp", "ignored\n")
    assert repo.changes_since(since) == [
        ("A", ".gitignore"),
        ("A", "committed.txt"),
        ("D", "del.txt"),
        ("A", "dossier été/a b.txt"),
        ("M", "keep.txt"),
        ("A", "new name.txt"),
        ("D", "old name.txt"),
    ]
    assert repo.changed_paths(since) == [
        ".gitignore",
        "committed.txt",
        "del.txt",
        "dossier été/a b.txt",
        "keep.txt",
        "new name.txt",
        "old name.txt",
    ]
    assert repo.changed_paths("HEAD") == [
        ".gitignore",
        "del.txt",
        "dossier été/a b.txt",
        "keep.txt",
        "new name.txt",
        "old name.txt",
    ]
    with pytest.raises(RepoStateError, match="cannot compare"):
        repo.changed_paths("no-such-commit")


def test_dirty_paths_and_status_short_unicode(repo: GitRepo) -> None:
    assert repo.is_dirty_paths() == []
    assert repo.status_short() == ""
    write(repo.root, "café.txt", "x")
    write(repo.root, "README.md", "changed\n")
    assert sorted(repo.is_dirty_paths()) == ["README.md", "café.txt"]
    short = repo.status_short()
    assert " M README.md" in short
    assert "?? café.txt" in short  # core.quotepath off: no octal escapes
    assert not short.endswith("\n")


# --------------------------------------------------------------------------- history


def test_recent_commits(repo: GitRepo) -> None:
    commit_file(repo.root, "a.txt", "1\n2\n", "two lines")
    write(repo.root, "a.txt", "1\n")
    write(repo.root, "b.txt", "b\n")
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-q", "-m", "mixed")
    git(repo.root, "commit", "-q", "--allow-empty", "-m", "empty")
    commits = repo.recent_commits(3)
    assert [c.subject for c in commits] == ["empty", "mixed", "two lines"]
    assert all(isinstance(c, CommitSummary) for c in commits)
    assert commits[0].shortstat == ""
    assert commits[1].shortstat == "2 files changed, 1 insertion(+), 1 deletion(-)"
    assert commits[2].shortstat == "1 file changed, 2 insertions(+)"
    assert commits[0].sha == repo.head_sha()
    assert commits[0].short == commits[0].sha[:7]
    assert len(repo.recent_commits(100)) == 4
    assert repo.recent_commits(0) == []


def test_recent_commits_and_trailers_in_empty_repo(tmp_path: Path) -> None:
    repo = GitRepo(init_repo(tmp_path / "e", first_commit=False))
    assert repo.recent_commits(5) == []
    assert repo.head_trailers() == {}
    assert repo.current_branch() == "main"
    with pytest.raises(RepoStateError, match="no commits"):
        repo.head_sha()


def test_file_at(repo: GitRepo) -> None:
    first = repo.head_sha()
    commit_file(repo.root, "dossier été/a b.txt", "été\n", "unicode")
    assert repo.file_at("HEAD", "dossier été/a b.txt") == "été\n"
    assert repo.file_at(first, "dossier été/a b.txt") is None
    assert repo.file_at(first, "README.md") == "hello\n"
    assert repo.file_at("HEAD", "dossier été") is None  # a directory
    assert repo.file_at("no-such-commit", "README.md") is None


# --------------------------------------------------------------------------- push


def test_push(repo: GitRepo, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo.root, "remote", "add", "origin", str(remote))
    repo.create_branch("relay/p")
    repo.commit_all("one")
    repo.push("relay/p")
    assert git(remote, "rev-parse", "relay/p").strip() == repo.head_sha()
    # a diverged remote branch is never overwritten
    git(repo.root, "reset", "-q", "--hard", "HEAD~1")
    repo.commit_all("diverged")
    with pytest.raises(RepoStateError, match="push"):
        repo.push("relay/p")
    with pytest.raises(RepoStateError, match="push"):
        repo.push("relay/p", remote="nowhere")


# --------------------------------------------------------------------------- goal_slug


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fix the login form", "fix-the-login-form"),
        ("Réparer l'été à Zürich — vite!", "reparer-l-ete-a-zurich-vite"),
        ("Straße & Øresund", "strasse-oresund"),
        ("修复登录", "goal"),
        ("", "goal"),
        ("   ", "goal"),
        ("!!!---???", "goal"),
        ("  --Add   `relay status` command!!  ", "add-relay-status-command"),
        ("v2.0: release.lock", "v2-0-release-lock"),
    ],
)
def test_goal_slug(text: str, expected: str) -> None:
    assert goal_slug(text) == expected


def test_goal_slug_long() -> None:
    text = "Implement the complete authentication subsystem with OAuth and SAML support"
    slug = goal_slug(text)
    assert len(slug) <= 40
    assert slug == "implement-the-complete-authentication"
    assert goal_slug("a" * 100) == "a" * 40
    assert goal_slug("word " * 30, max_len=12) == "word-word"
    assert len(goal_slug("x" * 10, max_len=3)) == 3
    for s in [slug, goal_slug("a" * 100), goal_slug("Ünïcödé  ünicode")]:
        assert s == s.strip("-") and "--" not in s and s.isascii()


def test_head_sha_with_packed_refs(repo: GitRepo) -> None:
    sha = commit_file(repo.root, "p.txt", "p\n", "packed")
    git(repo.root, "pack-refs", "--all", "--prune")
    assert not (repo.root / ".git" / "refs" / "heads" / "main").exists()
    assert repo.head_sha() == sha
    assert repo.current_branch() == "main"
    assert repo.branch_exists("main")
    git(repo.root, "switch", "-q", "--detach")
    assert repo.head_sha() == sha


def test_recent_commits_after_relay_commits_match_a_fresh_git_log(root: Path) -> None:
    """relay reuses its log between rounds; what it shows must equal what git says."""
    repo = GitRepo(root)
    repo.recent_commits(3)
    write(root, "a.txt", "one\ntwo\n")
    repo.commit_all("relay: round 1: a", trailers={"Relay-Round": "1"})
    repo.commit_all("relay: round 2: nothing changed")
    assert repo.recent_commits(3) == GitRepo(root).recent_commits(3)
    assert repo.recent_commits(3)[1].shortstat == "1 file changed, 2 insertions(+)"


def test_recent_commits_see_commits_made_outside_relay(root: Path) -> None:
    repo = GitRepo(root)
    repo.recent_commits(2)
    commit_file(root, "b.txt", "b\n", "made by the agent's shell")
    assert repo.recent_commits(1)[0].subject == "made by the agent's shell"
