"""`vitperf ab`'s results written: the verdict table (with --explain's findings) on stdout, and --markdown, --json
and --export; the exit code of the verdicts. Shared by one GPU's run and the run split over GPUs (ab_gpus)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.cli.ab import compile_mode, shared_parts
from pytest_vitperf.engines import INDUCTOR_PART, READY_PART

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Row


def _builds(args: argparse.Namespace) -> str:
    """Where a round's engines come from, for the facts under the table."""
    if args.reuse_compiles:
        return "once a side"
    if INDUCTOR_PART in shared_parts(args.pytest_args):
        ready = " and ready engines" if READY_PART in shared_parts(args.pytest_args) else ""
        return f"Inductor's kernels{ready} once a side (no timed choices), other builds each process"
    return "each process"


def ready_engines(work: Path) -> dict[str, dict[str, list[str]]]:
    """Per side and row, the ready engines (engines/ready.py) its round processes ran, by hash: one a row when every
    round loaded what the side's prepare built."""
    from pytest_vitperf.measure.measurement import BenchmarkJsonError, read_benchmark_json

    seen: dict[str, dict[str, set[str]]] = {}
    for path in sorted(work.rglob("round*-[AB].json")):  # with --gpus, each GPU's rounds in a folder of its own
        try:
            measured = read_benchmark_json(path)
        except BenchmarkJsonError:
            continue  # a round that wrote nothing was said when it ended
        for m in measured:
            ready = m.spec.options.get("ready")
            if isinstance(ready, dict) and ready.get("sha256"):
                row = f"{m.spec.model} {m.spec.precision} b{m.spec.batch}"
                seen.setdefault(path.stem[-1], {}).setdefault(row, set()).add(str(ready["sha256"]))
    return {side: {row: sorted(h) for row, h in rows.items()} for side, rows in seen.items()}


def ready_line(ready: dict[str, dict[str, list[str]]]) -> list[str]:
    """What the rounds ran, said under the table: nothing where no round ran a ready engine."""
    if not ready:
        return []
    apart = [f"{row} on side {side} ({len(h)} builds)" for side, rows in ready.items() for row, h in rows.items()
             if len(h) > 1]  # fmt: skip
    if apart:
        return ["", f"Ready engines: the rounds ran more than one build of {', '.join(apart)}"]
    rows = sorted({row for rows in ready.values() for row in rows})
    return ["", f"Ready engines: every round of a side ran its side's one build of each of {len(rows)} rows"]


def report(rows: list[Row], device: str, rounds: int, looks: int, work: Path, args: argparse.Namespace,
           explained: dict[str, Any] | None = None) -> int:  # fmt: skip
    """The table (and --explain's findings) on stdout, --markdown, --json and --export written; the exit code of
    the verdicts."""
    from pytest_vitperf.cli.ab_explain import as_json
    from pytest_vitperf.cli.ab_explain import markdown as explanations
    from pytest_vitperf.report.ab import github_action_benchmark, markdown
    from pytest_vitperf.verdicts.ab import exit_code

    facts = {"a": args.a, "b": args.b, "device": device, "threshold": args.threshold, "confidence": args.confidence,
             "rounds": rounds, "looks": looks, "compile": compile_mode(args.pytest_args),
             "builds": _builds(args)}  # fmt: skip
    ready = ready_engines(work)
    lines = markdown(rows, facts) + ready_line(ready) + (["", *explanations(explained)] if explained else [])
    print("\n".join(lines))
    code = exit_code(rows)
    why = {"explain": as_json(explained)} if explained else {}
    outputs = {args.markdown: "\n".join(lines) + "\n",
               args.json: json.dumps({**facts, "work_dir": str(work), "exit": code,
                                      "rows": [r.to_dict() for r in rows], "ready_engines": ready, **why},
                                     indent=1),
               args.export: json.dumps(github_action_benchmark(rows), indent=1)}  # fmt: skip
    for path, text in outputs.items():
        if path is not None:
            path.write_text(text)  # an OSError fails the command: a gate must not believe it wrote its verdicts
    return code
