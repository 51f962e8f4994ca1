"""relay's own git calls against a hostile model (SPEC §11, §14; issue 11).

Each test plays the model: it changes the repository's configuration, attributes or history
the way a ``shell`` command could when there is no sandbox, then lets relay's ``GitRepo`` work
and checks what a user would notice: the model's program never ran, relay's environment (with
the provider keys) never reached a git process, commits still work, and relay can put the
configuration and its history back.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git

from relay.errors import RepoStateError
from relay.gitrepo import GitRepo, new_driver_attributes
from relay.gitsafe import git_environment

#: The real git, for the tests' own git commands (never through the recording wrapper).
REAL_GIT = shutil.which("git") or "git"

FAKE_KEYS = {
    "OPENAI_API_KEY": "sk-fake-openai",
    "ANTHROPIC_API_KEY": "sk-ant-fake",
    "GEMINI_API_KEY": "fake-gemini",
}

# --------------------------------------------------------------------------- helpers


@pytest.fixture
def root(make_repo) -> Path:
    return make_repo({"a.txt": "one\n"})


@pytest.fixture
def repo(root: Path) -> Iterator[GitRepo]:
    r = GitRepo(root)
    yield r
    r.close()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_KEYS.items():
        monkeypatch.setenv(name, value)


class Trap:
    """A program the model plants: each run appends its arguments and environment to a log;
    as a filter it passes its input through."""

    def __init__(self, folder: Path, name: str = "trap", exit_code: int = 0) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / f"{name}.log"
        self.path = folder / f"{name}.sh"
        self.path.write_text(
            "#!/bin/sh\n"
            f'{{ echo "ran: $*"; env; }} >> "{self.log}"\n'
            'case "$1" in filter) cat ;; esac\n'
            f"exit {exit_code}\n"
        )
        self.path.chmod(0o755)

    def command(self, kind: str) -> str:
        return f"{self.path} {kind}"

    def runs(self) -> list[str]:
        if not self.log.exists():
            return []
        return [ln for ln in self.log.read_text().splitlines() if ln.startswith("ran: ")]


def make_stat_dirty(path: Path) -> None:
    """Same content, other mtime: git must hash the file again (and run its clean filter)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))


def relay_round(repo: GitRepo, root: Path, text: str = "changed\n") -> str:
    """What relay does around a round: look at the tree, commit everything, read the log."""
    (root / "a.txt").write_text(text)
    repo.preflight(allow_dirty=True)
    repo.status_short()
    repo.is_dirty_paths()
    sha = repo.commit_all("relay: round", trailers={"Relay-Round": "1"})
    repo.recent_commits(5)
    repo.changes_since(sha)
    repo.changes_since("HEAD~1")
    repo.head_trailers()
    repo.file_at("HEAD", "a.txt")
    return sha


