"""Path confinement of the file tools (SPEC §5): what the model can and cannot touch."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.models.base import ToolCall
from relay.tools import PathRefused, ToolContext, ToolResult, execute, resolve_path


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".relay" / "state").mkdir(parents=True)
    (root / ".relay" / "state" / "relay.db").write_text("db")
    (root / ".relay" / "progress.md").write_text("# Progress\nround 1\n")
    (root / "relay.yaml").write_text("model: scripted\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "outside.txt").write_text("secret outside\n")
    return root.resolve()


@pytest.fixture()
def ctx(repo: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(
        repo_root=repo,
        state_dir=repo / ".relay" / "state",
        run_dir=tmp_path / f"run-{tmp_path.name}",
        protected_paths=(".relay/progress.md", "relay.yaml", "tests/**", "*.lock", "docs"),
    )


def call(ctx: ToolContext, name: str, **arguments: object) -> ToolResult:
    return execute(ToolCall(id="c1", name=name, arguments=dict(arguments)), ctx)


def test_relative_and_absolute_paths_inside_the_repo_resolve(ctx: ToolContext, repo: Path) -> None:
    assert resolve_path(ctx, "src/app.py", for_write=False) == repo / "src" / "app.py"
    assert resolve_path(ctx, str(repo / "src" / "app.py"), for_write=True) == (
        repo / "src" / "app.py"
    )
    assert resolve_path(ctx, "./src/../src/new.py", for_write=True) == repo / "src" / "new.py"


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b"])
def test_empty_path_or_nul_byte_is_refused(ctx: ToolContext, bad: str) -> None:
    with pytest.raises(PathRefused):
        resolve_path(ctx, bad, for_write=False)
    result = call(ctx, "read_file", path=bad)
    assert result.is_error and "refused" in result.content


def test_dotdot_escape_is_refused_and_nothing_is_written(ctx: ToolContext, tmp_path: Path) -> None:
    result = call(ctx, "write_file", path="../escaped.txt", content="x")
    assert result.is_error
    assert "outside the repository" in result.content
    assert not (tmp_path / "escaped.txt").exists()
    result = call(ctx, "read_file", path="src/../../outside.txt")
    assert result.is_error and "secret" not in result.content


def test_absolute_path_outside_is_refused(ctx: ToolContext, tmp_path: Path) -> None:
    result = call(ctx, "read_file", path=str(tmp_path / "outside.txt"))
    assert result.is_error and "outside the repository" in result.content
    result = call(ctx, "write_file", path="/etc/relay-should-not-exist", content="x")
    assert result.is_error
    assert not Path("/etc/relay-should-not-exist").exists()


def test_symlink_pointing_outside_is_refused_for_read_and_write(
    ctx: ToolContext, repo: Path, tmp_path: Path
) -> None:
    (repo / "link.txt").symlink_to(tmp_path / "outside.txt")
    (repo / "linkdir").symlink_to(tmp_path)
    read = call(ctx, "read_file", path="link.txt")
    assert read.is_error and "through a symlink" in read.content
    assert "secret" not in read.content
    write = call(ctx, "write_file", path="link.txt", content="overwritten")
    assert write.is_error
    assert (tmp_path / "outside.txt").read_text() == "secret outside\n"
    nested = call(ctx, "write_file", path="linkdir/new.txt", content="x")
    assert nested.is_error and not (tmp_path / "new.txt").exists()
    edit = call(ctx, "edit_file", path="link.txt", old="secret", new="public")
    assert edit.is_error
    assert (tmp_path / "outside.txt").read_text() == "secret outside\n"


def test_dangling_symlink_pointing_outside_is_refused(
    ctx: ToolContext, repo: Path, tmp_path: Path
) -> None:
    target = tmp_path / "not-yet" / "created.txt"
    (repo / "dangling").symlink_to(target)
    result = call(ctx, "write_file", path="dangling", content="x")
    assert result.is_error and "outside the repository" in result.content
    assert not target.exists() and not target.parent.exists()


def test_symlink_inside_the_repo_is_followed(ctx: ToolContext, repo: Path) -> None:
    (repo / "alias.py").symlink_to(repo / "src" / "app.py")
    result = call(ctx, "read_file", path="alias.py")
    assert not result.is_error and result.content == "print('hi')\n"


def test_git_dir_is_refused_for_read_and_write(ctx: ToolContext, repo: Path) -> None:
    write = call(ctx, "write_file", path=".git/config", content="[evil]\n")
    assert write.is_error and ".git" in write.content
    assert (repo / ".git" / "config").read_text() == "[core]\n"
    read = call(ctx, "read_file", path=".git/config")
    assert read.is_error
    (repo / "gitlink").symlink_to(repo / ".git")
    assert call(ctx, "write_file", path="gitlink/hooks/pre-commit", content="x").is_error
    assert not (repo / ".git" / "hooks").exists()
    assert call(ctx, "write_file", path="sub/.git/config", content="x").is_error


def test_state_dir_is_refused(ctx: ToolContext, repo: Path) -> None:
    read = call(ctx, "read_file", path=".relay/state/relay.db")
    assert read.is_error and "state directory" in read.content
    write = call(ctx, "write_file", path=".relay/state/relay.db", content="gone")
    assert write.is_error
    assert (repo / ".relay" / "state" / "relay.db").read_text() == "db"


def test_state_dir_outside_the_repo_is_refused_too(repo: Path, tmp_path: Path) -> None:
    ctx = ToolContext(
        repo_root=repo, state_dir=repo / "var", run_dir=tmp_path / f"run-{tmp_path.name}"
    )
    with pytest.raises(PathRefused, match="state directory"):
        resolve_path(ctx, "var/x", for_write=False)


def test_protected_file_cannot_be_written_but_can_be_read(ctx: ToolContext, repo: Path) -> None:
    write = call(ctx, "write_file", path=".relay/progress.md", content="ALL DONE")
    assert write.is_error and "protected" in write.content
    assert (repo / ".relay" / "progress.md").read_text() == "# Progress\nround 1\n"
    edit = call(ctx, "edit_file", path="relay.yaml", old="scripted", new="other")
    assert edit.is_error and "protected" in edit.content
    assert (repo / "relay.yaml").read_text() == "model: scripted\n"
    read = call(ctx, "read_file", path=".relay/progress.md")
    assert not read.is_error and "round 1" in read.content


def test_protected_file_reached_through_a_symlink_or_odd_spelling(
    ctx: ToolContext, repo: Path
) -> None:
    (repo / "p.md").symlink_to(repo / ".relay" / "progress.md")
    assert call(ctx, "write_file", path="p.md", content="ALL DONE").is_error
    assert call(ctx, "write_file", path="./src/../relay.yaml", content="x").is_error
    assert call(ctx, "write_file", path=str(repo / "relay.yaml"), content="x").is_error
    assert (repo / "relay.yaml").read_text() == "model: scripted\n"


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("tests/test_a.py", True),
        ("tests/unit/deep/test_b.py", True),
        ("poetry.lock", True),
        ("sub/uv.lock", True),
        ("docs", True),
        ("docs/index.md", True),
        ("documents/x.md", False),
        ("src/tests.py", False),
        ("testsuite/x.py", False),
    ],
)
def test_glob_and_folder_protection(ctx: ToolContext, path: str, refused: bool) -> None:
    result = call(ctx, "write_file", path=path, content="x")
    assert result.is_error is refused, result.content
