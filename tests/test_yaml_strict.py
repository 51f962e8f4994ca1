"""Issue 28, item 12: a duplicate YAML key is an error naming the key and its lines, in every
YAML file relay reads (relay.yaml, ``--config``, front matter, scripted-model scripts, batch
and deliverables files); an unclosed ``[`` in a glob setting is a configuration error naming
the key, the value and what is allowed. Both refuse before any change (SPEC §12)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import flat, git, tree_snapshot

from relay.batch.entries import load_batch
from relay.config import load_config, load_yaml
from relay.errors import ConfigError
from relay.globs import check_glob, glob_match, parse_glob
from relay.goal_file import parse_goal_file
from relay.models.scripted import ScriptedModel

RunRelay = Callable[..., tuple[int, str, str]]


def _error(call: Callable[[], object]) -> str:
    with pytest.raises(ConfigError) as info:
        call()
    return flat(str(info.value))


def test_a_duplicate_key_names_the_key_and_both_lines() -> None:
    text = "model: scripted:a.yaml\nlimits:\n  max_rounds_total: 3\n  max_rounds_total: 9\n"
    msg = _error(lambda: load_yaml(text, "relay.yaml"))
    assert "relay.yaml" in msg and "'max_rounds_total'" in msg
    assert "line 4" in msg and "line 3" in msg
    assert "once" in msg


def test_a_duplicate_top_level_key_in_relay_yaml_is_refused(tmp_path: Path) -> None:
    (tmp_path / "relay.yaml").write_text("mode: relay\nmode: session\n", encoding="utf-8")
    msg = _error(lambda: load_config(tmp_path))
    assert "relay.yaml" in msg and "'mode'" in msg and "line 2" in msg


def test_merge_keys_and_distinct_keys_still_load() -> None:
    text = "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n"
    assert load_yaml(text, "t") == {"base": {"x": 1, "y": 2}, "other": {"x": 1, "y": 3}}
    assert load_yaml("a: 1\nb: {a: 2}\n", "t") == {"a": 1, "b": {"a": 2}}


def test_front_matter_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    goal = tmp_path / "goal.md"
    goal.write_text("---\nmode: relay\nmode: session\n---\nDo it.\n", encoding="utf-8")
    msg = _error(lambda: parse_goal_file(goal))
    assert "front matter" in msg and "'mode'" in msg
    assert "(line 3; first at line 2)" in msg  # the goal file's own line numbers


def test_a_script_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        "responses:\n  - text: a\n    text: b\nwhen_exhausted: error\n", encoding="utf-8"
    )
    msg = _error(lambda: ScriptedModel.from_file(script))
    assert str(script) in msg and "'text'" in msg and "line 3" in msg


def test_a_batch_file_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    batch = tmp_path / "batch.yaml"
    batch.write_text("goals:\n  - goal: a\n    goal: b\n", encoding="utf-8")
    msg = _error(lambda: load_batch(batch))
    assert str(batch) in msg and "'goal'" in msg and "line 3" in msg


def test_relay_run_with_a_duplicate_key_changes_nothing(
    make_repo: Callable[..., Path], write_script: Callable[..., object], run_relay: RunRelay
) -> None:
    repo = make_repo({"relay.yaml": "mode: relay\nlimits:\n  max_no_progress: 2\n"})
    (repo / "relay.yaml").write_text(
        "mode: relay\nlimits:\n  max_no_progress: 2\n  max_no_progress: 5\n", encoding="utf-8"
    )
    git(repo, "commit", "-qam", "dup")
    script = write_script([{"text": "hi"}])
    before = tree_snapshot(repo)
    code, _, err = run_relay(["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 1 and "Traceback" not in err
    assert "'max_no_progress'" in flat(err) and "line 4" in flat(err)
    assert tree_snapshot(repo) == before


# --------------------------------------------------------------------------- globs


@pytest.mark.parametrize("entry", ["src/[ab", "tests/[", "[", "a[!b", "x\\[[y"])
def test_an_unclosed_bracket_is_not_a_valid_glob(entry: str) -> None:
    assert parse_glob(entry).error
    msg = _error(lambda: check_glob(entry, "tools.protected_paths"))
    assert "tools.protected_paths" in msg and f"'{entry}'" in msg and "\\[" in msg


@pytest.mark.parametrize("entry", ["a[b]c", "[]]x", "[!]]", "x\\[y", "[[:alpha:]]", "a[b\\]]"])
def test_closed_brackets_and_escaped_ones_are_valid(entry: str) -> None:
    assert parse_glob(entry).error is None


def test_an_unclosed_bracket_entry_still_protects_its_literal_path() -> None:
    assert glob_match("notes[1.md", "notes[1.md")


@pytest.mark.parametrize(
    ("config", "shown"),
    [
        ("tools:\n  protected_paths: ['src/[ab']\n", "tools.protected_paths"),
        ("deliverables:\n  - changed: 'src/[ab'\n", "deliverable 1"),
    ],
)
def test_relay_run_refuses_an_unclosed_bracket_before_any_change(
    make_repo: Callable[..., Path],
    write_script: Callable[..., object],
    run_relay: RunRelay,
    config: str,
    shown: str,
) -> None:
    repo = make_repo({"relay.yaml": config})
    script = write_script([{"text": "hi"}])
    before = tree_snapshot(repo)
    code, _, err = run_relay(["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 1 and "Traceback" not in err
    assert shown in flat(err) and "'src/[ab'" in flat(err) and "\\[" in flat(err)
    assert tree_snapshot(repo) == before
