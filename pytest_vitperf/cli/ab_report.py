"""`vitperf ab`'s results written: the verdict table (with --explain's findings) on stdout, and --markdown, --json
and --export; the exit code of the verdicts. Shared by one GPU's run and the run split over GPUs (ab_gpus)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.cli.ab import compile_mode, shared_parts
from pytest_vitperf.engines import INDUCTOR_PART

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Row


def _builds(args: argparse.Namespace) -> str:
    """Where a round's engines come from, for the facts under the table."""
    if args.reuse_compiles:
        return "once a side"
    if INDUCTOR_PART in shared_parts(args.pytest_args):
        return "Inductor's kernels once a side (no timed choices), other builds each process"
    return "each process"


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
    lines = markdown(rows, facts) + (["", *explanations(explained)] if explained else [])
    print("\n".join(lines))
    code = exit_code(rows)
    why = {"explain": as_json(explained)} if explained else {}
    outputs = {args.markdown: "\n".join(lines) + "\n",
               args.json: json.dumps({**facts, "work_dir": str(work), "exit": code,
                                      "rows": [r.to_dict() for r in rows], **why}, indent=1),
               args.export: json.dumps(github_action_benchmark(rows), indent=1)}  # fmt: skip
    for path, text in outputs.items():
        if path is not None:
            path.write_text(text)  # an OSError fails the command: a gate must not believe it wrote its verdicts
    return code
