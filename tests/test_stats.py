"""The statistics room (verdicts/stats.py): its arithmetic held against scipy's own functions and published values,
its decisions on intervals built to straddle or clear a floor, and the smallest detectable change against a
simulation."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.verdicts.builds import BuildSpread, build_spread, nested_interval, settles
from pytest_vitperf.verdicts.proportions import mcnemar_exact, paired_difference, wilson
from pytest_vitperf.verdicts.spreads import Prior, Spread, group_prior, spread_prior
from pytest_vitperf.verdicts.stats import (
    FAIL,
    PASS,
    UNKNOWN,
    Interval,
    against_floor,
    detectable_change,
    false_discoveries,
    family_wise,
    log_ratio_interval,
    ratio_interval,
)
from tests.conftest import load_tool


def test_the_interval_is_students_t_on_the_log_ratios() -> None:
    """By hand, with scipy.stats.t's quantile: mean +- t_{0.975, n-1} sd / sqrt(n), exponentiated."""
    from scipy.stats import t

    ref = [6.53, 6.61, 6.48, 6.57, 6.50, 6.66, 6.55, 6.49]
    cand = [5.27, 5.31, 5.24, 5.33, 5.25, 5.36, 5.28, 5.22]
    logs = [math.log(a / b) for a, b in zip(ref, cand, strict=True)]
    n, mean = len(logs), sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    got = ratio_interval(ref, cand)
    assert got is not None
    assert got.estimate == pytest.approx(math.exp(mean), rel=1e-12)
    assert got.low == pytest.approx(math.exp(mean - half), rel=1e-12)
    assert got.high == pytest.approx(math.exp(mean + half), rel=1e-12)
    assert got.n == 8 and got.sd_log == pytest.approx(sd) and got.confidence == 0.95


def test_a_published_one_sample_t_interval() -> None:
    """NIST/SEMATECH e-Handbook 7.2.2.1: ZARR13's 195 values have mean 9.26146 and sd 0.02279, and its 95% interval
    of the mean is (9.258242, 9.264679). The same mean, sd and n through log_ratio_interval (values centred on 0,
    mean and interval exponentiated back) must give that interval."""
    n, mean, sd = 195, 9.26146, 0.02279
    # n values with exactly this mean and sample sd: a symmetric two-point design scaled to the sd.
    k = math.sqrt((n - 1) / n) * sd
    xs = [k if i % 2 else -k for i in range(n - 1)] + [0.0]
    shift = sum(xs) / n
    xs = [x - shift for x in xs]
    scale = sd / math.sqrt(sum(x * x for x in xs) / (n - 1))
    logs = [mean + x * scale for x in xs]
    got = log_ratio_interval([x - 9 for x in logs])  # keep exp() in range: shift, then take the log back
    assert got is not None
    assert math.log(got.low) + 9 == pytest.approx(9.258242, abs=2e-6)
    assert math.log(got.high) + 9 == pytest.approx(9.264679, abs=2e-6)


def test_the_t_interval_agrees_with_scipys_bootstrap_on_normal_log_ratios() -> None:
    """Where the log ratios are normal, scipy.stats.bootstrap (BCa, over rounds) and the t interval estimate the same
    thing, and on 20 rounds the bootstrap is the narrower: it resamples the sample as if it were the population.
    Over 20 draws the t interval was 6-13% wider every time (docs/statistics.md says why the plugin takes t)."""
    import numpy as np
    from scipy.stats import bootstrap

    rng = np.random.default_rng(7)
    ratios = []
    for _ in range(20):
        logs = rng.normal(math.log(1.2), 0.004, size=20)
        ours = log_ratio_interval(list(logs))
        assert ours is not None
        boot = bootstrap((logs,), np.mean, confidence_level=0.95, method="BCa", n_resamples=4000, random_state=rng)
        theirs = math.exp(boot.confidence_interval.high) - math.exp(boot.confidence_interval.low)
        ratios.append((ours.high - ours.low) / theirs)
    assert all(1.0 < r < 1.2 for r in ratios)


