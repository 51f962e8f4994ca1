"""Budgets (SPEC §7.4) and the model-error policy (§7.6), end to end with the scripted model:
hypothesis generates sequences of errors and usages; the transcript shows what was sent."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from conftest import GIT_EMAIL, GIT_NAME, call, complete, respond, state_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay import cli
from relay.budgets import BudgetPolicy, budget_outlook
from relay.config import Price
from relay.models.base import Usage
from relay.prices import cost_usd, price_for

TRANSIENT = ["rate_limit", "overloaded", "timeout", "connection"]
FATAL = ["insufficient_quota", "auth", "bad_request"]
WRITE = respond(call("write_file", path="out.txt", content="x\n"))


def _run(tmp: Path, script: dict[str, Any], config: dict[str, Any]) -> tuple[int, dict, list]:
    repo = tmp / "repo"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", GIT_NAME],
        ["config", "user.email", GIT_EMAIL],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    (repo / "relay.yaml").write_text(yaml.safe_dump(config))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=repo, check=True)
    path = tmp / "script.yaml"
    path.write_text(yaml.safe_dump(script))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli.main(
            ["run", "Write out.txt.", "--repo", str(repo), "--model", f"scripted:{path}", "--json"]
        )
    rows = []
    for transcript in sorted((state_dir(repo) / "runs").glob("*/transcript.jsonl")):
        rows += [json.loads(line) for line in transcript.read_text().splitlines() if line]
    return code, json.loads(buf.getvalue()), rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    errors=st.lists(st.sampled_from(TRANSIENT + FATAL), min_size=1, max_size=8),
    retries=st.integers(min_value=0, max_value=3),
)
def test_no_error_sequence_makes_more_than_one_plus_retries_calls_per_step(
    errors: list[str], retries: int
) -> None:
    script = {"responses": [{"error": e} for e in errors] + [WRITE, complete()]}
    config = {
        "limits": {"api_retries": retries, "api_backoff_s": 0.001},
        "deliverables": [{"file": "out.txt"}],
    }
    with tempfile.TemporaryDirectory() as tmp:
        code, data, rows = _run(Path(tmp), script, config)
    per_step: dict[tuple[int, int], int] = {}
    for row in rows:
        key = (row["round"], row["step"])
        per_step[key] = per_step.get(key, 0) + 1
    assert max(per_step.values()) <= 1 + retries
    first_fatal = next((i for i, e in enumerate(errors) if e in FATAL), None)
    leading_transient = first_fatal if first_fatal is not None else len(errors)
    if leading_transient > retries:
        # retries used up on the first step: failed, resumable, exactly 1 + retries calls
        assert (code, data["status"], data["reason"]) == (7, "failed", "api_unavailable")
        assert len(rows) == 1 + retries
    elif first_fatal is not None:
        # a fatal error is never retried: the run stops at the call that raised it
        assert (code, data["status"]) == (7, "failed")
        assert len(rows) == first_fatal + 1
        assert "error" in rows[-1]
    api_events = [e for e in data["events"] if e["kind"] == "api_errors"]
    assert len(api_events) == sum(1 for r in rows if "error" in r)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    usages=st.lists(
        st.tuples(
            st.integers(0, 600), st.integers(0, 400), st.integers(0, 5000), st.integers(0, 300)
        ),
        min_size=1,
        max_size=12,
    ),
    budget=st.integers(min_value=100, max_value=3000),
)
def test_no_token_budget_is_overshot_by_more_than_one_step(
    usages: list[tuple[int, int, int, int]], budget: int
) -> None:
    steps = [
        {
            **respond(call("shell", command="echo working")),
            "usage": {"input": i, "cache_write": w, "cached": c, "output": o},
        }
        for i, w, c, o in usages
    ]
    counted = [i + w + o for i, w, c, o in usages]
    totals = [sum(counted[: k + 1]) for k in range(len(counted))]
    crossing = next((k for k, total in enumerate(totals) if total >= budget), None)
    zero = {"input": 0, "output": 0}
    if crossing is None:
        tail = [{**WRITE, "usage": zero}, {**complete(), "usage": zero}]
    else:  # the model call after the crossing step is the wrap-up
        steps = steps[: crossing + 1]
        tail = [{"text": "Summary. Next: continue.", "usage": zero}]
    script = {"responses": [*steps, *tail]}
    config = {
        "limits": {"token_budget": budget},
        "guard": {"enabled": False},
        "deliverables": [{"file": "out.txt"}],
    }
    with tempfile.TemporaryDirectory() as tmp:
        code, data, rows = _run(Path(tmp), script, config)
    if crossing is None:
        assert (code, data["status"]) == (0, "complete")
        return
    # the wrap-up step follows the step that reached the budget, and nothing else
    assert (code, data["status"]) == (5, "budget_limited")
    assert len(rows) == crossing + 2
    assert rows[-1]["request"]["tools"] == [] and rows[-1]["request"]["tool_choice"] == "none"
    assert totals[crossing - 1] < budget if crossing > 0 else True
    assert "Next: continue." in data["message"]
    # cache reads are reported, never counted
    assert data["tokens"]["cached_input"] == sum(c for _, _, c, _ in usages[: crossing + 1])


def test_budget_outlook_warns_only_when_the_spending_runs_out_before_the_round_limit() -> None:
    policy = BudgetPolicy(token_budget=10_000)
    warn = budget_outlook(
        policy, tokens=2_000, elapsed_s=5, cost_usd=0, rounds_done=1, rounds_left=49
    )
    assert len(warn) == 1 and "lasts about 4 more rounds" in warn[0]
    assert not budget_outlook(
        policy, tokens=100, elapsed_s=5, cost_usd=0, rounds_done=1, rounds_left=49
    )
    assert not budget_outlook(
        BudgetPolicy(),
        tokens=10**9,
        elapsed_s=10**6,
        cost_usd=10**4,
        rounds_done=1,
        rounds_left=49,
    )
    both = budget_outlook(
        BudgetPolicy(time_budget_s=100, cost_budget_usd=1.0),
        tokens=0,
        elapsed_s=50,
        cost_usd=0.6,
        rounds_done=1,
        rounds_left=3,
    )
    assert [w.split(",")[1].strip().split(" (")[0] for w in both] == [
        "the time budget",
        "the cost budget",
    ]


def test_prices_configured_win_over_defaults_and_unknown_models_have_none() -> None:
    mine = {"claude-opus-5": Price(input=1, cache_write=2, cached_input=3, output=4)}
    assert price_for("anthropic:claude-opus-5", mine).flat == mine["claude-opus-5"]
    assert price_for("anthropic:claude-opus-5", {}).source == "genai-prices"
    assert price_for("openai:no-such-model", {}) is None
    usage = Usage(uncached_input=1_000_000, cache_write=0, cached_input=1_000_000, output=0)
    assert cost_usd(usage, price_for("anthropic:claude-opus-5", {})) == 5.5


def test_a_cost_budget_for_a_model_without_a_price_is_refused_before_any_work(
    make_repo, write_script, run_relay
) -> None:
    repo = make_repo(config={"limits": {"cost_budget": 5}})
    script = write_script([WRITE, complete()])
    code, _, err = run_relay(["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}"])
    assert code == 1
    assert "cost_budget" in err and "scripted" in err and "prices" in err
    assert not (repo / ".relay").exists()


def test_a_cost_budget_stops_the_goal_when_the_priced_spending_reaches_it(
    make_repo, write_script, relay_run
) -> None:
    config = {
        "limits": {"cost_budget": 1.0},
        "prices": {"scripted": {"input": 1.0, "output": 0.0}},
        "guard": {"enabled": False},
    }
    repo = make_repo(config=config)
    work = {**respond(call("shell", command="echo x")), "usage": {"input": 600_000, "output": 1}}
    script = write_script([work, work, {"text": "Next: more.", "usage": {"input": 1}}])
    code, data, _ = relay_run(repo, script, "Do it.")
    assert (code, data["status"], data["reason"]) == (5, "budget_limited", "cost_budget")
    assert 1.0 <= data["cost_usd"] < 1.3


def test_retry_after_is_honoured_up_to_the_cap_and_a_longer_wait_stops_the_run(
    make_repo, write_script, relay_run
) -> None:
    repo = make_repo(config={"deliverables": [{"file": "out.txt"}]})
    script = write_script([{"error": "rate_limit", "retry_after_s": 0.05}, WRITE, complete()])
    code, data, _ = relay_run(repo, script, "Write out.txt.")
    assert (code, data["status"]) == (0, "complete")

    repo2 = make_repo(name="repo2")
    script = write_script([{"error": "rate_limit", "retry_after_s": 3600}, WRITE, complete()])
    code, data, _ = relay_run(repo2, script, "Write out.txt.")
    assert (code, data["status"], data["reason"]) == (7, "failed", "rate_limited")
    assert "3600" in data["message"] and "relay resume" in data["message"]
    assert len(list((state_dir(repo2) / "runs").glob("*/transcript.jsonl"))) == 1
    rows = (next((state_dir(repo2) / "runs").glob("*/transcript.jsonl"))).read_text()
    assert len(rows.splitlines()) == 1, "a wait over api_max_wait_s is never slept or retried"
