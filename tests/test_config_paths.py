"""Path settings (issue 13 items 12 and 17; SPEC §6, §10, §11, §14): ``progress.path``,
``state_dir``, ``prompts_dir`` and deliverable paths are checked when the configuration is
read, before any change. A bad one is a configuration error (exit 1) naming the key, the value
and what is allowed; no branch, no state folder and no file outside the repository is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, flat, git, respond, tree_snapshot

from relay.config import load_config, validate_config
from relay.errors import ConfigError

WORK = [respond(call("write_file", path="made_by_model.txt", content="x\n")), complete()]


def config_error(data: dict[str, Any], root: Path | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        if root is None:
            validate_config(data, "relay.yaml")
        else:
            (root / "relay.yaml").write_text(_yaml(data), encoding="utf-8")
            load_config(root)
    assert info.value.exit_code == 1
    return flat(str(info.value))


def _yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def refused_run(make_repo, run_relay, write_script, config: dict[str, Any], *needles: str):
    """``relay run`` with ``config`` as relay.yaml: exit 1, no traceback, every needle in the
    message, nothing changed in the repository, its git folder or its parent folder."""
    repo = make_repo(config=config)
    before, parent_before = tree_snapshot(repo), _listing(repo.parent)
    script = write_script(WORK)
    code, out, err = run_relay(
        ["run", "Create the file.", "--repo", repo, "--model", f"scripted:{script}"]
    )
    message = flat(err + out)
    assert code == 1, (code, out, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    assert tree_snapshot(repo) == before
    assert git(repo, "branch", "--list").split() == ["*", "main"]
    assert not (repo / ".git" / "relay").exists(), "a refused run made the state folder"
    assert _listing(repo.parent) == parent_before, "a refused run wrote beside the repository"
    return message


# --------------------------------------------------------------- the cases, end to end


@pytest.mark.parametrize(
    ("config", "needles"),
    [
        ({"state_dir": ".."}, ["state_dir = '..'", "contains the repository"]),
        ({"progress": {"path": "x/../../y"}}, ["progress.path = 'x/../../y'", ".."]),
        ({"progress": {"path": "."}}, ["progress.path = '.'", "a file"]),
        ({"progress": {"path": "/"}}, ["progress.path = '/'", "relative to the repository"]),
        ({"progress": {"path": ".relay"}}, ["progress.path = '.relay'", "reserved"]),
        (
            {"progress": {"path": "/proc/self/environ"}},
            ["progress.path = '/proc/self/environ'", "relative to the repository"],
        ),
        (
            {"state_dir": ".relay/progress.md"},
            ["state_dir", "progress.path", ".relay/progress.md", "inside"],
        ),
        ({"prompts_dir": "p" * 300}, ["prompts_dir", "255"]),
        ({"deliverables": [{"file": "f" * 300}]}, ["deliverables.0.file", "255"]),
    ],
    ids=[
        "state-dir-parent",
        "progress-escapes",
        "progress-dot",
        "progress-root",
        "progress-relay-folder",
        "progress-proc",
        "state-dir-is-the-progress-file",
        "prompts-dir-too-long",
        "deliverable-file-too-long",
    ],
)
def test_a_bad_path_setting_is_refused_before_any_change(
    make_repo, run_relay, write_script, config, needles
):
    refused_run(make_repo, run_relay, write_script, config, *needles)


def test_a_progress_path_that_is_a_folder_is_refused_and_the_folder_kept(
    make_repo, run_relay, write_script
):
    # relay writes its progress file as a new file: a folder in its place would be deleted.
    repo_files = {"src/app.py": "print(1)\n"}
    make = lambda **kw: make_repo(repo_files, **kw)  # noqa: E731
    msg = refused_run(make, run_relay, write_script, {"progress": {"path": "src"}}, "src")
    assert "is a folder" in msg


def test_a_state_folder_that_exists_as_a_file_is_refused(make_repo, run_relay, write_script):
    make = lambda **kw: make_repo({"notes.txt": "mine\n"}, **kw)  # noqa: E731
    msg = refused_run(make, run_relay, write_script, {"state_dir": "notes.txt"}, "notes.txt")
    assert "is a file" in msg


# --------------------------------------------------------------------- progress.path, unit


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("", "a file path"),
        ("docs/", "a file"),
        ("./", "a file"),
        ("../progress.md", ".."),
        ("a/../progress.md", ".."),
        ("/tmp/progress.md", "relative to the repository"),
        ("~/progress.md", "relative to the repository"),
        (".git/progress.md", "git's own folder"),
        (".git", "git's own folder"),
        ("notes/goal.json", "goal state"),
        (".relay/state/progress.md", "reserved"),
        (".relay/inbox/progress.md", "reserved"),
        ("relay.yaml", "reserved"),
        ("a\x00b", "NUL"),
        ("x" * 256 + ".md", "255"),
        ("/".join(["d" * 200] * 25), "4095"),
    ],
)
def test_progress_path_rules(value: str, allowed: str) -> None:
    msg = config_error({"progress": {"path": value}})
    assert "progress.path" in msg
    assert allowed in msg


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (".relay/progress.md", ".relay/progress.md"),
        ("docs/PROGRESS.md", "docs/PROGRESS.md"),
        ("./notes//progress.md", "notes/progress.md"),
        ("progress.md", "progress.md"),
        ("Fortschritt – ü.md", "Fortschritt – ü.md"),
    ],
)
def test_good_progress_paths_are_kept_in_their_plain_form(value: str, stored: str) -> None:
    assert validate_config({"progress": {"path": value}}, "x").progress.path == stored


def test_a_progress_path_below_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("x\n")
    msg = config_error({"progress": {"path": "README.md/progress.md"}}, tmp_path)
    assert "progress.path" in msg and "README.md is a file" in msg


def test_a_goal_state_file_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes" / "goal.json").mkdir(parents=True)
    msg = config_error({"progress": {"path": "notes/progress.md"}}, tmp_path)
    assert "notes/goal.json" in msg and "is a folder" in msg


def test_an_existing_progress_file_is_fine(tmp_path: Path) -> None:
    (tmp_path / ".relay").mkdir()
    (tmp_path / ".relay" / "progress.md").write_text("# Goal\n")
    (tmp_path / ".relay" / "goal.json").write_text("{}\n")
    assert load_config(tmp_path).progress.path == ".relay/progress.md"


# ------------------------------------------------------------------------- state_dir, unit


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("..", "contains the repository"),
        ("../..", "contains the repository"),
        ("../state", ".."),
        ("var/../../state", ".."),
        (".git", "git's own folder"),
        (".git/refs", "git's own folder"),
        ("s" * 256, "255"),
        (".relay/progress.md", "progress.path"),
        (".relay", "progress.path"),
    ],
)
def test_state_dir_rules(tmp_path: Path, value: str, allowed: str) -> None:
    msg = config_error({"state_dir": value}, tmp_path)
    assert "state_dir" in msg
    assert allowed in msg


def test_an_absolute_state_dir_must_not_hold_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for value in (str(tmp_path), "/", str(repo), str(repo) + "/"):
        msg = config_error({"state_dir": value}, repo)
        assert "state_dir" in msg
        assert "repository" in msg


@pytest.mark.parametrize("value", ["var/relay-state", ".relay/state", ".git/relay", "state"])
def test_good_state_dirs_inside_the_tree(tmp_path: Path, value: str) -> None:
    assert load_config(tmp_path, overrides={"state_dir": value}).state_dir == value


def test_an_absolute_state_dir_outside_the_repository_is_fine(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    outside = tmp_path / "relay-state"
    assert load_config(repo, overrides={"state_dir": str(outside)}).state_dir == str(outside)


def test_progress_path_inside_the_state_folder_is_refused_from_any_layer(
    tmp_path: Path,
) -> None:
    (tmp_path / "relay.yaml").write_text("state_dir: var/state\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, front_matter={"progress": {"path": "var/state/p.md"}})
    msg = flat(str(info.value))
    assert "front matter" in msg
    assert "progress.path" in msg and "var/state" in msg


# ---------------------------------------------------------------- other paths, lengths (17)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"prompts_dir": "p" * 300}, "prompts_dir"),
        ({"prompts_dir": ""}, "prompts_dir"),
        ({"deliverables": [{"file": "f" * 300}]}, "deliverables.0.file"),
        ({"deliverables": [{"file": "src/\x00.py"}]}, "deliverables.0.file"),
        ({"deliverables": [{"changed": "c" * 300}]}, "deliverables.0.changed"),
        ({"tools": {"protected_paths": ["ok", "t" * 300]}}, "tools.protected_paths.1"),
        ({"sandbox": {"writable_paths": ["w" * 300]}}, "sandbox.writable_paths.0"),
        ({"sandbox": {"hidden_paths": ["h" * 300]}}, "sandbox.hidden_paths.0"),
    ],
)
def test_every_path_setting_is_checked_for_length_and_nul(data: dict[str, Any], key: str) -> None:
    msg = config_error(data)
    assert key in msg


def test_relays_own_worktrees_may_lie_in_an_absolute_state_folder(tmp_path: Path) -> None:
    # relay compare/batch make their linked worktrees in the state folder's compare/ and
    # batch/; a run in one of them reads the same absolute state_dir.
    state = tmp_path / "relay-state"
    tree = state / "compare" / "ab12cd34" / "relay"
    tree.mkdir(parents=True)
    assert load_config(tree, overrides={"state_dir": str(state)}).state_dir == str(state)
    other = state / "elsewhere"
    other.mkdir()
    assert "contains the repository" in config_error({"state_dir": str(state)}, other)


@pytest.mark.parametrize(
    ("data", "key", "allowed"),
    [
        ({"state_dir": "~no-such-user-here/state"}, "state_dir", "no user's home folder"),
        ({"progress": {"path": "notes/\ud800.md"}}, "progress.path", "valid text"),
        ({"deliverables": [{"file": "\udcff"}]}, "deliverables.0.file", "valid text"),
    ],
)
def test_paths_that_the_file_system_cannot_take_are_refused(
    tmp_path: Path, data: dict[str, Any], key: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, overrides=data)
    assert key in str(info.value) and allowed in str(info.value)