def test_too_few_observations_give_no_interval_and_constant_ones_a_point() -> None:
    assert ratio_interval([1.0, 1.1], [1.0, 1.0]) is None
    flat = ratio_interval([2.0] * 5, [1.0] * 5)
    assert flat is not None and flat.low == flat.high == pytest.approx(2.0) and flat.p_value == 0.0
    same = ratio_interval([1.0] * 5, [1.0] * 5)
    assert same is not None and same.p_value == 1.0 and same.contains(1.0)


def test_pairs_with_a_missing_side_are_left_out() -> None:
    got = ratio_interval([2.0, 2.1, 0.0, 1.9, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert got is not None and got.n == 4


def _interval(low: float, high: float) -> Interval:
    return Interval(math.sqrt(low * high), low, high, 0.95, 10, 0.01, 0.5)


@pytest.mark.parametrize(
    ("low", "high", "floor", "outcome"),
    [(1.20, 1.26, 1.15, PASS), (1.15, 1.26, 1.15, PASS), (1.10, 1.14, 1.15, FAIL), (1.12, 1.18, 1.15, UNKNOWN)],
)
def test_a_floor_passes_only_when_the_whole_interval_clears_it(low: float, high: float, floor: float, outcome: str):
    assert against_floor(_interval(low, high), floor) == outcome


def test_bonferroni_shares_the_error_among_the_decisions() -> None:
    assert family_wise(0.95, 1) == pytest.approx(0.95)
    assert family_wise(0.95, 10) == pytest.approx(0.995)
    assert family_wise(0.95, 0) == pytest.approx(0.95)


def test_false_discovery_control_is_benjamini_hochberg() -> None:
    """Benjamini and Hochberg's own example (1995, section 4): of 15 p-values at q = 0.05, the four smallest are
    discoveries."""
    p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719, 0.6528,
         0.7590, 1.0000]  # fmt: skip
    assert false_discoveries(p, 0.05) == [True] * 4 + [False] * 11
    assert false_discoveries([]) == []


def test_the_detectable_change_is_what_a_simulation_detects_four_times_in_five() -> None:
    """With n = 20 rounds of log-ratio spread 0.01, a true change of detectable_change() is found (interval excludes
    1) in about 80% of simulated runs, and half of it far less often."""
    rng = random.Random(7)
    sd, n = 0.01, 20
    delta = detectable_change(sd, n)

    def power(change: float) -> float:
        hits = 0
        for _ in range(400):
            logs = [math.log1p(change) + rng.gauss(0, sd) for _ in range(n)]
            got = log_ratio_interval(logs)
            hits += got is not None and not got.contains(1.0)
        return hits / 400

    assert 0.72 <= power(delta) <= 0.88
    assert power(delta / 2) < 0.45
    assert detectable_change(sd, 2) == math.inf


@given(
    st.lists(st.floats(min_value=0.5, max_value=2.0), min_size=3, max_size=40),
    st.floats(min_value=0.5, max_value=0.999),
)
def test_the_interval_holds_its_estimate_and_narrows_with_confidence(ratios: list[float], level: float) -> None:
    wide = log_ratio_interval([math.log(r) for r in ratios], 0.999)
    narrow = log_ratio_interval([math.log(r) for r in ratios], level)
    assert wide is not None and narrow is not None
    assert narrow.low <= narrow.estimate * (1 + 1e-12) and narrow.estimate <= narrow.high * (1 + 1e-12)
    assert wide.low <= narrow.low * (1 + 1e-12) and narrow.high <= wide.high * (1 + 1e-12)


def test_the_text_shows_three_digits_for_a_narrow_interval() -> None:
    assert _interval(1.2380, 1.2420).text() == "1.240x [1.238, 1.242]"
    assert _interval(1.20, 1.28).text() == "1.24x [1.20, 1.28]"
    assert Interval.from_dict(_interval(1.2, 1.3).to_dict()) == _interval(1.2, 1.3)


def test_build_spread_is_the_random_effects_anova_estimate() -> None:
    """Two precisions of two builds and three rounds, by numpy: within each precision the rounds' means removed (the
    round's clock), then the two-way table's build and residual mean squares pooled, and (MSB - MSW) / rounds."""
    q1 = [[0.10, 0.12, 0.08], [0.13, 0.16, 0.10]]  # the second build runs about 3% slower, in the same rounds
    q2 = [[0.50, 0.49, 0.53], [0.49, 0.47, 0.52]]
    ss_b = ss_w = 0.0
    for q in (q1, q2):
        y = np.array(q)
        z = y - y.mean(axis=0)
        ss_b += 3 * float((z.mean(axis=1) ** 2).sum())
        ss_w += float(((z - z.mean(axis=1, keepdims=True)) ** 2).sum())
    ms_b, ms_w = ss_b / 2, ss_w / (2 * 2)
    got = build_spread([q1, q2])
    assert got is not None and got.df == 2 and got.var == pytest.approx((ms_b - ms_w) / 3)
    assert build_spread([[[0.1, 0.2, 0.3]]]) is None  # one build: nothing to compare


def test_one_build_and_no_spread_is_the_plain_t_interval() -> None:
    ref, cand = [[6.5, 6.6, 6.4, 6.55, 6.52]], [[5.2, 5.3, 5.25, 5.22, 5.21]]
    logs = [[math.log(x) for x in row] for row in (ref[0], cand[0])]
    plain = ratio_interval(ref[0], cand[0])
    nested = nested_interval([logs[0]], [logs[1]], None)
    assert plain is not None and nested is not None
    assert (nested.low, nested.estimate, nested.high) == pytest.approx((plain.low, plain.estimate, plain.high))
    assert nested.p_value == pytest.approx(plain.p_value)


def test_intervals_with_build_spread_cover_a_precisions_speedup_as_often_as_they_say() -> None:
    """Simulated families like the H100's at batch 1: each build of an engine off by N(0, 0.3%), each round's
    pairs off by N(0, 0.05%). Over 300 families, the 95% interval of two builds a side covers the true speedup about
    95% of the time; without the build spread it would cover it far less often."""
    rng = random.Random(11)
    true, sd_b, sd_r, rounds, precisions = 1.24, 0.003, 0.0005, 20, 5
    covered = naive = 0
    for _ in range(300):
        family = []
        for q in range(precisions):
            shift = math.log(true) if q == 1 else 0.0
            builds = []
            for _ in range(2):
                b = rng.gauss(0, sd_b)
                builds.append([-shift + b + rng.gauss(0, sd_r) for _ in range(rounds)])
            family.append(builds)
        spread = build_spread(family)
        got = nested_interval(family[0], family[1], spread)
        plain = nested_interval(family[0], family[1], None)
        assert got is not None and plain is not None
        covered += got.contains(true)
        naive += plain.contains(true)
    assert 0.90 <= covered / 300 <= 0.99
    assert naive / 300 < 0.5


def test_intervals_keep_their_level_when_the_builds_spread_is_the_size_of_the_rounds() -> None:
    """Families like the H100's at batch 64: builds off by N(0, 0.05%), rounds by N(0, 0.2%)
    (tools/build_coverage.py). The interval covers an A/A pair's 1.00 about 95% of the time. The older sum (the
    rounds' variance plus the builds' clipped at 0, what a record without mean squares still gets) covered about 92%:
    the builds' part, estimated from 5 degrees of freedom, is 0 in about half the families, and the rounds' 19 then
    set the t quantile."""
    got = _build_coverage().coverage((0.0005, 0.002, 0.0), families=1000, seed=1)
    assert 0.935 <= got["now"][0] <= 0.965
    assert got["older"][0] <= 0.935 and got["older"][1] < got["now"][1]


def test_more_builds_let_a_run_see_a_change_that_two_builds_miss() -> None:
    """Families like the H100's at batch 1 on GPU-95c6339d, builds off by N(0, 0.4%): a +1% precision with two
    builds a precision is seen (its interval wholly below 1.00) about half the time, with six nearly always; with no
    change, the interval lies below 1.00 no more often than its level allows."""
    tool = _build_coverage()
    two, six = (tool.power(0.004, 0.01, k, families=300, seed=2)[0.95] for k in (2, 6))
    assert two < 0.7 < 0.9 < six
    assert tool.power(0.004, 0.0, 2, families=300, seed=3)[0.95] <= 0.05


def _build_coverage() -> Any:
    return load_tool("build_coverage")


def test_a_spread_keeps_its_mean_squares_and_reads_back() -> None:
    family = [[[0.0, 0.01, 0.02], [0.004, 0.012, 0.03]], [[0.1, 0.12, 0.1], [0.1, 0.1, 0.13]]]
    spread = build_spread(family)
    assert spread is not None and spread.rounds == 3 and spread.df == 2 and spread.df_within == 4
    assert spread.mean_var is not None and spread.within is not None
    assert spread.var == pytest.approx(max(0.0, spread.mean_var - spread.within / 3))
    assert BuildSpread(**json.loads(json.dumps(spread.to_dict()))) == spread


def test_a_spread_of_zero_keeps_the_rounds_interval() -> None:
    ref, cand = [[0.0, 0.01, -0.01, 0.005]], [[-0.2, -0.19, -0.21, -0.2]]
    assert nested_interval(ref, cand, BuildSpread(0.0, 4)) == nested_interval(ref, cand, None)


def test_an_interval_at_an_extreme_confidence_opens_to_infinity_instead_of_raising() -> None:
    """Three rounds at 1 - 3.3e-7 (a run of many floors and looks): the t quantile with 2 degrees of freedom is about
    1700, and exp of the upper bound is past the float range. The interval is [0, inf], which no floor can pass or
    fail; seen in a run of the A/A family on a busy CPU."""
    ref, cand = [[4.049, 4.626, 3.854]], [[4.298, 3.806, 4.514]]
    got = nested_interval(ref, cand, None, 1 - 3.3e-7)
    assert got is not None and got.low == 0.0 and got.high == math.inf
    assert against_floor(got, 1.0) == UNKNOWN


FLOOR_ROUNDS = Path(__file__).parent / "data" / "h100-fp8-floor-rounds-2026-11-26.json"


def test_rounds_cannot_settle_a_floor_that_the_builds_spread_alone_straddles() -> None:
    """The H100's FP8 floors in a real main job: at batch 1 the family added rounds to 59 (cold) and 60 (warm), and at
    batch 64 to 43 (warm), and each floor stayed inconclusive. With no round-to-round spread at all, the builds'
    spread still straddled the floor: those rounds could not have settled it. The batch-64 cold floor passed."""
    data = json.loads(FLOOR_ROUNDS.read_text())
    level = family_wise(0.95, 2 * 3)  # two floors, three looks each
    for run, floor, outcome, rounds in [("cold b1", 1.024, UNKNOWN, 59), ("warm b1", 1.024, UNKNOWN, 60),
                                        ("warm b64", 1.124, UNKNOWN, 43), ("cold b64", 1.124, PASS, 20)]:  # fmt: skip
        d = data[run]
        spread = BuildSpread(**d["spread"])
        got = nested_interval(d["fp16"], d["fp8"], spread, level)
        assert got is not None and got.n == rounds and against_floor(got, floor) == outcome, run
        ahead = (rounds, 2 * rounds, 4 * rounds, 64 * rounds, math.inf)
        assert [settles(d["fp16"], d["fp8"], spread, floor, level, r) for r in ahead] == [outcome == PASS] * 5, run
        assert settles(d["fp16"], d["fp8"], None, floor, level), run  # without builds, enough rounds settle anything
    cold = data["cold b1"]
    shown = nested_interval(cold["fp16"], cold["fp8"], BuildSpread(**cold["spread"]), level)
    assert shown is not None and shown.text() == "1.06x [1.00, 1.13]"  # as the run's failure message printed it


@settings(max_examples=60, deadline=None)
@given(
    shift=st.floats(-0.05, 0.05),
    sd_round=st.floats(0.0005, 0.02),
    var_builds=st.floats(0.0, 4e-4),
    n=st.integers(3, 30),
    seed=st.integers(0, 2**16),
)
def test_settles_now_is_the_intervals_verdict_and_more_rounds_only_help(
    shift: float, sd_round: float, var_builds: float, n: int, seed: int
) -> None:
    """At the rounds taken, `settles` says what the interval says. With endless rounds only the builds' part is left:
    settled exactly when the estimate lies further from the floor than t(builds' df) x the builds' standard error.
    (Not monotone in between: Satterthwaite's degrees of freedom fall toward the builds' own as rounds grow, so a
    finite number of rounds can settle what endless rounds do not; the family asks at the looks it can still take.)"""
    from scipy.stats import t

    rng = random.Random(seed)
    ref = [[rng.gauss(0, sd_round) for _ in range(n)] for _ in range(2)]
    cand = [[-shift + rng.gauss(0, sd_round) for _ in range(n)] for _ in range(2)]
    spread = BuildSpread(var_builds, 4)
    floor = 1.01
    now = nested_interval(ref, cand, spread)
    assert now is not None
    straddles = now.low < floor <= now.high
    assert settles(ref, cand, spread, floor, rounds=n) != straddles or abs(math.log(now.low / floor)) < 1e-9
    mean = math.log(now.estimate)
    endless = abs(mean - math.log(floor)) > float(t.ppf(0.975, 4)) * math.sqrt(var_builds)  # var x (1/2 + 1/2)
    assert settles(ref, cand, spread, floor, rounds=math.inf) == endless


# -- spreads moderated by the matrix (Smyth 2004) ---------------------------------------------------------------
def test_trigamma_inverse_undoes_trigamma() -> None:
    from scipy.special import polygamma

    from pytest_vitperf.verdicts.spreads import _trigamma_inverse

    for y in (0.01, 0.5, 3.0, 100.0, 1e4):
        assert _trigamma_inverse(float(polygamma(1, y))) == pytest.approx(y, rel=1e-6)


def test_the_prior_recovers_the_scale_and_the_degrees_of_freedom_of_the_rows_variances() -> None:
    """Rows whose true variances are drawn from a scaled inverse chi-square (s0 = 1%, d0 = 6), each estimated from
    4 runs (3 df): the moments fit finds s0 and d0 again, within what 400 rows allow."""
    rng = np.random.default_rng(11)
    s0, d0, d = 0.01, 6, 3
    true_var = s0**2 * d0 / rng.chisquare(d0, 400)
    prior = spread_prior([Spread(float(np.sqrt(v * rng.chisquare(d) / d)), d, 4) for v in true_var])
    assert prior is not None
    assert prior.var == pytest.approx(s0**2, rel=0.15) and 3 < prior.df < 12 and prior.slope == 0
    # One shared variance (d0 infinite): a large df, the variance within sampling error.
    shared = spread_prior([Spread(float(0.01 * np.sqrt(rng.chisquare(d) / d)), d, 4) for _ in range(400)])
    assert shared is not None and shared.var == pytest.approx(1e-4, rel=0.15) and shared.df > 6


def test_the_prior_follows_a_trend_in_latency() -> None:
    """Variances that halve for every e-fold of latency (a slope of -0.7 in log variance), as short GEMMs spread more
    than whole ViTs: the fitted line finds the slope, and the variance it gives a row is that row's, not the
    matrix's average."""
    rng = np.random.default_rng(12)
    at = rng.uniform(math.log(0.01), math.log(10.0), 400)
    true_var = 1e-4 * np.exp(-0.7 * (at - at.mean()))
    rows = [Spread(float(np.sqrt(v * rng.chisquare(3) / 3)), 3, 4) for v in true_var]
    prior = spread_prior(rows, list(at))
    assert prior is not None and prior.slope == pytest.approx(-0.7, abs=0.1) and prior.df > 6
    for x in (math.log(0.02), math.log(5.0)):
        assert prior.var_at(x) == pytest.approx(1e-4 * math.exp(-0.7 * (x - at.mean())), rel=0.25)
    assert spread_prior(rows[:3], list(at[:3])) is not None  # three rows: no line, the flat prior
    # Latencies within a factor of 2 of each other: no line, whose slope would be noise.
    near = spread_prior(rows[:20], [math.log(10.0) + 0.01 * i for i in range(20)])
    assert near is not None and near.slope == 0
    # sd = sqrt(var): x exp(0.35 ln 10) = x2.24 for every 10x shorter
    text = "sd 1.00% at 0.5 ms, x2.24 for every 10x shorter, worth 3.3 df"
    assert Prior(1e-4, 3.3, -0.7, math.log(0.5)).text() == text


def test_a_prior_needs_three_rows_with_a_spread() -> None:
    two = [Spread(0.01, 4, 5), Spread(0.02, 4, 5)]
    assert spread_prior(two) is None
    assert spread_prior([*two, Spread(0.0, 4, 5)]) is None  # a row without spread lends nothing
    assert spread_prior([*two, Spread(0.015, 4, 5)]) is not None


def test_moderation_weighs_the_two_variances_by_their_degrees_of_freedom() -> None:
    own = Spread(0.015, 2, 3)
    m = own.moderated(Prior(0.01**2, 1.5))
    assert m.df == 3.5 and m.n_reference == 3
    assert m.sd_log == pytest.approx(math.sqrt((1.5 * 1e-4 + 2 * 2.25e-4) / 3.5))
    assert own.moderated(None) is own
    # The prior never weighs more than the row's own runs.
    capped = own.moderated(Prior(0.01**2, 50))
    assert capped.df == 4 and capped.sd_log == pytest.approx(math.sqrt((2 * 1e-4 + 2 * 2.25e-4) / 4))
    # A trend: the prior is read at the row's latency.
    trend = Prior(1e-4, 2, slope=-1.0, center=0.0)
    assert own.moderated(trend, at=-1.0).sd_log == pytest.approx(math.sqrt((2 * 1e-4 * math.e + 2 * 2.25e-4) / 4))


def test_a_row_far_noisier_than_the_prior_keeps_its_own_spread() -> None:
    """Beyond the prior's 95th percentile (F on 2 and 50 df: 3.18 times its variance) a row is not shrunk; below it,
    it is. A prior of few df is itself uncertain, and lets a larger ratio pass (F on 2 and 1.5 df: 40)."""
    from scipy.stats import f

    prior = Prior(0.01**2, 50)
    edge = 0.01 * math.sqrt(float(f.ppf(0.95, 2, 50)))
    assert Spread(edge * 1.01, 2, 3).moderated(prior) == Spread(edge * 1.01, 2, 3)
    assert Spread(edge * 0.99, 2, 3).moderated(prior).df == 4
    assert Spread(0.03, 2, 3).moderated(Prior(0.01**2, 1.5)).df == 3.5


def test_a_family_clearly_noisier_than_the_matrix_lends_its_pooled_spread() -> None:
    """A row's prior is its group's other rows' pooled variance where that lies beyond the matrix's by F's 95th
    percentile (on their df and the prior's), at the matrix's weight; else the matrix's. A row does not lend to
    itself, and a row of no group, or a group of one, keeps the matrix's."""
    from scipy.stats import f

    prior = Prior(0.004**2, 6)
    edge = 0.004 * math.sqrt(float(f.ppf(0.95, 6, 6)))  # two other rows of 3 df each
    groups = {k: "vit_small b1" for k in ("fp16", "fp8", "int8")} | {"bf16": "vit_base b1"}
    at = dict.fromkeys([*groups, "alone"], 0.0)
    noisy = {"fp16": Spread(edge * 1.01, 3, 4), "fp8": Spread(edge * 1.01, 3, 4), "int8": Spread(0.0036, 3, 4)}
    spreads = {**noisy, "bf16": Spread(0.03, 3, 4), "alone": Spread(0.03, 3, 4)}
    lent = group_prior(prior, "int8", spreads, at, groups)
    assert lent == Prior((edge * 1.01) ** 2, 6)
    quiet = {**spreads, "fp8": Spread(edge * 0.9, 3, 4), "fp16": Spread(edge * 0.9, 3, 4)}
    assert group_prior(prior, "int8", quiet, at, groups) is prior
    # the int8 row's own spread does not enter its group's, however large
    assert group_prior(prior, "int8", {**spreads, "int8": Spread(1.0, 3, 4)}, at, groups) == lent
    assert group_prior(prior, "bf16", spreads, at, groups) is prior  # alone in its group
    assert group_prior(prior, "alone", spreads, at, groups) is prior  # no group
    assert group_prior(None, "int8", spreads, at, groups) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-4, 0.05), min_size=2, max_size=6), st.floats(1e-4, 0.05), st.floats(0.5, 40.0))
