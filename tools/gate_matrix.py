"""The stored-baseline gate judged again, offline, over runs kept as --benchmark-json files: how many rows each run
flags with each row's own spread and with the spread moderated by the other rows' (the gate's default), and the
verdicts of the rows a known delay was injected into.

    python tools/gate_matrix.py BASELINE_DIR RUN.json [RUN.json ...] [--injected PRECISION] [--false-alarm 0.05]

Each run is judged as the gate judges it: every row against its baseline's runs at the run's false-alarm rate,
Benjamini-Hochberg over the run's rows, and the practical threshold (verdicts/baselines/compare.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_vitperf.measure.measurement import read_benchmark_json
from pytest_vitperf.report.tables import table
from pytest_vitperf.store.baselines import JsonDirStorage
from pytest_vitperf.verdicts.baselines.compare import IMPROVEMENT, REGRESSION, compare, settle
from pytest_vitperf.verdicts.baselines.gate import key_for, prior_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baselines", type=Path)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--injected", default="", help="the precision that carried a known delay")
    ap.add_argument("--false-alarm", type=float, default=0.05)
    args = ap.parse_args()
    storage = JsonDirStorage(args.baselines)
    rows = []
    for path in args.runs:
        judged = {}
        for moderated in (False, True):
            ms = [(m, b) for m in read_benchmark_json(path) if (b := storage.get(key_for(m))) is not None]
            level = args.false_alarm / max(1, len(ms))
            cs = [compare(b, m.median, current_mhz=m.sm_mhz, gpu_uuid=m.spec.gpu_uuid or "", level=level,
                          prior=prior_for(storage, key_for(m), m.spec.gpu_uuid or "") if moderated else None)
                  for m, b in ms]  # fmt: skip
            judged[moderated] = list(zip(ms, settle(cs, args.false_alarm), strict=True))
        for moderated, pairs in judged.items():
            known = [(m, c) for (m, _), c in pairs if c is not None and c.sd_log is not None]
            others = [(m, c) for m, c in known if m.spec.precision != args.injected]
            flagged = [f"{m.spec.model} {m.spec.precision} b{m.spec.batch} {c.delta:+.1%}" for m, c in others
                       if c.change in (REGRESSION, IMPROVEMENT)]  # fmt: skip
            injected = [f"b{m.spec.batch} {c.delta:+.1%}: {c.change} (sees {c.detectable:.1%})" for m, c in known
                        if m.spec.precision == args.injected and m.spec.model.startswith("vit")]  # fmt: skip
            seen = sorted(c.detectable for _, c in others if c.detectable is not None)
            board = known[0][1].board if known else "-"
            rows.append((path.name, "moderated" if moderated else "own", board, str(len(known)), str(len(flagged)),
                         f"{seen[len(seen) // 2]:.1%}" if seen else "-", "; ".join(injected) or "-",
                         "; ".join(flagged) or "-"))  # fmt: skip
    header = ("run", "spread", "board", "rows judged", "others flagged", "median can see", "injected", "flagged")
    for line in table(header, rows):
        print(line)


if __name__ == "__main__":
    main()
