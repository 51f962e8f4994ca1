"""One glob meaning everywhere (issue 13, item 13): a deliverable's ``changed:``, the file tools'
protected paths, the sandbox's read-only mounts and the undo of a shell command's change all
match repository paths with gitignore's wildmatch rules (relay.globs; docs/audit.md "Globs")."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay import protect
from relay.audit import check_changed
from relay.errors import ConfigError
from relay.globs import check_glob, existing_matches, first_match, glob_match
from relay.models.base import ToolCall
from relay.sandbox.mounts import protected_targets
from relay.tools import ToolContext, execute
from relay.tools.paths import protected_entry

# --------------------------------------------------------------------------- changed: globs


@pytest.mark.parametrize(
    ("pattern", "path", "met"),
    [
        ("**/test_*.py", "test_x.py", True),  # the issue: a new test at the root
        ("**/test_*.py", "tests/unit/test_x.py", True),
        ("src/*.py", "src/sub/x.py", False),  # the issue: * does not cross a folder
        ("src/*.py", "src/x.py", True),
        ("*.lock", "a/b.lock", True),  # no slash: any depth
        ("src/**", "src/sub/deep/x.py", True),
        ("src/**", "other/src/x.py", False),
        ("src/", "src/x.py", True),  # a folder named plainly
        ("src", "src/x.py", True),
        ("README.md", "docs/README.md", False),  # a plain path is the root's path
        ("/README.md", "README.md", True),
        ("docs/*/index.md", "docs/a/b/index.md", False),
        ("docs/**/index.md", "docs/index.md", True),
        ("!important.txt", "!important.txt", True),  # one entry is one pattern: no negation
        ("#notes.md", "#notes.md", True),  # ... and no comment
        ("a\\*b", "a*b", True),  # backslash escapes
        ("a\\*b", "axb", False),
    ],
)
def test_changed_deliverable_uses_gitignore_globs(pattern: str, path: str, met: bool) -> None:
    check = check_changed(pattern, [path])
    assert check.passed is met, check.evidence
    assert (path in check.evidence) if met else (f"nothing matching {pattern}" in check.evidence)


def test_a_bad_glob_names_the_entry_and_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        check_glob("src\\", "deliverable 2 (changed)")
    message = str(caught.value)
    assert "deliverable 2 (changed)" in message and "'src\\'" in message
    assert "not a valid glob" in message and "\\[" in message
    check_glob("src/**", "x")  # no error
    assert glob_match("tests\\", "tests\\") and not glob_match("tests/x", "tests\\")


def test_absolute_entries_inside_the_repository_are_relative(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    assert glob_match("src/x.py", f"{root}/src/*.py", root)
    assert not glob_match("src/sub/x.py", f"{root}/src/*.py", root)
    assert glob_match("tests/a.py", f"{root}/tests", root)
    assert first_match("a/b.lock", ["relay.yaml", "*.lock"], root) == "*.lock"


# --------------------------------------------------------------------------- protected paths


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    files = [
        "relay.yaml",
        "sub/relay.yaml",
        "src/x.py",
        "src/sub/x.py",
        "a/b.lock",
        "tests/test_a.py",
        "tests/unit/test_b.py",
        "pkg/tests/test_c.py",
        "build1/out.txt",
        "build2",
        "test_root.py",
        "docs/index.md",
        "docs/a/b/index.md",
        "goal[1].md",
    ]
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / ".git").mkdir()
    (root / ".git" / "x.lock").write_text("git's")
    return root


def _ctx(root: Path, entries: tuple[str, ...]) -> ToolContext:
    return ToolContext(
        repo_root=root, state_dir=root / ".relay" / "state", run_dir=root.parent / "run",
        protected_paths=entries,
    )  # fmt: skip


def test_the_file_tools_refuse_what_the_glob_matches_and_no_more(repo: Path) -> None:
    ctx = _ctx(repo, ("src/*.py", "*.lock", "relay.yaml"))

    def write(path: str) -> str:
        call = ToolCall(id="c", name="write_file", arguments={"path": path, "content": "new"})
        return execute(call, ctx).content

    assert "protected (matches 'src/*.py')" in write("src/x.py")
    assert "protected" not in write("src/sub/x.py")  # was refused: fnmatch's * crossed "/"
    assert (repo / "src/sub/x.py").read_text() == "new"
    assert "protected (matches '*.lock')" in write("a/b.lock")
    assert "protected" not in write("sub/relay.yaml")  # a plain path is the root's path
    assert "protected (matches 'relay.yaml')" in write("relay.yaml")


def test_sandbox_mounts_cover_nested_matches(repo: Path) -> None:
    found = {p.relative_to(repo).as_posix() for p in protected_targets(repo, ["*.lock"])}
    assert found == {"a/b.lock"}  # glob.glob found only the root's *.lock; .git is left out
    found = {p.relative_to(repo).as_posix() for p in protected_targets(repo, ["src/*.py"])}
    assert found == {"src/x.py"}


ENTRIES = [
    "relay.yaml",
    "/relay.yaml",
    "tests",
    "tests/",
    "tests/**",
    "tests/*",
    "tests/*.py",
    "**/tests/**",
    "**/test_*.py",
    "test_*.py",
    "*.lock",
    "src/*.py",
    "src/**/*.py",
    "build*/",
    "build*",
    "docs/**/index.md",
    "docs/*/index.md",
    "goal[1].md",
    "missing.txt",
    "./docs",
    "*",
]


def _files(root: Path) -> list[str]:
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(".git/"):
            out.append(rel)
    return sorted(out)


def _assert_same_set(root: Path, entries: list[str]) -> None:
    targets = protected_targets(root, entries)
    mounted = {t.relative_to(root).as_posix() for t in targets}
    ctx = _ctx(root, tuple(entries))
    for rel in _files(root):
        under_mount = any(rel == m or rel.startswith(m + "/") for m in mounted)
        refused = protected_entry(ctx, rel) is not None
        assert under_mount == refused, (entries, rel, sorted(mounted))


@pytest.mark.parametrize("entry", ENTRIES)
def test_read_only_mounts_are_the_paths_the_tools_refuse(repo: Path, entry: str) -> None:
    _assert_same_set(repo, [entry])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(ENTRIES), max_size=4))
def test_read_only_mounts_match_the_tools_for_any_entry_list(
    tmp_path_factory: pytest.TempPathFactory, entries: list[str]
) -> None:
    root = tmp_path_factory.mktemp("tree").resolve()
    for rel in ["relay.yaml", "sub/relay.yaml", "src/x.py", "src/sub/x.py", "a/b.lock"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    for rel in ["tests/test_a.py", "pkg/tests/t.py", "build1/o", "build2", "docs/a/index.md"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    _assert_same_set(root, entries)


def test_a_matched_folder_is_one_mount_and_symlinks_are_not_followed(repo: Path) -> None:
    (repo / "link.lock").symlink_to(repo / "a" / "b.lock")
    found = [p.relative_to(repo).as_posix() for p in existing_matches(repo, ["tests/**"], 10)]
    assert found == ["tests"]  # new files in tests/ are read-only too
    found = [p.relative_to(repo).as_posix() for p in existing_matches(repo, ["*.lock"], 10)]
    assert found == ["a/b.lock"]
    assert len(existing_matches(repo, ["*"], 3)) == 3


def test_a_shell_change_to_a_plain_protected_path_is_undone(repo: Path) -> None:
    before = protect.snapshot(repo, ["./relay.yaml", "tests/", "*.lock"])
    listed = {p.relative_to(repo).as_posix() for p in before.paths}
    assert listed == {  # a folder with what it holds, and what a glob matches (issue 28)
        "relay.yaml",
        "tests",
        "tests/test_a.py",
        "tests/unit",
        "tests/unit/test_b.py",
        "a/b.lock",
    }
    (repo / "relay.yaml").write_text("changed by a command")
    findings = protect.restore(repo, before)
    assert (repo / "relay.yaml").read_text() == "relay.yaml"
    assert findings == ["a shell command changed the protected file relay.yaml; restored"]
