"""The speedup intervals of several runs side by side: which contain 1.00, which a floor judges how, how wide they
are. For A/A and sensitivity runs (tools/aa_precisions.py), one fresh process per --benchmark-json file.

    python tools/intervals.py RUN.json [RUN.json ...] [--floors tools/aa_floors.json] [--out summary.json]

Per run and speedup: the interval in time and in cycles at 95%, the rounds, and (with --floors) the verdict at the
level the run judged it (95% shared by the floors that matched its rows and MAX_LOOKS looks each, as the run shares
it). Then, per precision, how many runs' intervals contain 1.00 and how many floor verdicts came out each way.
A run whose JSON cannot be read (a process cut off while writing it) is left out with a line that says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from pytest_vitperf.core.precision import PRECISIONS, get_precision
from pytest_vitperf.measure.measurement import BenchmarkJsonError, read_benchmark_json
from pytest_vitperf.measure.rounds import MAX_LOOKS
from pytest_vitperf.report.tables import table
from pytest_vitperf.verdicts.floors import CYCLES, TIME, FloorsFile, Verdict, speedup_interval
from pytest_vitperf.verdicts.stats import family_wise


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--floors", type=Path)
    ap.add_argument("--precisions", help="comma-separated names to register first (A/A copies): imports aa_precisions")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.precisions:
        import aa_precisions  # noqa: F401  (registers the A/A copies)
    floors = FloorsFile.load(args.floors) if args.floors else None
    rows, records, levels = [], [], set()
    tally: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for path in args.runs:
        try:
            ms = read_benchmark_json(path)
        except BenchmarkJsonError as exc:
            print(f"left out: {exc}", file=sys.stderr)
            continue
        by = {(m.spec.model, m.spec.precision, m.spec.batch): m for m in ms}
        pairs = []
        for m in ms:
            s = m.spec
            if s.precision not in PRECISIONS or get_precision(s.precision).reference == s.precision:
                continue
            ref = by.get((s.model, get_precision(s.precision).reference, s.batch))
            if ref is not None:
                floor = None
                if floors is not None:
                    floor = floors.find(gpu=s.device, backend=s.backend, version=s.backend_version or "",
                                        model=s.model, batch=s.batch, precision=s.precision)  # fmt: skip
                pairs.append((ref, m, floor))
        level = family_wise(0.95, max(1, sum(f is not None for *_, f in pairs)) * MAX_LOOKS)
        levels.add(level)
        for ref, m, floor in pairs:
            s = m.spec
            t, c = speedup_interval(ref, m, 0.95, TIME), speedup_interval(ref, m, 0.95, CYCLES)
            if t is None:
                continue
            verdict = "-"
            if floor is not None:
                verdict = Verdict(ref, m, floor.min_speedup, judged_in=floor.judged_in, confidence=level).outcome
                verdict = f"{verdict} at {level:.2%}"
                tally[s.precision][f"floor {floor.min_speedup:.2f}: {verdict}"] += 1
            key = f"{s.precision} b{s.batch}"
            tally[key]["runs"] += 1
            tally[key]["contains 1.00"] += t.contains(1.0)
            judged = speedup_interval(ref, m, level, TIME)
            tally[key][f"contains 1.00 at {level:.2%}"] += judged is not None and judged.contains(1.0)
            tally[key]["slower (interval below 1.00)"] += t.high < 1.0
            info: dict[str, Any] = s.options.get("rounds", {})
            rows.append((path.name, s.precision, str(s.batch), t.text(), f"±{t.half_width:.2%}",
                         c.text() if c else "-", str(m.rounds_taken), str(info.get("looks", "-")),
                         f"{s.options.get('injected_delay', {}).get('rel', 0):.0%}", verdict))  # fmt: skip
            records.append({"run": str(path), "precision": s.precision, "batch": s.batch, "device": s.device,
                            "gpu_uuid": s.gpu_uuid, "time": t.to_dict(), "cycles": c.to_dict() if c else None,
                            "rounds": m.rounds_taken, "builds": m.builds, "verdict": verdict,
                            "floor": floor.min_speedup if floor else None})  # fmt: skip
    header = ("run", "precision", "batch", "vs fp16 (95%)", "half-width", "cycles (95%)", "rounds", "looks",
              "delay", "verdict")  # fmt: skip
    for line in table(header, rows):
        print(line)
    print()
    for what, counts in sorted(tally.items()):
        print(f"{what}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.out:
        args.out.write_text(json.dumps({"levels": sorted(levels), "records": records, "tally": tally}, indent=1))


if __name__ == "__main__":
    main()
