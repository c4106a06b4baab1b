"""`vitperf floors suggest`: floors for this GPU and backend version, from the intervals of runs made on it.

Each run is a `--benchmark-json` file of `pytest --gpu-bench suites/` (one fresh process each, the more the better:
the spread between processes is what a floor must stand). For each precision, model and batch, every run's speedup
interval is read; the suggested floor lies below all of them and above what a 5% slower candidate would read
(verdicts/floors.suggest). Each entry keeps its provenance: the runs, their commit and date, the intervals, the rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.cli import argtypes
from pytest_vitperf.options.parsers import parse_threshold
from pytest_vitperf.report.tables import table

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.floor_rules import Suggestion
    from pytest_vitperf.verdicts.stats import Interval

UNITS = ("auto", "time", "cycles")


def _version_glob(version: str | None) -> str:
    """'2.11.0+cu130' -> '2.11.*': a floor holds for a minor version, as floors.json keys them."""
    m = re.match(r"(\d+\.\d+)", version or "")
    return f"{m.group(1)}.*" if m else (version or "*")


def _run_facts(path: Path) -> dict[str, Any]:
    from pytest_vitperf.core.files import read_json
    from pytest_vitperf.measure.measurement import BenchmarkJsonError

    doc = read_json(path, BenchmarkJsonError)
    commit = doc.get("commit_info", {}) if isinstance(doc, dict) else {}
    return {"file": str(path), "date": doc.get("datetime", "") if isinstance(doc, dict) else "",
            "commit": commit.get("id", "")}  # fmt: skip


def _intervals(
    paths: list[Path], confidence: float
) -> tuple[dict[tuple[Any, ...], dict[str, list[Any]]], list[str], list[str]]:
    """(gpu, backend, version, model, batch, precision) -> unit -> one interval per run that measured it; the
    families that ended at their early look, whose intervals are the wider for it; and the rows whose two engines
    were the same compiled ones in every run."""
    from pytest_vitperf.core.precision import PRECISIONS, get_precision
    from pytest_vitperf.engines.gemms import shape_of
    from pytest_vitperf.engines.ready import compiled_hash
    from pytest_vitperf.measure.measurement import read_benchmark_json
    from pytest_vitperf.measure.rounds import ended_early
    from pytest_vitperf.verdicts.floors import CYCLES, TIME, speedup_interval

    found: dict[tuple[Any, ...], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    compiles: dict[str, list[tuple[str | None, str | None]]] = defaultdict(list)  # row -> each run's two engines
    early: set[str] = set()
    for path in paths:
        ms = [m for m in read_benchmark_json(path) if shape_of(m.spec.options) is None]
        early |= {f"{m.spec.model} b{m.spec.batch} in {path.name}" for m in ms
                  if ended_early(m.spec.options.get("rounds") or {})}  # fmt: skip
        by_key = {(m.spec.key, m.spec.gpu_uuid): m for m in ms}
        for m in ms:
            s = m.spec
            if s.precision not in PRECISIONS or get_precision(s.precision).reference == s.precision:
                continue
            ref = by_key.get(((s.model, get_precision(s.precision).reference, s.batch, s.backend), s.gpu_uuid))
            if ref is None:
                continue
            key = (s.device, s.backend, _version_glob(s.backend_version), s.model, s.batch, s.precision)
            compiles[f"{s.model} {s.precision} b{s.batch}"].append((compiled_hash(ref.spec.options),
                                                                   compiled_hash(s.options)))  # fmt: skip
            for unit in (TIME, CYCLES):
                interval = speedup_interval(ref, m, confidence, unit)
                if interval is not None:
                    found[key][unit].append(interval)
    # The same compiled engines in every run: one compile, whose kernels every run shares.
    one = sorted(row for row, seen in compiles.items() if len(seen) > 1 and None not in seen[0] and len(set(seen)) == 1)
    return found, sorted(early), one


def _unit(by_unit: dict[str, list[Any]], asked: str) -> str:
    """The unit asked for, or (auto) the one whose intervals spread least from run to run: on a power-capped GPU,
    cycles where the clock follows the work, time where the clock reading adds its own noise."""
    if asked != "auto":
        return asked
    return min(by_unit, key=lambda u: max(i.high for i in by_unit[u]) / min(i.low for i in by_unit[u]))


def _suggest(args: argparse.Namespace) -> int:
    from pytest_vitperf.verdicts.floor_rules import suggest
    from pytest_vitperf.verdicts.floors import FloorsFile

    if args.out is not None and args.out.exists():
        FloorsFile.load(args.out)  # a broken file is refused before any work, and never overwritten
    # The whole command, so that an entry can be made again as it was.
    command = " ".join(["vitperf floors suggest", f"--regression {args.regression:g}", f"--unit {args.unit}",
                        f"--confidence {args.confidence:g}"]
                       + ([f"--precisions {','.join(args.precisions)}"] if args.precisions else [])
                       + [str(p) for p in args.runs])  # fmt: skip
    rule = (f"midway between the lowest lower bound and what a {args.regression:.0%} slower candidate would read at "
            "most")  # fmt: skip
    return _write_floors(args, args.runs, command, lambda intervals, _: suggest(intervals, args.regression), rule)


def _write_floors(args: argparse.Namespace, paths: list[Path], command: str,
                  rule: Callable[[list[Interval], int], Suggestion], said: str) -> int:  # fmt: skip
    """The floors `rule` draws from the runs' intervals (and the number of rows it draws floors for, which a next
    run judges together): a table of them, merged into --out where there is one."""
    verb = f"vitperf floors {args.verb}"
    found, early, one_compile = _intervals(paths, args.confidence)
    if not found:
        print(f"{verb}: no speedup with an interval in these runs; measure in rounds with: "
              "pytest --gpu-bench suites/ --benchmark-json run.json", file=sys.stderr)  # fmt: skip
        return 1
    if early:
        print(f"{verb}: {', '.join(early)} ended at the early look, on fewer rounds: their intervals "
              "are wider than all the rounds would make them, and a floor is told from the change asked for less "
              "often; measure again with: pytest --gpu-bench suites/ --vitperf-first-look 0 --benchmark-json run.json",
              file=sys.stderr)  # fmt: skip
    if one_compile:
        print(f"{verb}: {', '.join(one_compile)} ran the same compiled engines in every run, so the "
              "runs' spread holds no compile draw; where compiles time their kernels (the default on a GPU), give "
              "each run an empty cache folder of its own: pytest --gpu-bench suites/test_vit_latency.py "
              "--vitperf-first-look 0 --vitperf-cache-dir c1 --benchmark-json run1.json", file=sys.stderr)  # fmt: skip
    runs = [_run_facts(p) for p in paths]
    drawn = sum(not args.precisions or key[-1] in args.precisions for key in found)
    entries, rows = [], []
    for key, by_unit in sorted(found.items(), key=str):
        gpu, backend, version, model, batch, precision = key
        if args.precisions and precision not in args.precisions:
            continue
        unit = _unit(by_unit, args.unit)
        intervals = by_unit.get(unit, [])
        if not intervals:
            continue
        s = rule(intervals, drawn)
        if s.floor is not None:
            # Down to the digits written, so that the floor stays under every interval it was drawn below.
            s = dataclasses.replace(s, floor=math.floor(s.floor * 1000 + 1e-9) / 1000)
        seen = f"{s.lowest:.3f}-{s.highest:.3f}x"
        rows.append((gpu, model, precision, str(batch), unit, str(len(intervals)), seen,
                     f"{s.floor:.3f}x" if s.floor is not None else f"none: {s.why}",
                     f"{s.regression:.1%}" if s.floor is not None else "-"))  # fmt: skip
        if s.floor is None:
            continue
        entries.append({
            "gpu": gpu, "backend": backend, "version": version, "model": model, "batch": batch,
            "precision": precision, "min_speedup": s.floor, "judged_in": unit,
            "source": f"{len(intervals)} run(s): {seen} in {unit} ({args.confidence:.0%} intervals)",
            "provenance": {
                "command": command,
                "runs": runs,
                "intervals": [[round(i.low, 4), round(i.high, 4)] for i in intervals],
                "rule": said,
            },
        })  # fmt: skip
    for line in table(("gpu", "model", "precision", "batch", "unit", "runs", "intervals", "floor", "catches"), rows):
        print(line)
    print("catches: the slowdown at which a run at the runs' mean would have its whole interval below the floor")
    if args.out is not None and entries:
        _merge(args.out, entries)
        print(f"wrote {len(entries)} floor(s) to {args.out}")
    return 0


def _read_by(pytest_args: list[str]) -> Path:
    """The floors file a run with these arguments reads: --vitperf-floors's, else floors.json beside the first test
    path given (suites/ or suites/test_vit_latency.py: suites/floors.json), else in this folder."""
    from pytest_vitperf.options import FLOORS
    from pytest_vitperf.verdicts.floors import FLOORS_FILE

    for i, a in enumerate(pytest_args):
        if a.startswith(f"{FLOORS}="):
            return Path(a.split("=", 1)[1])
        if a == FLOORS and i + 1 < len(pytest_args):
            return Path(pytest_args[i + 1])
    paths = [Path(a.split("::")[0]) for a in pytest_args if not a.startswith("-")]
    folder = next((p if p.is_dir() else p.parent for p in paths if p.exists()), Path())
    return folder / FLOORS_FILE


def _make(args: argparse.Namespace) -> int:
    """`vitperf floors make`: the suite in --runs fresh processes, each compiling in an empty cache folder of its
    own and measuring every round (no early look), then a floor per row at --false-alarm, into the file the suite
    reads."""
    from pytest_vitperf.core import processes
    from pytest_vitperf.measure.rounds import MAX_LOOKS
    from pytest_vitperf.options import LATENCY_SUITE
    from pytest_vitperf.verdicts.floor_rules import MIN_RUNS, at_false_alarm
    from pytest_vitperf.verdicts.floors import FloorsFile
    from pytest_vitperf.verdicts.stats import family_wise

    suite = args.pytest_args or [str(Path("suites") / LATENCY_SUITE)]
    args.out = args.out or _read_by(suite)
    if args.runs < MIN_RUNS:
        print(f"vitperf floors make: a spread between processes needs {MIN_RUNS} runs or more: vitperf floors make "
              f"--runs {MIN_RUNS} -- {' '.join(suite)}", file=sys.stderr)  # fmt: skip
        return 2
    if args.out.exists():
        FloorsFile.load(args.out)  # a broken file is refused before an hour of runs, and never overwritten
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="vitperf-floors-"))
    work.mkdir(parents=True, exist_ok=True)  # pytest-benchmark opens each run's JSON there before any test
    again = "vitperf floors make " + " ".join(shlex.quote(a) for a in sys.argv[3:])
    paths = []
    try:
        with processes.interruptible():
            for k in range(1, args.runs + 1):
                path = work / f"run{k}.json"
                path.unlink(missing_ok=True)
                cmd = [sys.executable, "-m", "pytest", "--gpu-bench", "-p", "no:cacheprovider", *suite,
                       "--vitperf-first-look=0", f"--vitperf-cache-dir={work / f'cache{k}'}",
                       f"--benchmark-json={path}"]  # fmt: skip
                print(f"== run {k} of {args.runs}: $ " + " ".join(shlex.quote(c) for c in cmd[1:]), flush=True)
                done = processes.run(cmd, stdout=subprocess.PIPE if args.quiet else None)
                if not path.exists() or path.stat().st_size == 0:  # pytest-benchmark opens it as pytest starts
                    print(f"vitperf floors make: run {k} exited {done.returncode} and wrote no results; fix it, then "
                          f"run again: {again}", file=sys.stderr)  # fmt: skip
                    return 1
                paths.append(path)
    except processes.Interrupted as exc:
        print(f"vitperf floors make: {exc}, and every process it started has ended; nothing was written to "
              f"{args.out}. Run again: {again}", file=sys.stderr)  # fmt: skip
        return exc.code
    command = f"vitperf floors make --runs {args.runs} --false-alarm {args.false_alarm:g} -- {' '.join(suite)}"
    said = (f"the lower {1 - args.false_alarm:.0%} prediction bound of a new run's estimate from {args.runs} fresh "
            "processes (Student's t), less the half-width of its interval as the next run judges it, at most the "
            "lowest lower bound")  # fmt: skip
    def rule(intervals: list[Interval], floors: int) -> Suggestion:  # judged as the next run judges them
        return at_false_alarm(intervals, args.false_alarm, family_wise(args.confidence, floors * MAX_LOOKS))

    code = _write_floors(args, paths, command, rule, said)
    if code == 0:
        print(f"the next run reads them from {args.out}: pytest --gpu-bench {' '.join(suite)}"
              + ("" if args.out == _read_by(suite) else f" --vitperf-floors {args.out}"))
    return code


def _key(e: dict[str, Any]) -> tuple[Any, ...]:
    """What a floor entry is for: two entries with the same key are one floor."""
    return (e["gpu"].lower(), e["backend"], e.get("version", "*"), e.get("model", "*"), e.get("batch", "*"),
            e["precision"])  # fmt: skip


def _entry_spans(text: str) -> tuple[int, int, list[tuple[int, int, dict[str, Any]]]]:
    """In a floors file's text: where its "floors" array's entries begin and end, and each entry's span (with the
    space before it) and value. The file was read by the floors reader, so it is one object of well-formed JSON."""
    decoder, pos = json.JSONDecoder(), text.index("{") + 1

    def skip(at: int, chars: str = " \t\r\n") -> int:
        while at < len(text) and text[at] in chars:
            at += 1
        return at

    array = -1
    while text[skip(pos)] != "}":  # the top level's keys: the last "floors" is the one a JSON reader keeps
        name, pos = decoder.raw_decode(text, skip(pos))
        pos = skip(skip(pos) + 1)  # past the colon
        array = pos if name == "floors" else array
        pos = skip(decoder.raw_decode(text, pos)[1], " \t\r\n,")
    first = pos = array + 1  # past the array's "["
    spans = []
    while text[skip(pos)] != "]":
        value, end = decoder.raw_decode(text, skip(pos))
        spans.append((pos, end, value))
        pos = skip(end)
        pos = pos + 1 if text[pos] == "," else pos
    return first, (spans[-1][1] if spans else first), spans


def _merge(path: Path, entries: list[dict[str, Any]]) -> None:
    """Put `entries` into the floors file at `path`, replacing those of the same GPU, backend, version, model,
    batch and precision. The other entries keep their text as it was written (hand-kept one-line entries too), and
    the new ones take the indent of the first; the file is checked by the floors reader before and after."""
    from pytest_vitperf.core.files import write_atomic
    from pytest_vitperf.verdicts.floors import SCHEMA, FloorsFile

    if not path.exists():
        write_atomic(path, json.dumps({"schema": SCHEMA, "floors": entries}, indent=1) + "\n")
        FloorsFile.load(path)
        return
    FloorsFile.load(path)  # checked again: it may have changed while the runs were read
    text = path.read_text(encoding="utf-8")
    first, last, spans = _entry_spans(text)
    new = {_key(e) for e in entries}
    kept = [text[start:end] for start, end, value in spans if _key(value) not in new]
    lead = text[spans[0][0]:spans[0][1]] if spans else "\n  "
    indent = lead[: len(lead) - len(lead.lstrip())].rpartition("\n")[2]
    added = ["\n" + indent + json.dumps(e, indent=1).replace("\n", "\n" + indent) for e in entries]
    write_atomic(path, text[:first] + ",".join(kept + added) + text[last:])
    FloorsFile.load(path)


def _rate(text: str) -> float:
    rate = parse_threshold(text)
    if not 0 < rate < 0.5:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate between 0 and 50%, such as 5% or 0.01")
    return rate


def _confidence(text: str) -> float:
    from pytest_vitperf.options.parsers import parse_confidence

    return parse_confidence(text)


def add(sub: Any) -> None:
    """The floors subcommands."""
    floors = sub.add_parser("floors", help="floors for this GPU and backend version, from runs made on it")
    verbs = floors.add_subparsers(dest="verb", required=True)
    sug = verbs.add_parser("suggest", help="floor entries, with provenance, from the speedup intervals of runs")
    sug.add_argument("runs", nargs="+", type=Path, help="--benchmark-json files of runs made on this GPU")
    sug.add_argument("--regression", type=parse_threshold, default=0.05,
                     help="the slowdown a floor must catch (5%%)")
    sug.add_argument("--unit", choices=UNITS, default="auto", help="judge in time, cycles, or the steadier (auto)")
    sug.add_argument("--confidence", type=_confidence, default=0.95, help="of the runs' intervals (0.95)")
    sug.add_argument("--precisions", type=argtypes.precisions, help="only these, comma-separated (all)")
    sug.add_argument("--out", type=Path, help="merge the entries into this floors file (created if absent)")
    sug.set_defaults(func=_suggest)

    make = verbs.add_parser("make", help="run the suite in fresh processes on this GPU and write its floors, at a "
                            "false-alarm rate: what a GPU without floors needs")  # fmt: skip
    make.add_argument("--runs", type=int, default=3, help="fresh processes, each compiling its own engines (3)")
    make.add_argument("--false-alarm", type=_rate, default=0.05, metavar="RATE",
                      help="the most often an unchanged run does not pass a floor: FAIL or inconclusive (5%%)")
    make.add_argument("--unit", choices=UNITS, default="auto", help="judge in time, cycles, or the steadier (auto)")
    make.add_argument("--confidence", type=_confidence, default=0.95,
                      help="of the runs' intervals, and of the next run's floors judged together (95%%)")
    make.add_argument("--out", type=Path, help="the floors file to merge into (default: the one the suite reads, "
                      "floors.json beside it, or --vitperf-floors's)")  # fmt: skip
    make.add_argument("--work-dir", type=Path, help="each run's cache folder and JSON (default: a new temp folder)")
    make.add_argument("--quiet", action="store_true", help="keep each run's output to itself")
    make.add_argument("pytest_args", nargs="*", help="after --: the suite and its options (default: "
                      "suites/test_vit_latency.py)")  # fmt: skip
    make.set_defaults(func=_make, precisions=None)
