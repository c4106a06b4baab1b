"""One verdict per row, whatever shows it: the terminal summary, report.md, data.json, the store, the CI export, the
run's JSON and `vitperf report` on it all give each row the same verdict, floor and interval, because each renders
the rows the run judged once (verdicts/rows.py). Held on kept H200 main jobs, on a CPU run end to end, and on
generated families."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.cli import main
from pytest_vitperf.measure.measurement import read_benchmark_json
from pytest_vitperf.report.exports import github_action_benchmark
from pytest_vitperf.report.tables import interval_notes, summary
from pytest_vitperf.results import stored_rows
from pytest_vitperf.store.sql import _judged
from pytest_vitperf.verdicts.floors import Verdict
from pytest_vitperf.verdicts.rows import RowVerdict, judge_rows
from tests.conftest import AGAIN, FAST
from tests.test_family import floors
from tests.test_rounds import measured

DATA = Path(__file__).parent / "data"
# The main job on an H200 (GPU-89a84787), 2026-12-01, warm, its latency rows kept with the live run's summary:
# at this code, whose JSON carries its rows, and at c155d20, whose JSON does not (report.md said "no floor" there).
KEPT = DATA / "h200-main-job-2026-12-01.json"
BEFORE = DATA / "h200-main-job-c155d20-2026-12-01.json"
SUITE_FLOORS = Path(__file__).parents[1] / "suites" / "floors.json"
SHOWN = ("vs fp16", "cycles vs fp16", "verdict")


def terminal_table(lines: list[str]) -> dict[tuple[str, str, str], dict[str, str]]:
    """The summary table's rows by (model, precision, batch), cut at the columns its dashes mark."""
    head = next(i for i, line in enumerate(lines) if line.startswith("model "))
    dashes = lines[head + 1]
    starts = [0] + [k + 1 for k in range(len(dashes) - 1) if dashes[k] == " " and dashes[k + 1] == "-"]
    cut = list(zip(starts, [*starts[1:], None], strict=True))
    names = [lines[head][a:b].strip() for a, b in cut]
    out = {}
    for line in lines[head + 2 :]:
        if not line or line.startswith(("intervals:", "floors:", "warning:", "note:", "time:")) or line[0] in "-=":
            break
        row = dict(zip(names, (line[a:b].strip() for a, b in cut), strict=True))
        out[(row["model"], row["precision"], row["batch"])] = row
    return out


