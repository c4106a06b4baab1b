"""Interleaved rounds (measure/rounds.py) and what a Measurement makes of them: the scheduler on real callables that
record when they ran, per-round statistics from stored samples and readings, and the pairing of two measurements
into a speedup with an interval (verdicts/floors.py)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.measure.clocks import ClockReading
from pytest_vitperf.measure.measurement import Measurement, Spec
from pytest_vitperf.measure.rounds import (
    RoundPlan,
    Slices,
    disagreement,
    ended_early,
    interleave,
    looks_ahead,
    order,
    warm_up,
)
from pytest_vitperf.verdicts.floors import CYCLES, Verdict, speedup_interval
from pytest_vitperf.verdicts.stats import FAIL, INCONCLUSIVE, PASS


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=8, unique=True), st.integers(0, 2**31))
def test_each_round_is_a_permutation_fixed_by_seed_and_round(names: list[str], seed: int) -> None:
    for r in range(5):
        got = order(names, seed, r)
        assert sorted(got) == sorted(names)
        assert got == order(list(reversed(names)), seed, r)  # the order given does not matter


def test_orders_vary_between_rounds_and_seeds() -> None:
    names = ["fp16", "bf16", "fp8", "int8", "fp32"]
    assert len({tuple(order(names, 1, r)) for r in range(20)}) > 10
    assert [order(names, 1, r) for r in range(5)] != [order(names, 2, r) for r in range(5)]


def test_every_engine_gets_one_slice_per_round_in_that_rounds_order() -> None:
    log: list[str] = []

    def taker(name: str, ms: float) -> Callable[[], tuple[list[float], list[ClockReading], int]]:
        def take() -> tuple[list[float], list[ClockReading], int]:
            log.append(name)
            return [ms, ms], [], 0

        return take

    slices: dict[str, Slices] = {}
    takes = {"a": taker("a", 1.0), "b": taker("b", 2.0), "c": taker("c", 3.0)}
    used = interleave(takes, range(4), seed=3, into=slices)
    assert log == list(itertools.chain.from_iterable(used))
    assert used == [order(["a", "b", "c"], 3, r) for r in range(4)]
    assert {n: s.counts for n, s in slices.items()} == {"a": [2] * 4, "b": [2] * 4, "c": [2] * 4}
    more = interleave(takes, range(4, 6), seed=3, into=slices)  # added rounds keep the earlier ones
    assert more == [order(["a", "b", "c"], 3, r) for r in (4, 5)] and len(slices["a"].counts) == 6


def test_turns_cut_each_round_and_count_into_it() -> None:
    log: list[str] = []
    takes = {n: (lambda n=n: (log.append(n), ([1.0], [], 0))[1]) for n in ("a", "b")}
    slices: dict[str, Slices] = {}
    used = interleave(takes, range(2), seed=0, into=slices, turns=3)
    assert len(used) == 6 and used[3] == order(["a", "b"], 0, 3)  # round 1's first turn has its own order
    assert slices["a"].counts == [3, 3] and slices["b"].counts == [3, 3] and len(log) == 12


def test_the_warm_up_runs_every_engine_at_least_once_and_for_the_time_asked() -> None:
    ran: list[str] = []
    clock = itertools.count()
    warm_up({"x": lambda: ran.append("x"), "y": lambda: ran.append("y")}, ms=0.0, now=lambda: next(clock) / 1e3)
    assert sorted(ran) == ["x", "y"]
    ran.clear()
    warm_up({"x": lambda: ran.append("x"), "y": lambda: ran.append("y")}, ms=10.0, now=lambda: next(clock) / 1e3)
    assert len(ran) >= 9 and ran[:4] == ["x", "y", "x", "y"]


@pytest.mark.parametrize(
    ("answers", "took_ms"),
    [
        ([True], 500),  # settled at the first two checks: 0.5 s, not the 2 s asked
        ([True, False, True, True], 1000),  # two yeses running, not two in all
        ([False], 2000),  # never: the time asked
    ],
)
def test_the_warm_up_ends_once_the_clock_has_said_twice_running_it_has_nothing_to_settle_to(
    answers: list[bool], took_ms: int
) -> None:
    ran: list[str] = []
    clock = itertools.count(step=10)  # each look at the time, 10 ms later
    asked = iter([*answers, *[answers[-1]] * 100])
    spent = warm_up({"x": lambda: ran.append("x"), "y": lambda: ran.append("y")}, ms=2000.0,
                    now=lambda: next(clock) / 1e3, settled=lambda: next(asked))  # fmt: skip
    assert took_ms <= spent < took_ms + 20 and ran[:2] == ["x", "y"]


SPEC = Spec("vit_base_patch16_224", "fp16", 64, "torch", "2.11.0", "NVIDIA H100 80GB HBM3", sm=90, timer="cuda-event")


def measured(precision: str, rounds: list[list[float]], mhz: list[int] | None = None, run: str = "r1") -> Measurement:
    samples = [x for r in rounds for x in r]
    clocks = tuple(ClockReading(len(r), m, 2619, 700.0, 4) for r, m in zip(rounds, mhz, strict=True)) if mhz else ()
    spec = Spec(**{**SPEC.__dict__, "precision": precision, "options": {"rounds": {"run": run}}})
    return Measurement(spec, tuple(samples), clocks, tuple(len(r) for r in rounds))


def test_round_medians_and_cycles_come_from_each_rounds_own_samples_and_readings() -> None:
    m = measured("fp16", [[6.5, 6.6, 6.4], [6.7], [], [6.5, 6.5]], mhz=[1650, 1700, 1800, 1600])
    assert m.round_medians() == [6.5, 6.7, None, 6.5]
    assert m.round_cycles() == [6.5 * 1650, 6.7 * 1700, None, 6.5 * 1600]
    again = Measurement.from_dict(m.to_dict())
    assert again.rounds == m.rounds and again.run == "r1" and again.round_medians() == m.round_medians()


def test_rounds_that_do_not_add_up_are_refused() -> None:
    with pytest.raises(ValueError, match="rounds hold 2 samples, not 3"):
        Measurement(SPEC, (1.0, 2.0, 3.0), (), (1, 1))


def test_a_speedup_pairs_round_by_round_within_one_run_only() -> None:
    ref = measured("fp16", [[6.5, 6.6], [6.55, 6.5], [6.6, 6.62], [6.52, 6.5]])
    fast = measured("fp8", [[5.2, 5.3], [5.25, 5.2], [5.3, 5.31], [5.2, 5.22]])
    got = speedup_interval(ref, fast)
    assert got is not None and got.n == 4 and got.low < 6.55 / 5.25 < got.high
    other_run = measured("fp8", [[5.2], [5.2], [5.3], [5.2]], run="r2")
    assert speedup_interval(ref, other_run) is None
    block = Measurement(SPEC, (5.2, 5.3))
    assert speedup_interval(ref, block) is None


def test_cycles_take_the_clock_out_of_a_speedup() -> None:
    """FP8 at a higher clock than FP16 (the power cap): faster in time than in cycles."""
    rounds = [[6.5], [6.6], [6.55], [6.5], [6.6]]
    ref = measured("fp16", rounds, mhz=[1650] * 5)
    fp8 = measured("fp8", [[x[0] / 1.24] for x in rounds], mhz=[1830] * 5)
    time_iv, cycles_iv = speedup_interval(ref, fp8), speedup_interval(ref, fp8, unit=CYCLES)
    assert time_iv is not None and cycles_iv is not None
    assert time_iv.estimate == pytest.approx(1.24)
    assert cycles_iv.estimate == pytest.approx(1.24 * 1650 / 1830)


VERDICTS = [(1.20, "time", PASS), (1.30, "time", FAIL), (1.24, "time", INCONCLUSIVE), (1.15, CYCLES, FAIL),
            (1.05, CYCLES, PASS)]  # fmt: skip


@pytest.mark.parametrize(("floor", "unit", "outcome"), VERDICTS)
def test_a_verdict_judges_its_interval_in_its_unit(floor: float, unit: str, outcome: str) -> None:
    noise = [1.0, 1.003, 0.997, 1.001, 0.999, 1.002, 0.998, 1.0]
    ref = measured("fp16", [[6.5 * e] for e in noise], mhz=[1650] * 8)
    fp8 = measured("fp8", [[6.5 / 1.24] for _ in noise], mhz=[1830] * 8)
    v = Verdict(ref, fp8, floor, judged_in=unit, confidence=0.99)
    assert v.outcome == outcome
    assert v.passed == (outcome != FAIL)
    again = Verdict.from_dict(v.to_dict())
    assert again.outcome == outcome and again.judged_in == unit and again.confidence == 0.99


def test_without_rounds_a_verdict_falls_back_to_the_medians() -> None:
    ref, cand = Measurement(SPEC, (6.5, 6.6, 6.4)), Measurement(SPEC, (5.2, 5.3, 5.25))
    assert Verdict(ref, cand, 1.2).outcome == PASS and Verdict(ref, cand, 1.3).outcome == FAIL
    assert math.isclose(Verdict(ref, cand, None).speedup, 6.5 / 5.25)


def test_the_looks_ahead_double_the_rounds_within_the_budget_and_the_looks_left() -> None:
    assert looks_ahead(20, 1, 1000) == [40, 80]  # two doublings after the first look
    assert looks_ahead(20, 1, 30) == [40, 50]  # the budget cuts the second
    assert looks_ahead(20, 2, 1000) == [40] and looks_ahead(20, 3, 1000) == [] and looks_ahead(20, 1, 0) == []


def test_a_family_ended_early_where_its_one_look_came_at_the_early_look() -> None:
    """From the rounds a measurement records: 6 of 20 rounds at one look is the early look; all 20, a second look, no
    early look asked, or a record made before there was one, is not."""
    plan = RoundPlan().to_dict()
    assert ended_early({**plan, "done": 6, "looks": 1})
    assert not ended_early({**plan, "done": 20, "looks": 1}) and not ended_early({**plan, "done": 6, "looks": 2})
    assert not ended_early({**plan, "first_look": 0, "done": 6, "looks": 1})
    assert not ended_early({k: v for k, v in plan.items() if k != "first_look"} | {"done": 6, "looks": 1})
    assert not ended_early({**plan, "builds": 2, "done": 3, "looks": 1})  # agreed after 3 rounds


def _slices(*rounds: list[float]) -> Slices:
    s = Slices()
    for samples in rounds:
        s.add((samples, [], 0))
    return s


def test_disagreement_is_the_standard_error_of_a_rounds_median_pooled_over_the_engines() -> None:
    a = _slices([1.0, 1.0, 9.0], [math.e, 0.1, 5.0])  # round medians 1 and e: logs 0 and 1
    b = _slices([2.0], [2.0])  # agrees with itself: no spread, but a share of the pool's degrees of freedom
    assert disagreement([a]) == pytest.approx(math.sqrt(0.5 / 2))
    assert disagreement([a, b]) == pytest.approx(math.sqrt(0.25 / 2))
    assert disagreement([_slices([1.0]), Slices()]) == math.inf  # one round: no spread yet
    empty_round = _slices([1.0], [], [math.e])  # a round that kept nothing is not a round
    assert disagreement([empty_round]) == pytest.approx(math.sqrt(0.5 / 2))


@given(
    st.lists(st.floats(0.1, 10.0), min_size=2, max_size=6),
    st.floats(0.01, 100.0),
)
def test_disagreement_is_relative(medians: list[float], scale: float) -> None:
    """The same rounds in other units (or an engine k times slower throughout) disagree as much."""
    one = _slices(*([m] for m in medians))
    scaled = _slices(*([m * scale] for m in medians))
    assert disagreement([scaled]) == pytest.approx(disagreement([one]), rel=1e-9, abs=1e-12)


def test_stored_h100_families_at_batch_1_agree_after_three_rounds_and_lose_nothing_by_stopping() -> None:
    """FP16's and FP8's round medians of the H100 main job's families (2026-11-26, 2 builds, 20-60 rounds): at batch
    1 the first 3 rounds agree within 0.1% (the default), and FP8's interval after them is as wide as after all
    rounds (the builds' spread sets it) and moved by under 0.2%; at batch 64 they disagree, and the family runs all
    its rounds."""
    import json
    from pathlib import Path

    from pytest_vitperf.verdicts.builds import BuildSpread, nested_interval

    data = json.loads((Path(__file__).parent / "data" / "h100-fp8-floor-rounds-2026-11-26.json").read_text())
    for name in ("cold b1", "warm b1", "cold b64", "warm b64"):
        family = data[name]
        engines = [_slices(*([math.exp(x)] for x in build[:3])) for p in ("fp16", "fp8") for build in family[p]]
        agrees = disagreement(engines) <= RoundPlan().agree
        assert agrees == name.endswith("b1"), name
        if agrees:
            spread = BuildSpread(**family["spread"])
            full = nested_interval(family["fp16"], family["fp8"], spread, 0.9917)
            three = nested_interval([b[:3] for b in family["fp16"]], [b[:3] for b in family["fp8"]], spread, 0.9917)
            assert full is not None and three is not None
            width = math.log(three.high / three.low)
            assert width == pytest.approx(math.log(full.high / full.low), rel=0.02)
            assert three.estimate == pytest.approx(full.estimate, rel=2e-3)


def test_the_early_look_at_stored_h100_batch_64_families_judges_as_all_their_rounds_do() -> None:
    """FP8 against its H100 floor (1.124x at batch 64) in the stored main job's families: after the default early
    look's 6 rounds, each family's interval judges as all its rounds did (the cold one's 20 clear the floor; the warm
    one's 43 still straddled it, so it goes on), and its estimate lies within their interval."""
    import json
    from pathlib import Path

    from pytest_vitperf.verdicts.builds import BuildSpread, nested_interval

    data = json.loads((Path(__file__).parent / "data" / "h100-fp8-floor-rounds-2026-11-26.json").read_text())
    early = RoundPlan().early_look()
    assert early == 6
    for name, settled in (("cold b64", True), ("warm b64", False)):
        family, spread = data[name], BuildSpread(**data[name]["spread"])
        full = nested_interval(family["fp16"], family["fp8"], spread, 0.9917)
        look = nested_interval([b[:early] for b in family["fp16"]], [b[:early] for b in family["fp8"]], spread, 0.9917)
        assert full is not None and look is not None
        assert (look.low > 1.124) == (full.low > 1.124) == settled
        assert full.low < look.estimate < full.high


def test_the_early_look_at_a_stored_h200_family_settles_its_three_floors_as_its_20_rounds_do() -> None:
    """The H200 main job's batch-64 family (2026-11-29, 9 precisions, 2 builds, 20 rounds, no early look): after 6
    rounds, FP8's, fp8-attn's and fp8-fused's intervals at the run's floor level (3 floors, 3 looks: 99.44%) already
    clear their floors, as after 20; each 95% interval after 6 holds the 20 rounds' estimate, and is wider."""
    import json
    from pathlib import Path

    from pytest_vitperf.verdicts.builds import build_spread, nested_interval
    from pytest_vitperf.verdicts.stats import family_wise

    family = json.loads((Path(__file__).parent / "data" / "h200-floor-rounds-2026-11-29.json").read_text())["family"]
    level = family_wise(0.95, 3 * 3)
    looks = {}
    for k in (RoundPlan().early_look(), 20):
        cut = {p: [b[:k] for b in builds] for p, builds in family.items()}
        spread = build_spread(list(cut.values()))
        for p, floor in (("fp8", 1.111), ("fp8-attn", 1.021), ("fp8-fused", 1.246)):
            judged = nested_interval(cut["fp16"], cut[p], spread, level)
            assert judged is not None and judged.low > floor, (k, p)
            shown = nested_interval(cut["fp16"], cut[p], spread, 0.95)
            assert shown is not None
            looks[k, p] = shown
    for p in ("fp8", "fp8-attn", "fp8-fused"):
        early, full = looks[6, p], looks[20, p]
        assert early.low < full.estimate < early.high and early.high / early.low > full.high / full.low