def test_a_group_only_ever_widens_a_rows_prior(sds: list[float], prior_sd: float, prior_df: float) -> None:
    prior = Prior(prior_sd**2, prior_df)
    spreads = {i: Spread(sd, 3, 4) for i, sd in enumerate(sds)}
    got = group_prior(prior, 0, spreads, dict.fromkeys(spreads, 0.0), dict.fromkeys(spreads, "family"))
    assert got is not None and got.df == prior.df and got.var >= prior.var


def test_wilsons_interval_is_the_closed_form() -> None:
    """scipy's Wilson interval against its formula: centre (k + z^2/2) / (n + z^2), half-width
    z / (n + z^2) * sqrt(k (n - k) / n + z^2 / 4)."""
    z = 1.959963984540054
    for k, n in ((81, 263), (359, 360), (0, 50)):
        centre, half = (k + z * z / 2) / (n + z * z), z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4)
        share = wilson(k, n)
        assert (share.low, share.high) == pytest.approx((centre - half, centre + half), abs=1e-9)
        assert share.estimate == k / n


def test_mcnemars_exact_test_counts_only_the_changed_items() -> None:
    # 6 against 1 discordant: two-sided P(X <= 1 | 7, 1/2) = 2 * 8 / 128
    assert mcnemar_exact(6, 1) == pytest.approx(0.125) and mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(20, 0) < 1e-5


