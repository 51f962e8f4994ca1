"""Issue 28, items 5 and 7: a start that cannot work is refused before any change (SPEC §11,
§12): a base URL without ``http://``/``https://`` or a host, a provider that cannot be reached,
a goal too large for ``context.max_tokens``. The message names the value and what is allowed;
no branch, commit or goal is left behind, also when a step after the branch fails."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, flat, git, respond, state_dir, tree_snapshot

from relay.errors import StoreError
from relay.statedir import store_path
from relay.testing import FakeProvider

RunRelay = Callable[..., tuple[int, str, str]]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _refused(run_relay: RunRelay, repo: Path, *args: str | Path) -> str:
    """The stderr of a ``relay run`` that must exit 1 and change nothing."""
    before = tree_snapshot(repo)
    code, _, err = run_relay(["run", "Do the task.", "--repo", repo, *args])
    assert code == 1, err
    assert "Traceback" not in err
    assert tree_snapshot(repo) == before
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert not store_path(state_dir(repo)).exists()  # no goal recorded
    return flat(err)


# ----------------------------------------------------------------- item 7: the base URL


@pytest.mark.parametrize("url", ["localhost:1234", "127.0.0.1:8080/v1", "ftp://h/v1", "http://"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_base_url_without_scheme_or_host_is_refused_naming_it(
    make_repo: Callable[..., Path],
    run_relay: RunRelay,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    provider: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    repo = make_repo()
    err = _refused(run_relay, repo, "--model", f"{provider}:m", "--base-url", url)
    assert "base_url" in err and repr(url) in err
    assert "http://" in err and "https://" in err and "host" in err


def test_a_base_url_in_relay_yaml_is_checked_too(
    make_repo: Callable[..., Path], run_relay: RunRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    repo = make_repo(config={"model": "openai:m", "base_url": "localhost:11434/v1"})
    err = _refused(run_relay, repo)
    assert "base_url" in err and "'localhost:11434/v1'" in err and "http://" in err


def test_an_unreachable_provider_is_refused_before_the_branch(
    make_repo: Callable[..., Path], run_relay: RunRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    repo = make_repo()
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    err = _refused(run_relay, repo, "--model", "openai:m", "--base-url", url)
    assert url in err and "cannot reach" in err


def test_a_reachable_provider_still_runs(
    make_repo: Callable[..., Path], run_relay: RunRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    repo = make_repo()
    write = respond(call("write_file", path="notes.txt", content="hello\n"))
    with FakeProvider({"responses": [write, complete()]}) as fake:
        args = ["run", "Do it.", "--repo", repo, "--model", "openai:m", "--base-url"]
        code, _, err = run_relay([*args, fake.openai_url])
    assert code == 0, err


def test_a_failure_after_the_branch_leaves_no_branch(
    make_repo: Callable[..., Path],
    write_script: Callable[..., Path],
    run_relay: RunRelay,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from relay.store import Store

    def broken(self: Store, **_: Any) -> None:
        raise StoreError("the store cannot be written (disk full)")

    monkeypatch.setattr(Store, "create_goal", broken)
    repo = make_repo()
    script = write_script([complete()])
    before = tree_snapshot(repo)
    code, _, err = run_relay(["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 1 and "disk full" in err and "Traceback" not in err
    assert tree_snapshot(repo) == before
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


def test_a_failure_after_the_branch_keeps_the_users_uncommitted_changes(
    make_repo: Callable[..., Path],
    write_script: Callable[..., Path],
    run_relay: RunRelay,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from relay.store import Store

    def broken(self: Store, **_: Any) -> None:
        raise StoreError("the store cannot be written (disk full)")

    monkeypatch.setattr(Store, "create_goal", broken)
    repo = make_repo({"a.txt": "one\n"})
    (repo / "a.txt").write_text("two\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    status = git(repo, "status", "--porcelain")  # staged.txt staged, the others not
    script = write_script([complete()])
    head = git(repo, "rev-parse", "HEAD")
    args = ["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}", "--allow-dirty"]
    code, _, err = run_relay(args)
    assert code == 1 and "disk full" in err
    assert git(repo, "status", "--porcelain") == status  # what was staged is staged again
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / "a.txt").read_text() == "two\n" and (repo / "new.txt").read_text() == "new\n"


# ----------------------------------------------------- item 5: a goal over context.max_tokens


def test_a_goal_file_over_context_max_tokens_is_refused(
    make_repo: Callable[..., Path],
    write_script: Callable[..., Path],
    run_relay: RunRelay,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)  # the estimate: characters / 4
    repo = make_repo()
    goal = tmp_path / "big-goal.md"
    goal.write_text("Make it work.\n" + "detail " * 350_000, encoding="utf-8")  # 2.4 MB
    script = write_script([complete()])
    before = tree_snapshot(repo)
    argv = ["run", "--goal-file", goal, "--repo", repo, "--model", f"scripted:{script}"]
    code, _, err = run_relay(argv)
    assert code == 1 and "Traceback" not in err
    msg = flat(err)
    assert "context.max_tokens = 150,000" in msg
    assert "612,50" in msg  # the goal's own estimate: 2,450,014 characters / 4
    assert "file" in msg and "raise" in msg
    assert tree_snapshot(repo) == before
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert not store_path(state_dir(repo)).exists()


def test_the_seed_counts_and_a_goal_that_fits_starts(
    make_repo: Callable[..., Path],
    write_script: Callable[..., Path],
    run_relay: RunRelay,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)  # the estimate: characters / 4
    repo = make_repo(config={"context": {"max_tokens": 6000}})
    script = write_script([complete()])
    base = ["--repo", repo, "--model", f"scripted:{script}"]
    code, _, err = run_relay(["run", "x" * 16_000, *base])  # 4000 tokens + the seed
    assert code == 1 and "context.max_tokens = 6,000" in flat(err)
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    code, _, err = run_relay(["run", "x" * 12_000, *base])  # 3000 tokens + about 2400
    assert "context.max_tokens" not in err
