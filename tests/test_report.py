"""`relay report`: Markdown and self-contained HTML with charts, from the store."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, respond, state_dir

from relay import report as report_module
from relay.store import Store

PRICE = {"input": 3.0, "cache_write": 3.75, "cached_input": 0.3, "output": 15.0}
USAGE = {"input": 1200, "cached": 3000, "cache_write": 0, "output": 100}
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


@pytest.fixture()
def finished_goal(make_repo, write_script, relay_run) -> tuple[Path, dict[str, Any]]:
    """A two-round goal with three failing commands (a guard event), a rejected claim of
    completion (a failed audit), cache reads, a price, and finally a passed audit."""
    repo = make_repo(
        config={
            "deliverables": [{"file": "out.txt", "contains": "done"}],
            "prices": {"scripted": PRICE},
        }
    )
    script = write_script(
        [
            respond(
                call("shell", command="exit 3"),
                call("shell", command="exit 4"),
                call("shell", command="exit 5"),
                text="Trying the build.",
                usage=USAGE,
            ),
            respond(call("update_goal", status="complete", summary="done?"), usage=USAGE),
            respond(call("handoff", note="HANDOFF-ONE: out.txt is still missing"), usage=USAGE),
            respond(call("write_file", path="out.txt", content="done\n"), usage=USAGE),
            {**complete("out.txt written"), "text": "FINAL-WORD: all done.", "usage": USAGE},
        ]
    )
    code, out, err = relay_run(repo, script, "Write done into out.txt.")
    assert code == 0, err
    return repo, out


def test_markdown_report_of_a_finished_goal(finished_goal, run_relay) -> None:
    repo, out = finished_goal
    code, text, err = run_relay(["report", "--repo", repo])
    assert code == 0, err
    assert f"goal {out['goal_id']}" in text
    assert "| status | complete |" in text
    assert "FINAL-WORD: all done." in text  # the last response is visible in the result
    assert "HANDOFF-ONE" in text
    assert "tool_failures" in text  # the guard event
    assert "- round 1: failed (file out.txt)" in text  # the rejected claim's audit
    assert "| ✓ | file | out.txt |" in text
    assert f"| tokens counted (budget) | {out['tokens']['counted']} |" in text  # one figure
    # the round table's tokens and costs are the store's steps, summed per round
    store = Store(Path(out["run_dir"]).parents[1] / "relay.db")
    try:
        steps = store.steps(out["goal_id"])
    finally:
        store.close()
    rounds_section = text.split("## Rounds", 1)[1].split("\n## ", 1)[0]
    rows = {
        int(m.group(1)): m.group(2).split(" | ")
        for m in re.finditer(r"^\| (\d+) \| (.*) \|$", rounds_section, flags=re.M)
    }
    assert sorted(rows) == [1, 2]
    for n in (1, 2):
        mine = [s for s in steps if s["round"] == n]
        cells = rows[n]
        assert int(cells[3]) == sum(s["uncached_input"] for s in mine)
        assert int(cells[4]) == sum(s["cached_input"] for s in mine)
        assert int(cells[6]) == sum(s["output"] for s in mine)
        cost = sum(
            s["uncached_input"] * 3.0 + s["cached_input"] * 0.3 + s["output"] * 15.0 for s in mine
        )
        assert float(cells[7]) == pytest.approx(cost / 1e6, abs=5e-5)
    assert sum(float(rows[n][7]) for n in (1, 2)) == pytest.approx(out["cost_usd"], abs=1e-4)


def test_report_of_one_run_by_its_id(finished_goal, run_relay, tmp_path) -> None:
    repo, out = finished_goal
    run_id = Path(out["run_dir"]).name
    target = tmp_path / "run.md"
    code, _, err = run_relay(["report", run_id, "--repo", repo, "--out", target])
    assert code == 0, err
    assert f"(run {run_id})" in target.read_text(encoding="utf-8")
    code, _, err = run_relay(["report", "nope", "--repo", repo])
    assert code == 1 and "no goal or run with id nope" in err


def test_html_report_is_self_contained_with_charts(finished_goal, run_relay) -> None:
    repo, out = finished_goal
    code, _, err = run_relay(["report", "--repo", repo, "--html"])
    assert code == 0, err
    path = state_dir(repo) / "reports" / f"{out['goal_id']}.html"
    assert str(path) in err
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") == 4  # tokens, cost, timeline, guard events
    # nothing is fetched: no address at all, no script, no external stylesheet or image
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", html)
    for needle in ("Tokens per round", "Cumulative cost", "Round timeline", "Audit checks"):
        assert needle in html
    assert "tool_failures" in html and "FINAL-WORD: all done." in html


def _screenshot(chromium: str, html: Path, png: Path, tmp_path: Path) -> None:
    profile = tmp_path / "chromium-profile"
    subprocess.run(
        [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1200,2400",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        capture_output=True,
        timeout=90,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="headless Chromium is not installed (apt-get install chromium)",
)
def test_html_report_renders_in_headless_chromium(finished_goal, run_relay, tmp_path) -> None:
    repo, _ = finished_goal
    html = tmp_path / "report.html"
    code, _, err = run_relay(["report", "--repo", repo, "--html", "--out", html])
    assert code == 0, err
    png = tmp_path / "report.png"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium is not None
    _screenshot(chromium, html, png, tmp_path)
    assert png.is_file() and png.stat().st_size > 20_000
    from matplotlib.image import imread

    pixels = imread(str(png))
    assert pixels.shape[1] == 1200
    # the charts drew something: a good share of the page is neither white nor near-white
    inked = (pixels[:, :, :3].mean(axis=2) < 0.85).mean()
    assert inked > 0.03, inked


def test_charts_put_every_series_on_the_same_axes(finished_goal) -> None:
    repo, out = finished_goal
    store = Store(state_dir(repo) / "relay.db")
    try:
        one = report_module.load_goal_report(store, out["goal_id"], label="relay")
        two = report_module.load_goal_report(store, out["goal_id"], label="session")
    finally:
        store.close()
    svg = report_module.chart_tokens_per_round([one, two])
    assert svg.startswith("<svg") and "xmlns" not in svg
    for chart in (
        report_module.chart_cumulative_cost([one, two]),
        report_module.chart_timeline([one, two]),
        report_module.chart_guard_events([one, two]),
    ):
        assert chart is not None and chart.startswith("<svg")
    assert report_module.chart_guard_events([]) is None


def test_a_one_round_report_counts_rounds_in_whole_numbers(finished_goal) -> None:
    """With one round, the round axis shows round 1, not 0.40, 0.48, … (issue 13, item 9)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from relay.report import charts

    repo, _ = finished_goal
    store = Store(state_dir(repo) / "relay.db")
    try:
        report = report_module.load_goal_report(store, store.latest_goal().id)
    finally:
        store.close()
    report.rounds = report.rounds[:1]
    ax = Figure().add_subplot()
    charts._round_axis(ax, [report])
    low, high = ax.get_xlim()
    shown = [t for t in ax.get_xticks() if low <= t <= high]
    assert shown == [report.rounds[0].n]