def test_the_paired_interval_covers_the_true_difference_as_often_as_it_says() -> None:
    """Newcombe's method 10 on simulated paired verdicts (360 images, as the digits task): its 95% intervals hold the
    true difference in 93-98.5% of 1500 draws, for a precision that loses images and one that loses and gains."""
    rng = np.random.default_rng(35)
    for cells in ((0.95, 0.02, 0.0, 0.03), (0.93, 0.02, 0.01, 0.04)):
        truth = cells[1] - cells[2]
        counts = rng.multinomial(360, cells, size=1500)
        covered = [paired_difference(*map(int, c)).contains(truth) for c in counts]
        assert 0.93 <= np.mean(covered) <= 0.985, (cells, np.mean(covered))


@given(st.integers(0, 300), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_the_paired_interval_holds_its_estimate_within_minus_one_to_one(a: int, b: int, c: int, d: int) -> None:
    if a + b + c + d == 0:
        return
    share = paired_difference(a, b, c, d)
    assert -1.0 <= share.low <= share.estimate <= share.high <= 1.0
    assert share.estimate == pytest.approx((b - c) / (a + b + c + d))


def test_pairing_narrows_the_interval_when_the_verdicts_agree() -> None:
    """The same two accuracies, once from verdicts that mostly agree and once as if they were independent (phi 0):
    the paired interval is the narrower, which is why every image is judged by both."""
    paired = paired_difference(340, 6, 2, 12)  # 96.1% against 95.0%, 8 images changed
    p1, p2 = 346 / 360, 342 / 360
    w1, w2 = wilson(346, 360), wilson(342, 360)
    unpaired = math.hypot(p1 - w1.low, w2.high - p2) + math.hypot(w1.high - p1, p2 - w2.low)
    assert paired.high - paired.low < 0.7 * unpaired

