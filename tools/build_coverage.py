"""How often a speedup's interval over interleaved rounds and builds covers the truth, in simulated families: each
round's clock moves every engine alike, each build of an engine is off by N(0, SD_BUILD), each round of each build by
N(0, SD_ROUND), and each precision's rounds by N(0, SD_PAIR) more (a clock that moves one precision more than another).
An A/A pair: the truth is 1.00.

    python tools/build_coverage.py [--families 2000] [--seed 1]
    python tools/build_coverage.py --power SD_BUILD [--delay 0.01] [--builds 2 3 4 6]

Prints, per setting, the share of intervals that contain 1.00 and their mean half-width, for the interval the plugin
makes (builds.nested_interval over builds.build_spread) and for the older one (the rounds' variance plus the builds'
variance clipped at 0), which a spread record without its mean squares still gets.

With --power: what a run can see. One precision of the family is slower by --delay (its builds too, as
--vitperf-inject-delay makes it), builds are off by SD_BUILD, and per build count the share of its intervals that
lie wholly below 1.00, at 95% and at the level an A/A run judges at (99.58%).
"""

from __future__ import annotations

import argparse
import math
import random

from pytest_vitperf.measure.rounds import MAX_LOOKS
from pytest_vitperf.verdicts.builds import BuildSpread, build_spread, nested_interval
from pytest_vitperf.verdicts.stats import family_wise

AA_LEVEL = family_wise(0.95, 4 * MAX_LOOKS)  # an A/A run's 99.58%: four floors (tools/aa_floors.json, two batches)

# (SD_BUILD, SD_ROUND, SD_PAIR), logs: the H100's batch 1 (builds dominate), its batch 64 (alike), none, and pairs
SETTINGS = [(0.003, 0.0005, 0.0), (0.001, 0.002, 0.0), (0.0005, 0.002, 0.0), (0.0, 0.002, 0.0), (0.0005, 0.002, 0.001)]


def family(rng: random.Random, sd_build: float, sd_round: float, sd_pair: float, precisions: int = 5,
           builds: int = 2, rounds: int = 20, delay: float = 0.0) -> list[list[list[float]]]:  # fmt: skip
    """precisions x builds x rounds log times of one simulated family, every precision the same engine but the
    second, which is slower by `delay` (a ratio: 0.01 is +1%)."""
    clock = [rng.gauss(0, 0.003) for _ in range(rounds)]
    out = []
    for p in range(precisions):
        pair = [rng.gauss(0, sd_pair) for _ in range(rounds)]
        shift = math.log1p(delay) if p == 1 else 0.0
        out.append([[shift + b + clock[i] + pair[i] + rng.gauss(0, sd_round) for i in range(rounds)]
                    for b in (rng.gauss(0, sd_build) for _ in range(builds))])  # fmt: skip
    return out


def coverage(setting: tuple[float, float, float], families: int, seed: int) -> dict[str, tuple[float, float]]:
    """{"now": (share covering 1.00, mean half-width in log), "older": ...} over `families` A/A pairs."""
    rng = random.Random(seed)
    hits = {"now": 0, "older": 0}
    width = {"now": 0.0, "older": 0.0}
    for _ in range(families):
        f = family(rng, *setting)
        spread = build_spread(f)
        assert spread is not None
        for key, s in (("now", spread), ("older", BuildSpread(spread.var, spread.df))):
            got = nested_interval(f[0], f[1], s)
            assert got is not None
            hits[key] += got.contains(1.0)
            width[key] += math.log(got.high / got.low) / 2
    return {k: (hits[k] / families, width[k] / families) for k in hits}


def power(sd_build: float, delay: float, builds: int, families: int, seed: int,
          levels: tuple[float, ...] = (0.95, AA_LEVEL)) -> dict[float, float]:
    """{level: share of the delayed precision's intervals wholly below 1.00} over `families` simulated families
    whose rounds vary as the H100's batch 1 did (0.05%)."""
    rng = random.Random(seed)
    seen = dict.fromkeys(levels, 0)
    for _ in range(families):
        f = family(rng, sd_build, 0.0005, 0.0, builds=builds, delay=delay)
        spread = build_spread(f)
        for level in levels:
            got = nested_interval(f[0], f[1], spread, level)
            seen[level] += got is not None and got.high < 1.0
    return {level: n / families for level, n in seen.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--power", type=float, metavar="SD_BUILD", help="what a run can see, builds off by SD_BUILD")
    ap.add_argument("--delay", type=float, default=0.01)
    ap.add_argument("--builds", type=int, nargs="+", default=[2, 3, 4, 6])
    args = ap.parse_args()
    if args.power is not None:
        print(f"builds off by {args.power:.2%}, one precision {args.delay:+.1%}: share of its intervals below 1.00")
        print(f"builds  at 95%  at {AA_LEVEL:.2%}")
        for k in args.builds:
            seen = power(args.power, args.delay, k, args.families, args.seed)
            print(f"{k:6d}  {seen[0.95]:6.1%}  {seen[AA_LEVEL]:9.1%}")
        return
    print("sd build  sd round  sd pair  covers 1.00 (now)  half-width  covers 1.00 (older)  half-width")
    for setting in SETTINGS:
        got = coverage(setting, args.families, args.seed)
        (now, w_now), (older, w_older) = got["now"], got["older"]
        print(f"{setting[0]:8.2%}  {setting[1]:8.2%}  {setting[2]:7.2%}  {now:17.1%}  {w_now:10.3%}  {older:19.1%}  "
              f"{w_older:10.3%}")


if __name__ == "__main__":
    main()
