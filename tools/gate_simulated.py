"""The stored-baseline gate under simulated A/A: how often does an identical rerun flag anything, and what can a row
see, with each row's own spread and with the spread moderated by the matrix (the gate's default)?

    python tools/gate_simulated.py [--runs-per-row 4] [--rows 40 80] [--matrices 400] [--seed 1]

Each matrix is a set of rows calibrated by the same number of runs (log-normal medians around each row's true
spread), then one more identical run is gated the way the gate judges it (verdicts/baselines/compare.py, no
practical threshold): every row at the run's Bonferroni share, Benjamini-Hochberg over the rows. The rows' true
spreads come from four matrices: one spread for all (1%); spreads drawn from a scaled inverse chi-square (s0 = 1%,
5 df); two clusters that latency explains (0.5% at 5 ms, 2% at 20 us, as the H100's ViT and GEMM rows); the same two
clusters at random latencies, which no trend explains. The share of matrices that flag anything is printed with its
Clopper-Pearson 95% interval; the nominal rate is 5%.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
from scipy.stats import binomtest

from pytest_vitperf.report.tables import table
from pytest_vitperf.store.baselines import Baseline, BaselineKey, Run
from pytest_vitperf.verdicts.baselines.compare import WITHIN_NOISE, compare, matrix_prior, settle

UUID = "GPU-simulated"
MATRICES = ("one spread", "inverse chi-square", "two clusters by latency", "two clusters at random")


def _truth(matrix: str, rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each row's latency (ms) and true sd of log median between processes."""
    half = np.arange(rows) < rows // 2
    if matrix == "one spread":
        return np.full(rows, 1.0), np.full(rows, 0.01)
    if matrix == "inverse chi-square":
        return np.exp(rng.uniform(np.log(0.01), np.log(10.0), rows)), 0.01 * np.sqrt(5 / rng.chisquare(5, rows))
    sds = np.where(half, 0.005, 0.02)
    if matrix == "two clusters by latency":
        return np.where(half, 5.0, 0.02), sds
    return np.where(rng.random(rows) < 0.5, 5.0, 0.02), sds


def simulate(matrix: str, rows: int, n: int, matrices: int, moderated: bool, seed: int) -> tuple[int, float]:
    """(matrices that flagged anything, the median 'can see' of their rows)."""
    rng = np.random.default_rng(seed)
    key = BaselineKey("torch", "0", "simulated", "m", "fp16", 1)
    flagged, seen = 0, []
    rate, level = 0.05, 0.05 / rows
    for _ in range(matrices):
        ms, sds = _truth(matrix, rows, rng)
        calibrated = [
            replace(Baseline(key, "median", float(m), {}, (), {}, {}),
                    runs=tuple(Run(float(x), "", UUID, None, 0) for x in m * np.exp(rng.normal(0, sd, n))))
            for m, sd in zip(ms, sds, strict=True)
        ]  # fmt: skip
        prior = matrix_prior(calibrated, UUID) if moderated else None
        now = ms * np.exp(rng.normal(0, sds))
        cs = [compare(b, float(x), gpu_uuid=UUID, threshold=0.0, level=level, prior=prior)
              for b, x in zip(calibrated, now, strict=True)]  # fmt: skip
        flagged += any(c is not None and c.change != WITHIN_NOISE for c in settle(cs, rate))
        seen += [c.detectable for c in cs if c.detectable is not None]
    return flagged, float(np.median(seen))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-per-row", type=int, default=4)
    ap.add_argument("--rows", type=int, nargs="+", default=[40, 80])
    ap.add_argument("--matrices", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    out = []
    for rows in args.rows:
        for matrix in MATRICES:
            for moderated in (False, True):
                k, seen = simulate(matrix, rows, args.runs_per_row, args.matrices, moderated, args.seed)
                ci = binomtest(k, args.matrices).proportion_ci(0.95)
                out.append((matrix, str(rows), "moderated" if moderated else "own",
                            f"{k / args.matrices:.1%} [{ci.low:.1%}, {ci.high:.1%}]", f"{seen:.1%}"))  # fmt: skip
    header = ("true spreads", "rows", "spread", "A/A runs flagging anything", "median can see")
    print(f"{args.matrices} simulated matrices each, {args.runs_per_row} runs per row, a 5% false-alarm rate")
    for line in table(header, out):
        print(line)


if __name__ == "__main__":
    main()
