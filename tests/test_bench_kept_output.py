"""bench/kept_output.py keeps working (issue 27): a tiny run prints every figure side by side,
and the kept file of the output past the cap is the cap plus the note."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_a_tiny_run_prints_the_figures_side_by_side(monkeypatch, capsys) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import kept_output

    assert kept_output.main(["--sizes", "1000,300000", "--keep", "8192"]) == 0
    out = capsys.readouterr().out
    rows = {line[:34].strip(): line[34:].split() for line in out.splitlines()[1:]}
    assert rows["output printed (bytes)"] == ["1,000", "300,000"]
    kept = [int(v.replace(",", "")) for v in rows["kept file (bytes)"]]
    assert kept[0] == 0 and 8192 < kept[1] < 8192 + 200  # no file; the cap and the note
    assert rows["dropped, as the result says"] == ["0", f"{300000 - 8192:,}"]
    for label in ("peak RSS after the call (MB)", "shell call (s)", "plain bash -c of it (s)"):
        assert len(rows[label]) == 2


def test_bad_sizes_are_a_usage_error(monkeypatch, capsys) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import kept_output

    with pytest.raises(SystemExit) as info:
        kept_output.main(["--sizes", "lots"])
    assert info.value.code == 2
    assert "whole numbers" in capsys.readouterr().err
