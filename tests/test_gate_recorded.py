"""The stored-baseline gate judged again on recorded H200 runs: one write and a calibration of 4 processes made 5 runs
a row, then 5 fresh processes gated against them, each carrying a known +5% on FP8 (tools/gate_aa.sh;
docs/measurements/2026-11-27-h200-five-gates-one-board.md). The gate's own functions judge the recorded medians."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_vitperf.measure.clocks import ClockReading
from pytest_vitperf.measure.measurement import Measurement, Spec
from pytest_vitperf.store.baselines import JsonDirStorage
from pytest_vitperf.verdicts.baselines.compare import (
    CYCLES,
    FALSE_ALARM,
    IMPROVEMENT,
    OTHER_BOARD,
    REGRESSION,
    SAME_BOARD,
    THRESHOLD,
    WITHIN_NOISE,
)
from pytest_vitperf.verdicts.baselines.gate import Outcome, judge, key_for, prior_for, settle_outcomes

DATA = Path(__file__).parent / "data" / "gate" / "h200-gate-2026-11-27.json"


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return dict(json.loads(DATA.read_text()))


@pytest.fixture
def storage(tmp_path: Path, data: dict[str, Any]) -> JsonDirStorage:
    for rel, doc in data["baselines"].items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(doc))
    return JsonDirStorage(tmp_path)


def _measurement(data: dict[str, Any], row: str, median: float, mhz: float, uuid: str) -> Measurement:
    model, precision, batch = row.rsplit(" ", 2)
    spec = Spec(model, precision, int(batch[1:]), data["backend"], data["backend_version"], data["device"], 90,
                "cuda-event", 0, uuid)  # fmt: skip
    # Two samples at the recorded median, and two readings whose median is the recorded clock (x.5 MHz included).
    clocks = tuple(ClockReading(1, f(mhz), 0, 0.0, 0) for f in (math.floor, math.ceil))
    return Measurement(spec, (median, median), clocks)


def _judged(storage: JsonDirStorage, data: dict[str, Any], run: dict[str, list[float]], uuid: str) -> list[Outcome]:
    """One gated process's rows as the plugin judges each: at the run's Bonferroni level, with the stored rows' spread
    prior (every row is filed under one backend version and GPU model, so one prior serves them all)."""
    ms = [_measurement(data, row, median, mhz, uuid) for row, (median, mhz) in run.items()]
    prior = prior_for(storage, key_for(ms[0]), uuid)
    return [judge(storage, m, threshold=THRESHOLD, environment={}, level=FALSE_ALARM / len(ms), prior=prior)
            for m in ms]  # fmt: skip


def _gate(storage: JsonDirStorage, data: dict[str, Any], run: dict[str, list[float]], uuid: str) -> list[Outcome]:
    """One gated process: its rows judged, then settled by Benjamini-Hochberg over the matrix."""
    return settle_outcomes(_judged(storage, data, run, uuid), FALSE_ALARM)


def _delayed(o: Outcome) -> bool:
    return o.key.model.startswith("vit_") and o.key.precision == "fp8"


def test_five_recorded_gates_on_one_board_flag_the_delayed_rows_and_nothing_else(
    storage: JsonDirStorage, data: dict[str, Any]
) -> None:
    """On the board that wrote and calibrated the baselines: in each of the 5 processes both FP8 rows (+5%, read as
    +4.1% to +5.6%) are regressions that fail, and the 80 other rows are within noise."""
    assert len(data["gates"]) == 5
    for run in data["gates"]:
        outcomes = _gate(storage, data, run, data["gpu_uuid"])
        assert len(outcomes) == 82
        cs = [o.comparison for o in outcomes]
        assert all(c is not None and c.board == SAME_BOARD and c.runs == 5 and c.sd_log is not None for c in cs)
        assert [o.failure for o in outcomes if _delayed(o)] == [REGRESSION, REGRESSION]
        others = [o for o in outcomes if not _delayed(o)]
        assert len(others) == 80
        assert all(o.comparison and o.comparison.change == WITHIN_NOISE and o.failure is None for o in others)
        # The ViT rows see a change just above the 3% practical threshold on this board.
        seen = [o.comparison.detectable for o in outcomes if o.comparison and o.key.model.startswith("vit_")]
        assert all(d is not None and THRESHOLD <= d < 0.034 for d in seen)


def test_the_same_runs_on_another_board_are_judged_in_cycles_and_flag_nothing(
    storage: JsonDirStorage, data: dict[str, Any]
) -> None:
    """The same medians as if another board of the model had run them: the boards' assumed spread is added, every
    row is judged in cycles and none is flagged; the +5% on FP8 now hides under what another board can see."""
    for run in data["gates"]:
        outcomes = _gate(storage, data, run, "GPU-another-board")
        cs = [o.comparison for o in outcomes]
        assert all(c is not None and c.board == OTHER_BOARD and c.unit == CYCLES for c in cs)
        assert not [o for o in outcomes if o.comparison and o.comparison.change in (REGRESSION, IMPROVEMENT)]
        assert all(c is not None and c.detectable is not None and c.detectable > 0.1 for c in cs)


def test_a_row_slowed_by_what_it_can_see_is_flagged_about_4_times_in_5(
    storage: JsonDirStorage, data: dict[str, Any]
) -> None:
    """Is "can see" right? Each of the 80 undelayed rows of each recorded run, alone, is made slower by the change its
    row says it can see (flagged 4 times in 5 by design), and the run is judged again: 345 of 400 (86%) are flagged,
    and no other row. At half that change, 12 of 400; unchanged, none. The runs are real draws between processes, so
    a spread the gate underestimated would show here as fewer than 4 in 5 (and as false alarms at no change).
    By rows: GEMM rows that can see at most 5% 187 of 235, the noisier ones 154 of 155 (their "can see" is
    pessimistic), ViT FP16 b1 4 of 5, and ViT FP16 b64 0 of 5: in the gated runs FP8's delay drew less power beside
    it, FP16 b64 ran at 1875 MHz instead of 1860 and read 0.4-0.8% faster, so +3.2% read under the 3% threshold."""
    flagged = {0.0: 0, 0.5: 0, 1.0: 0}
    for run in data["gates"]:
        judged = _judged(storage, data, run, data["gpu_uuid"])
        prior = prior_for(storage, judged[0].key, data["gpu_uuid"])
        for i, o in enumerate(judged):
            if _delayed(o):
                continue
            assert o.comparison is not None and o.comparison.detectable is not None
            row = f"{o.key.model} {o.key.precision} b{o.key.batch}"
            for part in flagged:
                median, mhz = run[row]
                slowed = _measurement(data, row, median * (1 + part * o.comparison.detectable), mhz, data["gpu_uuid"])
                again = judge(storage, slowed, threshold=THRESHOLD, environment={}, level=FALSE_ALARM / len(judged),
                              prior=prior)  # fmt: skip
                settled = settle_outcomes([*judged[:i], again, *judged[i + 1 :]], FALSE_ALARM)
                assert [x.failure for j, x in enumerate(settled) if j != i and not _delayed(x)] == [None] * 79
                flagged[part] += settled[i].failure == REGRESSION
    assert flagged[0.0] == 0 and flagged[0.5] <= 20  # none unchanged; at most 1 in 20 at half the change
    assert 320 <= flagged[1.0] <= 380  # 4 in 5 by design: neither fewer (spread underestimated) nor all (overstated)