@pytest.fixture
def git_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` first on PATH that records the arguments and environment of every git process
    relay starts, then runs the real git. Returns the folder of the records."""
    real = REAL_GIT
    folder = tmp_path / "git-calls"
    folder.mkdir()
    bindir = tmp_path / "wrapper-bin"
    bindir.mkdir()
    wrapper = bindir / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'f=$(mktemp "{folder}/call.XXXXXX")\n'
        'printf "%s\\n" "$*" > "$f"\n'
        'env >> "$f"\n'
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return folder


def plain_git(cwd: Path, *args: str) -> str:
    """The test's own git command, bypassing the recording wrapper (and the variables the
    tests plant in relay's environment)."""
    keep = ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in keep}
    done = subprocess.run(
        [REAL_GIT, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def recorded(folder: Path) -> list[tuple[str, dict[str, str]]]:
    calls = []
    for path in sorted(folder.iterdir()):
        first, *rest = path.read_text().splitlines()
        env = dict(line.split("=", 1) for line in rest if "=" in line)
        calls.append((first, env))
    return calls


# --------------------------------------------------------------------------- configuration


def test_fsmonitor_command_never_runs(root: Path, tmp_path: Path, keys: None) -> None:
    trap = Trap(tmp_path / "model")
    git(root, "config", "core.fsmonitor", trap.command("fsmonitor"))
    repo = GitRepo(root)
    relay_round(repo, root)
    assert trap.runs() == []
    assert git(root, "show", "HEAD:a.txt") == "changed\n"


def test_filter_driver_selected_by_gitattributes_never_runs(
    root: Path, tmp_path: Path, keys: None
) -> None:
    trap = Trap(tmp_path / "model")
    repo = GitRepo(root)
    repo.status_short()  # relay opened the repository before the model acted
    for key in ("clean", "smudge", "process"):
        git(root, "config", f"filter.x.{key}", trap.command("filter"))
    git(root, "config", "filter.x.required", "true")
    (root / ".gitattributes").write_text("* filter=x\n")
    sha = relay_round(repo, root, "raw bytes\n")
    make_stat_dirty(root / "a.txt")
    repo.status_short()
    repo.changes_since("HEAD~1")
    repo.create_branch("relay/other")
    (root / "a.txt").write_text("other branch\n")
    repo.commit_all("relay: other")
    repo.checkout("main")  # a checkout that rewrites a.txt: the smudge filter's turn
    assert trap.runs() == []
    assert git(root, "cat-file", "blob", f"{sha}:a.txt") == "raw bytes\n"
    assert (root / "a.txt").read_text() == "raw bytes\n"


def test_include_in_working_tree_added_later_never_runs(
    root: Path, tmp_path: Path, keys: None
) -> None:
    trap = Trap(tmp_path / "model")
    # The repository includes a file of the working tree that does not exist yet.
    git(root, "config", "include.path", "../team.gitconfig")
    repo = GitRepo(root)
    repo.status_short()  # relay has looked at the configuration: no driver anywhere
    (root / "team.gitconfig").write_text(f'[filter "y"]\n\tclean = {trap.command("filter")}\n')
    (root / ".gitattributes").write_text("*.txt filter=y\n")
    relay_round(repo, root)
    make_stat_dirty(root / "a.txt")
    repo.status_short()
    assert trap.runs() == []


def test_driver_of_the_global_config_never_runs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: None
) -> None:
    trap = Trap(tmp_path / "model")
    global_config = tmp_path / "global.gitconfig"
    global_config.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    repo = GitRepo(root)
    repo.status_short()  # relay opened the repository before the model acted
    global_config.write_text(
        f'[filter "g"]\n\tclean = {trap.command("filter")}\n\trequired = true\n'
        f'[diff "g"]\n\ttextconv = {trap.command("textconv")}\n'
    )
    (root / ".gitattributes").write_text("* filter=g diff=g\n")
    relay_round(repo, root)
    assert trap.runs() == []


def test_driver_configured_between_two_calls_never_runs(
    repo: GitRepo, root: Path, tmp_path: Path, keys: None
) -> None:
    trap = Trap(tmp_path / "model")
    (root / ".gitattributes").write_text("* filter=late\n")
    repo.commit_all("relay: attributes")
    git(root, "config", "filter.late.clean", trap.command("filter"))
    relay_round(repo, root)
    assert trap.runs() == []


def test_gpg_program_never_runs_and_commits_are_unsigned(
    repo: GitRepo, root: Path, tmp_path: Path, keys: None
) -> None:
    trap = Trap(tmp_path / "model")
    git(root, "config", "gpg.program", str(trap.path))
    git(root, "config", "commit.gpgsign", "true")
    sha = relay_round(repo, root)
    assert trap.runs() == []
    assert "gpgsig" not in git(root, "cat-file", "commit", sha)


def test_failing_gpg_program_does_not_break_commits(
    repo: GitRepo, root: Path, tmp_path: Path
) -> None:
    failing = Trap(tmp_path / "model", "failing-gpg", exit_code=1)
    git(root, "config", "gpg.program", str(failing.path))
    git(root, "config", "commit.gpgsign", "true")
    first = repo.commit_all("relay: round 1")
    (root / "a.txt").write_text("two\n")
    second = repo.commit_all("relay: round 2")
    assert git(root, "rev-parse", "HEAD~1").strip() == first
    assert git(root, "rev-parse", "HEAD").strip() == second
    assert failing.runs() == []


def test_textconv_and_external_diff_never_run(
    repo: GitRepo, root: Path, tmp_path: Path, keys: None
) -> None:
    trap = Trap(tmp_path / "model")
    git(root, "config", "diff.external", trap.command("external"))
    git(root, "config", "diff.t.textconv", trap.command("textconv"))
    git(root, "config", "diff.t.command", trap.command("command"))
    git(root, "config", "log.showSignature", "true")
    (root / ".gitattributes").write_text("* diff=t\n")
    relay_round(repo, root)
    relay_round(repo, root, "again\n")
    repo.recent_commits(10)
    assert trap.runs() == []


def test_pager_and_editor_never_run(
    repo: GitRepo, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trap = Trap(tmp_path / "model")
    git(root, "config", "core.pager", trap.command("pager"))
    git(root, "config", "core.editor", trap.command("editor"))
    for command in ("status", "log", "diff", "show", "branch"):
        git(root, "config", f"pager.{command}", "true")
    monkeypatch.setenv("GIT_PAGER", trap.command("git-pager"))
    monkeypatch.setenv("GIT_EDITOR", trap.command("git-editor"))
    relay_round(repo, root)
    repo.unique_branch("main")
    assert trap.runs() == []


def test_submodule_configuration_never_runs(
    make_repo, root: Path, tmp_path: Path, keys: None
) -> None:
    sub = make_repo({"s.txt": "sub\n"}, name="sub")
    git(root, "-c", "protocol.file.allow=always", "submodule", "-q", "add", str(sub), "sub")
    git(root, "commit", "-q", "-m", "add the submodule")
    trap = Trap(tmp_path / "model")
    checkout = root / "sub"
    git(checkout, "config", "filter.s.clean", trap.command("filter"))
    git(checkout, "config", "core.fsmonitor", trap.command("fsmonitor"))
    (checkout / ".gitattributes").write_text("* filter=s\n")
    make_stat_dirty(checkout / "s.txt")
    repo = GitRepo(root)
    repo.preflight(allow_dirty=True)
    repo.status_short()
    repo.changes_since("HEAD~1")
    relay_round(repo, root)
    assert trap.runs() == []
    # A commit made inside the submodule is still recorded by relay's next commit.
    git(
        checkout,
        "-c",
        "user.name=m",
        "-c",
        "user.email=m@x",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "on",
    )
    moved = git(checkout, "rev-parse", "HEAD").strip()
    trap.log.unlink()  # the trap caught the test's own git commit, not relay
    make_stat_dirty(checkout / "s.txt")
    sha = repo.commit_all("relay: round 2")
    assert git(root, "rev-parse", f"{sha}:sub").strip() == moved
    assert trap.runs() == []


def test_nested_repository_planted_in_the_tree_never_runs(
    repo: GitRepo, root: Path, tmp_path: Path, keys: None
) -> None:
    # Everything is in the working tree: the nested repository's config, its attributes.
    trap = Trap(tmp_path / "model")
    nested = root / "vendored"
    nested.mkdir()
    git(nested, "init", "-q", "-b", "main")
    (nested / "n.txt").write_text("nested\n")
    git(nested, "add", "n.txt")
    git(nested, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-q", "-m", "n")
    git(nested, "config", "filter.n.clean", trap.command("filter"))
    (nested / ".gitattributes").write_text("* filter=n\n")
    relay_round(repo, root)  # relay records the nested repository as a submodule entry
    assert git(root, "ls-files", "--stage", "vendored").startswith("160000 ")
    make_stat_dirty(nested / "n.txt")
    relay_round(repo, root, "round two\n")
    assert trap.runs() == []


# --------------------------------------------------------------------------- environment


def test_no_git_process_gets_provider_keys_or_redirections(
    root: Path, git_log: Path, keys: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    monkeypatch.setenv("GH_TOKEN", "gh-fake")
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "elsewhere.index"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor=/bin/false'")
    monkeypatch.setenv("GIT_TRACE", str(tmp_path / "trace.log"))
    repo = GitRepo(root)
    repo.preflight()
    repo.create_branch(repo.unique_branch("relay/goal"))
    first = relay_round(repo, root)
    second = relay_round(repo, root, "second\n")
    repo.branch_exists("main")
    assert repo.is_ancestor(first)
    assert repo.reachable_commits("relay/goal", [first, second]) == {first, second}
    plain_git(root, "reset", "-q", "--soft", "HEAD~1")
    repo.restore_branch("relay/goal", second)
    repo.restore_config(repo.config_snapshot())
    repo.close()

    calls = recorded(git_log)
    assert len(calls) > 10
    for command, env in calls:
        leaked = set(env) & {*FAKE_KEYS, "SSH_AUTH_SOCK", "GH_TOKEN"}
        assert not leaked, f"git {command} got {leaked}"
        assert not {"GIT_INDEX_FILE", "GIT_CONFIG_PARAMETERS", "GIT_TRACE"} & set(env), command
        assert env.get("HOME") == os.environ["HOME"]
        # gitpython's persistent cat-file would carry relay's environment; relay's own (the
        # secret scan of a commit, issue 27) is started hardened, like every git process
        assert "cat-file --batch" not in command or "--git-dir=" in command
    assert not (tmp_path / "elsewhere.index").exists()
    assert not (tmp_path / "trace.log").exists()


def test_push_keeps_agent_and_forge_token_but_never_provider_keys(
    root: Path, git_log: Path, keys: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    plain_git(tmp_path, "init", "-q", "--bare", str(remote))
    plain_git(root, "remote", "add", "origin", str(remote))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    monkeypatch.setenv("GH_TOKEN", "gh-fake")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-fake")
    repo = GitRepo(root)
    sha = repo.commit_all("relay: round 1")
    repo.push("main")
    assert plain_git(remote, "rev-parse", "refs/heads/main").strip() == sha

    calls = recorded(git_log)
    pushes = [env for command, env in calls if " push " in f" {command} "]
    assert len(pushes) == 1
    assert pushes[0]["SSH_AUTH_SOCK"] == str(tmp_path / "agent.sock")
    assert pushes[0]["GH_TOKEN"] == "gh-fake"
    assert not set(pushes[0]) & {*FAKE_KEYS, "AWS_SECRET_ACCESS_KEY"}
    others = [env for command, env in calls if " push " not in f" {command} "]
    assert others and all("SSH_AUTH_SOCK" not in env for env in others)


def test_git_environment_rules() -> None:
    source = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "OPENAI_API_KEY": "x",
        "AWS_ACCESS_KEY_ID": "x",
        "MY_SECRET": "x",
        "SSH_AUTH_SOCK": "/s",
        "GITHUB_TOKEN": "t",
        "GIT_DIR": "/elsewhere",
        "GIT_EXEC_PATH": "/evil",
        "GIT_SSH_COMMAND": "ssh -i k",
        "GIT_AUTHOR_NAME": "Me",
        "GIT_CONFIG_GLOBAL": "/g",
        "GIT_CONFIG_COUNT": "1",
    }
    local = git_environment(environ=source)
    assert set(local) == {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "GIT_AUTHOR_NAME",
        "GIT_CONFIG_GLOBAL",
        "GIT_TERMINAL_PROMPT",
        "GIT_NO_REPLACE_OBJECTS",  # `git replace` and grafts cannot make a diff lie
        "GIT_GRAFT_FILE",
    }
    assert local["GIT_NO_REPLACE_OBJECTS"] == "1" and local["GIT_GRAFT_FILE"] == os.devnull
    network = git_environment(network=True, environ=source)
    assert set(network) - set(local) == {
        "MY_SECRET",
        "SSH_AUTH_SOCK",
        "GITHUB_TOKEN",
        "GIT_SSH_COMMAND",
    }


# --------------------------------------------------------------------------- config snapshot


def test_config_restore_puts_back_every_changed_file(repo: GitRepo, root: Path) -> None:
    gitdir = root / ".git"
    before = (gitdir / "config").read_bytes()
    snapshot = repo.config_snapshot()
    assert repo.restore_config(snapshot) == []

    git(root, "config", "core.fsmonitor", "/tmp/evil")
    (gitdir / "config.worktree").write_text('[filter "x"]\n\tclean = evil\n')
    (gitdir / "info").mkdir(exist_ok=True)
    (gitdir / "info" / "attributes").write_text("* filter=x\n")
    restored = repo.restore_config(snapshot)

    assert restored == [".git/config", ".git/config.worktree", ".git/info/attributes"]
    assert (gitdir / "config").read_bytes() == before
    assert not (gitdir / "config.worktree").exists()
    assert not (gitdir / "info" / "attributes").exists()
    assert repo.restore_config(snapshot) == []


def test_config_restore_replaces_a_symlink_and_leaves_its_target(
    repo: GitRepo, root: Path, tmp_path: Path
) -> None:
    config = root / ".git" / "config"
    before = config.read_bytes()
    snapshot = repo.config_snapshot()
    outside = tmp_path / "outside.cfg"
    outside.write_text("[core]\n\tfsmonitor = /tmp/evil\n")
    config.unlink()
    config.symlink_to(outside)

    assert repo.restore_config(snapshot) == [".git/config"]
    assert not config.is_symlink()
    assert config.read_bytes() == before
    assert outside.read_text() == "[core]\n\tfsmonitor = /tmp/evil\n"


def test_config_restore_breaks_hard_links(repo: GitRepo, root: Path, tmp_path: Path) -> None:
    config = root / ".git" / "config"
    before = config.read_bytes()
    snapshot = repo.config_snapshot()
    # The model keeps a hard link to the real file, to write the configuration later on.
    handle = tmp_path / "handle"
    os.link(config, handle)
    assert repo.restore_config(snapshot) == [".git/config"]
    assert config.read_bytes() == before
    assert config.stat().st_ino != handle.stat().st_ino

    # ... or swaps the file for a hard link to a file outside.
    outside = tmp_path / "outside.cfg"
    outside.write_text("[core]\n\tpager = evil\n")
    config.unlink()
    os.link(outside, config)
    assert repo.restore_config(snapshot) == [".git/config"]
    assert config.read_bytes() == before
    assert outside.read_text() == "[core]\n\tpager = evil\n"
    assert handle.read_bytes() == before


def test_config_restore_keeps_permissions_and_recreates_info(repo: GitRepo, root: Path) -> None:
    info = root / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text("*.bin binary\n")
    (info / "attributes").chmod(0o600)
    snapshot = repo.config_snapshot()
    shutil.rmtree(info)
    info.symlink_to(root)  # info/ now points into the working tree
    assert repo.restore_config(snapshot) == [".git/info/attributes"]
    assert not info.is_symlink()
    assert (info / "attributes").read_text() == "*.bin binary\n"
    assert stat.S_IMODE((info / "attributes").stat().st_mode) == 0o600
    assert not (root / "attributes").exists()


def test_new_driver_attributes() -> None:
    before = "*.png filter=lfs diff=lfs -text\n*.md text\n"
    after = (
        "# moved and re-spaced lines are not new\n"
        "*.md   text\n"
        "*.png filter=lfs   diff=lfs -text\n"
        "*.py filter=evil\n"
        "*.sh -diff\n"
        '"a b.txt" diff=x\n'
        '"has filter=x in it.txt" text\n'
        "*.png merge=ours\n"
        "[attr]sneaky filter=evil\n"
        "* sneaky\n"
        "*.c !filter -merge\n"
    )
    assert new_driver_attributes(before, after) == [
        (4, "*.py filter=evil"),
        (6, '"a b.txt" diff=x'),
        (8, "*.png merge=ours"),
        (9, "[attr]sneaky filter=evil"),
        (10, "* sneaky"),
    ]
    assert new_driver_attributes(None, "* filter=x\r\n") == [(1, "* filter=x")]
    assert new_driver_attributes(before, before) == []
    assert new_driver_attributes(before, None) == []


# --------------------------------------------------------------------------- history


def relay_commits(repo: GitRepo, root: Path, count: int) -> list[str]:
    shas = []
    for n in range(1, count + 1):
        (root / f"round{n}.txt").write_text(f"round {n}\n")
        shas.append(repo.commit_all(f"relay: round {n}"))
    return shas


def test_restore_branch_after_reset_hard_keeps_the_files(repo: GitRepo, root: Path) -> None:
    repo.create_branch("relay/goal")
    shas = relay_commits(repo, root, 3)
    git(root, "reset", "-q", "--hard", "HEAD~2")
    (root / "model.txt").write_text("the model's work\n")
    files_before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    assert not repo.is_ancestor(shas[-1])

    repo.restore_branch("relay/goal", shas[-1])

    assert git(root, "rev-parse", "relay/goal").strip() == shas[-1]
    assert repo.current_branch() == "relay/goal"
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == files_before
    new = repo.commit_all("relay: round 4")
    assert git(root, "rev-parse", f"{new}~1").strip() == shas[-1]
    tree = git(root, "ls-tree", "--name-only", new).split()
    assert "model.txt" in tree and "round2.txt" not in tree  # the model's deletions recorded
    assert repo.reachable_commits("relay/goal", [*shas, new]) == {*shas, new}
    assert [c.sha for c in repo.recent_commits(4)] == [new, *reversed(shas)]


def test_restore_branch_after_amend_keeps_the_files(repo: GitRepo, root: Path) -> None:
    repo.create_branch("relay/goal")
    shas = relay_commits(repo, root, 2)
    (root / "round2.txt").write_text("rewritten by the model\n")
    git(root, "commit", "-q", "-a", "--amend", "-m", "nothing to see")
    amended = git(root, "rev-parse", "HEAD").strip()
    assert repo.reachable_commits("relay/goal", [*shas, amended]) == {shas[0], amended}

    repo.restore_branch("relay/goal", shas[-1])

    assert git(root, "rev-parse", "HEAD").strip() == shas[-1]
    assert (root / "round2.txt").read_text() == "rewritten by the model\n"
    assert repo.is_dirty_paths() == ["round2.txt"]
    new = repo.commit_all("relay: round 3")
    assert git(root, "show", f"{new}:round2.txt") == "rewritten by the model\n"
    assert repo.reachable_commits("relay/goal", [*shas, amended]) == set(shas)


def test_restore_branch_after_a_switch_and_a_stopped_rebase(repo: GitRepo, root: Path) -> None:
    repo.create_branch("relay/goal")
    shas = relay_commits(repo, root, 3)
    env = {**os.environ, "GIT_SEQUENCE_EDITOR": "sed -i 1s/^pick/edit/"}
    subprocess.run(
        ["git", "rebase", "-q", "-i", "HEAD~2"], cwd=root, env=env, check=True, capture_output=True
    )
    assert (root / ".git" / "rebase-merge").is_dir()
    repo.restore_branch("relay/goal", shas[-1])
    assert not (root / ".git" / "rebase-merge").exists()
    assert repo.current_branch() == "relay/goal"
    assert repo.is_dirty_paths() == ["round3.txt"]  # the files are those of the stopped rebase
    repo.preflight(allow_dirty=True)

    git(root, "switch", "-q", "--detach", "HEAD~1")
    (root / "round1.txt").write_text("edited while detached\n")
    repo.restore_branch("relay/goal", shas[-1])
    assert repo.current_branch() == "relay/goal"
    assert git(root, "rev-parse", "HEAD").strip() == shas[-1]
    assert repo.is_dirty_paths() == ["round1.txt", "round3.txt"]
    repo.restore_branch("relay/goal", shas[-1])  # nothing left to do


def test_restore_branch_refusals(repo: GitRepo, root: Path) -> None:
    repo.create_branch("relay/goal")
    (sha,) = relay_commits(repo, root, 1)
    with pytest.raises(RepoStateError, match="no longer exists"):
        repo.restore_branch("relay/goal", "0" * 40)
    with pytest.raises(RepoStateError, match="not a full sha"):
        repo.restore_branch("relay/goal", sha[:7])
    with pytest.raises(RepoStateError, match="not a valid git branch name"):
        repo.restore_branch("bad..name", sha)
    git(root, "update-ref", "refs/heads/relay/goal", f"{sha}~1")
    (root / ".git" / "index.lock").write_text("")  # left behind by a killed git of the model
    with pytest.raises(RepoStateError, match="cannot restore the branch relay/goal"):
        repo.restore_branch("relay/goal", sha)


def test_is_ancestor_and_reachable_commits(repo: GitRepo, root: Path) -> None:
    base = repo.head_sha()
    shas = relay_commits(repo, root, 2)
    assert repo.is_ancestor(base)
    assert repo.is_ancestor(shas[0], shas[1])
    assert not repo.is_ancestor(shas[1], shas[0])
    with pytest.raises(RepoStateError, match="cannot tell"):
        repo.is_ancestor("f" * 40)
    assert repo.reachable_commits("main", [base, *shas, "nonsense", shas[0][:7]]) == {
        base,
        *shas,
    }
    assert repo.reachable_commits("main", [s.upper() for s in shas]) == set(shas)
    assert repo.reachable_commits("no-such-branch", shas) == set()
    assert repo.reachable_commits("main", []) == set()


# --------------------------------------------------------------------------- worktrees


def test_a_batch_attempts_clone_runs_no_hook_and_no_filter(
    repo: GitRepo, root: Path, tmp_path: Path, keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch attempt clones the goal's remote and checks its branch out (issue 17): no hook
    runs, neither the repository's own nor one a hooksPath names, and no filter of the
    repository's configuration touches the files."""
    from relay.batch.attempt import _git

    trap = Trap(tmp_path / "model")
    (root / ".gitattributes").write_text("*.txt filter=w\n")
    (root / "a.txt").write_text("stored as is\n")
    repo.commit_all("relay: attributes")
    git(root, "config", "filter.w.smudge", trap.command("filter"))
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    shutil.copy(trap.path, hooks / "post-checkout")
    global_config = tmp_path / "gitconfig"
    global_config.write_text(f"[core]\n\thooksPath = {hooks}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))

    folder = tmp_path / "attempt"
    folder.mkdir()
    _git(["clone", "--quiet", "--no-checkout", "--", str(root), str(folder / "repo")], folder)
    _git(["checkout", "--quiet", "--detach", "origin/main"], folder / "repo")
    assert (folder / "repo" / "a.txt").read_text() == "stored as is\n"
    assert trap.runs() == []


def test_add_worktree_on_a_new_branch_and_shortstat(
    repo: GitRepo, root: Path, tmp_path: Path
) -> None:
    base = repo.head_sha()
    tree = tmp_path / "wt"
    repo.add_worktree(tree, base, branch="relay/variant")
    other = GitRepo(tree)
    assert other.current_branch() == "relay/variant"
    (tree / "a.txt").write_text("one\ntwo\n")
    (tree / "skip.md").write_text("left out\n")
    sha = other.commit_all("relay: variant")
    other.close()
    assert repo.shortstat(base, sha, ["skip.md"]) == "1 file changed, 1 insertion(+)"
    assert repo.shortstat(base, base) == ""
    with pytest.raises(RepoStateError, match="branch"):
        repo.add_worktree(tmp_path / "wt2", base, branch="relay/variant")


def test_the_users_own_filter_still_applies_to_relays_commits(root: Path) -> None:
    """A filter configured before relay opened the repository (git-crypt, Git LFS) is the
    user's: relay's commits store what it makes of the file, never the plain working-tree bytes."""
    git(root, "config", "filter.enc.clean", "tr a-z A-Z")
    git(root, "config", "filter.enc.smudge", "cat")
    git(root, "config", "filter.enc.required", "true")
    (root / ".gitattributes").write_text("*.secret filter=enc\n")
    repo = GitRepo(root)
    (root / "x.secret").write_text("plaintext password\n")
    repo.commit_all("relay: round 1")
    assert git(root, "show", "HEAD:x.secret") == "PLAINTEXT PASSWORD\n"
    repo.close()


def test_the_users_own_index_flags_are_kept(root: Path) -> None:
    """A sparse checkout or the user's ``assume-unchanged`` files are the user's: only flags
    set after the round started (by the model) are cleared."""
    from relay.repo_guard import RepoGuard

    (root / "mine.txt").write_text("local settings\n")
    (root / "theirs.txt").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "two files")
    git(root, "update-index", "--skip-worktree", "mine.txt")
    repo = GitRepo(root)
    guard = RepoGuard(repo, "main")
    guard.start_round(repo.head_sha())
    git(root, "update-index", "--assume-unchanged", "theirs.txt")
    repair = guard.after_command()
    assert any("theirs.txt" in f for f in repair.findings)
    flags = git(root, "ls-files", "-v")
    assert "S mine.txt" in flags and "H theirs.txt" in flags
    repo.close()


def test_builtin_drivers_in_gitattributes_are_no_finding() -> None:
    from relay.gitsnapshot import new_driver_attributes

    text = "*.py diff=python\n*.pbxproj merge=union\n*.bin filter=evil\n"
    assert new_driver_attributes(None, text) == [(3, "*.bin filter=evil")]
