"""Change-point libraries on series like this project's: which finds the steps, and how many false ones.

    python scripts/compare_change_points.py [--series 200] [--method pelt edivisive]

Each series has 60 runs of a 5 ms median with CoV 1%, a +3% step at run 20 and a -5% step at run 40; the null series
have no step. A step counts as found within 2 runs of the truth. Methods (each runs where its package imports):
- pelt: ruptures' PELT as `vitperf history` runs it (pytest_vitperf.baselines.history.find_steps);
- edivisive: MongoDB's signal-processing-algorithms E-divisive (p 0.05, 100 permutations), the method of Apache
  Otava. It pins numpy<2 and setuptools<71, so it needs an environment of its own.
Prints one JSON line per method.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np

TRUTH = (20, 40)


def stepped(seed: int, n: int = 60) -> np.ndarray:
    level = np.ones(n)
    level[20:40], level[40:] = 1.03, 1.03 * 0.95
    return 5.0 * level * (1 + 0.01 * np.random.default_rng(seed).standard_normal(n))


def flat(seed: int, n: int = 60) -> np.ndarray:
    return 5.0 * (1 + 0.01 * np.random.default_rng(10_000 + seed).standard_normal(n))


def pelt(values: np.ndarray) -> list[int]:
    from pytest_vitperf.baselines.history import find_steps

    return find_steps(list(values))


def edivisive(values: np.ndarray) -> list[int]:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    return sorted(e_divisive(values, pvalue=0.05, permutations=100))


def score(method: Callable[[np.ndarray], list[int]], count: int) -> dict[str, float]:
    found = false = null_false = 0
    start = time.perf_counter()
    for seed in range(count):
        cuts = method(stepped(seed))
        hits = [t for t in TRUTH if any(abs(c - t) <= 2 for c in cuts)]
        found += len(hits)
        false += sum(1 for c in cuts if all(abs(c - t) > 2 for t in TRUTH))
        null_false += len(method(flat(seed)))
    return {
        "recall": found / (len(TRUTH) * count),
        "false_per_series": false / count,
        "false_per_null_series": null_false / count,
        "ms_per_series": 1e3 * (time.perf_counter() - start) / (2 * count),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--method", nargs="+", default=["pelt", "edivisive"], choices=["pelt", "edivisive"])
    args = parser.parse_args()
    methods = {"pelt": pelt, "edivisive": edivisive}
    for name in args.method:
        try:
            result: dict[str, object] = {"method": name, **score(methods[name], args.series)}
        except ImportError as exc:
            result = {"method": name, "skipped": f"cannot import: {exc}"}
        print(json.dumps(result))


if __name__ == "__main__":
    main()
