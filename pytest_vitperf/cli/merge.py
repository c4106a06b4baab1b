"""`vitperf merge`: the shards of one run (`--vitperf-shard K/N`, one a host) joined into one report and one gate.

Each shard leaves its results in its --benchmark-json. The merge prints the summary a single run would print, with
each row's GPU, and settles the baseline gate once over every shard's rows (one Benjamini-Hochberg pass), so that N
shards raise no more false alarms than one run. The floor verdicts were judged in the shards, each at the whole
run's confidence (a shard counts the floors of every shard).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_vitperf.verdicts.stats import FAIL


class Lines:
    """What the terminal summary writes to, on stdout."""

    def write_sep(self, sep: str, title: str) -> None:
        print(f" {title} ".center(100, sep))

    def write_line(self, line: str) -> None:
        print(line)


def _merge(args: argparse.Namespace) -> int:
    from pytest_vitperf.outputs import settle, summary, tail
    from pytest_vitperf.results import merged

    vs = merged(args.results)
    regressed = settle(vs)
    summary(Lines(), vs)
    tail(Lines(), vs)
    failed = [v.candidate.spec.label for v in vs.verdicts.values() if v.outcome == FAIL]
    print(f"vitperf merge: {len(args.results)} shard(s), {len(vs.measurements)} measurement(s), "
          f"{len(vs.verdicts)} speedup(s): {len(failed)} below their floor{': ' + ', '.join(failed) if failed else ''}"
          f"; the baseline gate over all of them: {'a regression' if regressed else 'no regression'}")  # fmt: skip
    return 1 if failed or regressed else 0


def add(sub: Any) -> None:
    merge = sub.add_parser("merge", help="join the shards of one run (--vitperf-shard K/N) into one report and gate")
    merge.add_argument("results", nargs="+", type=Path, metavar="JSON",
                       help="each shard's --benchmark-json")  # fmt: skip
    merge.set_defaults(func=_merge)
