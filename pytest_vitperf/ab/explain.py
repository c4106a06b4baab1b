"""`vitperf ab --explain`: where a SLOWER or FASTER row's time went, from one more process per side that profiles it.

The profile processes come after the rounds and are never among them. Each loads its side's prepared builds, runs
only the tests that measured the rows it explains, in three rounds of one build, and profiles every engine
`kernels.PROFILES` times (--vitperf-kernels). The two sides' profiles of a row are then compared kernel by kernel
(measure/kernel_diff.py). A speedup row is explained by its latency row, whose change it carries.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.options import BUILDS, KERNELS, ROUND_BUDGET_S, ROUNDS

if TYPE_CHECKING:
    from pytest_vitperf.measure.kernel_diff import KernelDiff
    from pytest_vitperf.measure.kernels import Breakdown
    from pytest_vitperf.verdicts.ab import Row

LABEL = "explain"


def chosen(rows: list[Row], every: bool) -> list[str]:
    """The latency rows to explain: those SLOWER or FASTER in time or as a speedup (every row with `every`)."""
    from pytest_vitperf.verdicts.ab import FASTER, LATENCY, SLOWER

    moved = {r.name for r in rows if every or r.verdict in (SLOWER, FASTER)}
    return sorted({r.name for r in rows if r.what == LATENCY and r.name in moved})


def profile_args(tests: list[str]) -> list[str]:
    """What a side's profile process adds to the suite's arguments: only these tests (a family's first test still
    measures its FP16 reference with them), three rounds of one build, and the kernel profiles."""
    return ["-k", " or ".join(tests), f"{ROUNDS}=3", f"{BUILDS}=1", f"{ROUND_BUDGET_S}=0", KERNELS]


def profiles_of(path: Path) -> dict[str, Breakdown]:
    """Each row's kernel breakdown (its profiles, and its module profiles where the backend gave them) from a
    profile process's --benchmark-json."""
    from pytest_vitperf.measure.kernels import Breakdown
    from pytest_vitperf.measure.measurement import read_benchmark_json

    out = {}
    for m in read_benchmark_json(path):
        kernels = m.spec.options.get("kernels")
        if isinstance(kernels, dict):
            out[f"{m.spec.model} {m.spec.precision} b{m.spec.batch}"] = Breakdown.from_dict(kernels)
    return out


MOVED = 0.01  # in an A/A (H100), groups of one pair of profile processes moved by up to 0.9% of the row's time


def explain(names: list[str], run: Any, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Profile `names` once more per side through `run(tasks, args)` (ab's `_in_turn`), and compare them. Returns
    the JSON's "explain" entry: each row's difference, or why there is none, and the cost per row. A group moves
    only by MOVED of the row's time or more (half the practical threshold where that is more): one process's
    profiles cannot see that process's own draw (measure/kernel_diff.py)."""
    from pytest_vitperf.ab.plan import tests_of
    from pytest_vitperf.measure.kernel_diff import diff

    start = time.monotonic()
    found = tests_of(work)  # node ids; -k reads the test names
    tests = sorted({found[name].rsplit("::", 1)[-1] for name in names if name in found})
    run([(LABEL, "A"), (LABEL, "B")], argparse.Namespace(**{**vars(args), "pytest_args": [
        *args.pytest_args, *profile_args(tests)]}))  # fmt: skip
    a, b = profiles_of(work / f"{LABEL}-A.json"), profiles_of(work / f"{LABEL}-B.json")
    rows: dict[str, Any] = {}
    for name in names:
        if name in a and name in b and a[name].profiles and b[name].profiles:
            rows[name] = diff(a[name].profiles, b[name].profiles, args.confidence, max(MOVED, args.threshold / 2),
                              a[name].modules, b[name].modules)  # fmt: skip
        else:
            rows[name] = "not profiled: its engine gave no kernel profile (a backend without one, or not run)"
    return {"rows": rows, "seconds_per_row": (time.monotonic() - start) / max(1, len(names))}


def markdown(explained: dict[str, Any]) -> list[str]:
    """The explanations under the verdict table."""
    out = [f"### Where the time went ({explained['seconds_per_row']:.0f} s of profiling per explained row)"]
    for name, d in explained["rows"].items():
        out += ["", f"#### {name}", ""]
        out += d.markdown() if not isinstance(d, str) else [d]
    return out


def as_json(explained: dict[str, Any]) -> dict[str, Any]:
    rows: dict[str, KernelDiff | str] = explained["rows"]
    return {"seconds_per_row": explained["seconds_per_row"],
            "rows": {n: d if isinstance(d, str) else d.as_dict() for n, d in rows.items()}}  # fmt: skip