def markdown_table(text: str) -> dict[tuple[str, str, str], dict[str, str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    names = [c.strip() for c in lines[0].strip("|").split(" | ")]
    rows = [dict(zip(names, (c.strip() for c in line.strip("|").split(" | ")), strict=True)) for line in lines[1:]]
    return {(r["model"], r["precision"], r["batch"]): r for r in rows if "model" in r}


def same_rows(a: dict, b: dict) -> None:
    assert set(a) == set(b) != set()
    for key in a:
        assert [a[key][c] for c in SHOWN] == [b[key][c] for c in SHOWN], key


@pytest.mark.parametrize(("run", "said"), [(KEPT, ""), (BEFORE, "carries no verdicts")])
def test_vitperf_report_says_what_the_live_h200_run_said(run: Path, said: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """c155d20's report.md said "no floor" for fp8, fp8-attn and fp8-fused at batch 64, where its summary said pass:
    its JSON, judged with the floors file it read, now reads as its summary did; this code's JSON carries its rows."""
    assert main(["report", str(run), "--out", str(tmp_path), "--floors", str(SUITE_FLOORS)]) == 0
    assert said in capsys.readouterr().out
    live_lines = run.with_suffix(".summary.txt").read_text().splitlines()
    live = terminal_table(live_lines)
    report = (tmp_path / "report.md").read_text()
    if said:  # judged again from the floors file: today's verdicts also say which version set each floor
        assert report.count("pass (floor 1.11x, set on torch 2.11)") == 1
        report = report.replace(", set on torch 2.11", "")
    same_rows(live, markdown_table(report))
    assert live[("vit_base_patch16_224", "fp8", "64")]["verdict"] == "pass (floor 1.11x)"
    assert next(line for line in live_lines if line.startswith("floors: ")) in report.splitlines()


def test_the_kept_rows_render_the_live_summary_line_for_line() -> None:
    ms = read_benchmark_json(KEPT)
    rows, how = stored_rows(KEPT, ms, SUITE_FLOORS)
    assert how == "" and len(rows) == 17
    live = KEPT.with_suffix(".summary.txt").read_text().splitlines()
    shown = summary(ms, rows)
    assert live[2 : 2 + len(shown)] == shown
    assert live[2 + len(shown) :] == interval_notes(ms, rows, 0.95)


def test_every_output_of_a_cpu_run_gives_each_row_the_same_verdict(aa: pytest.Pytester) -> None:
    """A real run on the CPU with a floor: the summary, report.md, data.json, the store, the export, the JSON and
    `vitperf report` on it."""
    aa.makeconftest(AGAIN)
    floors(aa.path / "floors.json", "bf16-again", 0.5)
    out = aa.path / "run.json"
    result = aa.runpytest(*FAST, "--vitperf-precisions=bf16,bf16-again", "--vitperf-report=rep",
                          "--vitperf-store=store.db", "--vitperf-export=github-action-benchmark=gab.json",
                          f"--benchmark-json={out}")  # fmt: skip
    result.assert_outcomes(passed=2)
    lines = result.outlines[next(i for i, line in enumerate(result.outlines) if "vitperf summary" in line) :]
    live = terminal_table(lines)
    assert live[("test_vit", "bf16-again", "1")]["verdict"].startswith("pass (floor 0.50x)")
    same_rows(live, markdown_table((aa.path / "rep" / "report.md").read_text()))
    assert main(["report", str(out), "--out", str(aa.path / "again")]) == 0
    same_rows(live, markdown_table((aa.path / "again" / "report.md").read_text()))

    carried = json.loads(out.read_text())["machine_info"]["vitperf"]["results"]["rows"]
    assert json.loads((aa.path / "rep" / "data.json").read_text())["rows"] == carried
    rows = {(r.model, r.precision, str(r.batch)): r for r in map(RowVerdict.from_dict, carried)}
    assert {k: r.verdict_text() for k, r in rows.items()} == {k: v["verdict"] for k, v in live.items()}
    with sqlite3.connect(aa.path / "store.db") as db:
        stored = db.execute("SELECT model, precision, batch, verdict, floor, speedup_low, speedup_high FROM rows")
        for model, precision, batch, verdict, floor, low, high in stored:
            r = rows[(model, precision, str(batch))]
            assert (verdict, floor) == (r.outcome, r.floor)
            assert (low, high) == ((r.time.low, r.time.high) if r.time else (None, None))
    for entry in json.loads((aa.path / "gab.json").read_text()):
        model, precision, batch = re.match(r"(\S+) (\S+) b(\d+) ", entry["name"]).groups()  # type: ignore[union-attr]
        assert entry["extra"].endswith(f"; verdict: {live[(model, precision, batch)]['verdict']}")


family = st.lists(st.floats(0.5, 2.0), min_size=3, max_size=6)  # a candidate's time over FP16's, round by round


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["bf16", "fp8", "int8"]), st.tuples(family, st.none() | st.floats(0.5, 2.0)),
                       min_size=1), st.integers(1, 5))  # fmt: skip
def test_generated_rows_read_the_same_in_every_output(candidates: dict, noise: int) -> None:
    """Whatever the rounds and floors: the terminal table, the Markdown table, the JSON round trip, the store's
    columns and the export's words agree on every row's verdict, floor and interval."""
    rounds = len(min((r for r, _ in candidates.values()), key=len))
    ref = measured("fp16", [[6.0 + 0.01 * ((i * noise) % 7)] * 2 for i in range(rounds)])
    ms, verdicts = [ref], {}
    for precision, (ratios, floor) in candidates.items():
        m = measured(precision, [[6.0 * r + 0.003 * ((i * noise) % 5)] * 2 for i, r in enumerate(ratios[:rounds])])
        ms.append(m)
        if floor is not None:
            verdicts[m.spec.key] = Verdict(ref, m, floor, confidence=0.99)
    rows = judge_rows(ms, verdicts)
    text, markdown = terminal_table(summary(ms, rows)), markdown_table("\n".join(summary(ms, rows, markdown=True)))
    same_rows(text, markdown)
    extra = {e["name"].split()[1]: e["extra"] for e in github_action_benchmark(ms, rows)}
    for r in rows:
        assert RowVerdict.from_dict(json.loads(json.dumps(r.to_dict()))) == r
        shown = text[(r.model, r.precision, str(r.batch))]
        assert shown["verdict"] == r.verdict_text() and extra[r.precision].endswith(f"verdict: {r.verdict_text()}")
        assert shown["vs fp16"] == r.ratio_text()
        stored = _judged(r.to_dict())
        assert (stored["verdict"], stored["floor"]) == (r.outcome, r.floor)
        judged = verdicts.get(r.key)
        if judged is not None:
            assert r.outcome == judged.outcome and f"floor {judged.floor:.2f}x" in shown["verdict"]
