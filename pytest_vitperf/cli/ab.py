"""`vitperf ab`: the command's arguments; the run itself is the ab/ room's (ab/run.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_vitperf.cli import argtypes
from pytest_vitperf.options.parsers import number, parse_confidence, parse_threshold
from pytest_vitperf.verdicts.ab import EXIT_SAME, EXIT_SLOWER, EXIT_UNKNOWN, THRESHOLD

EXIT_CODES = f"""exit codes:
  {EXIT_SAME}    every row SAME or FASTER: the candidate passes
  {EXIT_SLOWER}    a row SLOWER, or a test A passes fails on B: the candidate fails
  2    no verdict: bad arguments, a side's process failed, a work folder held by another run, a store not written
  {EXIT_UNKNOWN}    no row SLOWER, but a row UNKNOWN once the budget was spent: not passed; more rounds would tell
       (--resume --work-dir DIR --budget-s MORE)
  130  interrupted (143: terminated): the rounds done are kept; --resume continues"""


def _ab(args: argparse.Namespace) -> int:
    from pytest_vitperf.ab.run import run

    return run(args)


def add(sub: Any) -> None:
    ab = sub.add_parser("ab", help="measure a candidate environment against the current one, alternating on one GPU",
                        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    ab.add_argument("--a", required=True, help="the current environment: a venv, a python, or a command prefix")
    ab.add_argument("--b", required=True, help="the candidate, in the same forms")
    ab.add_argument("--rounds", type=int, help="rounds (pairs of processes) to run before --budget-s buys more "
                    "(default: 4, one ABBA block); a look after every 4 and after the last")  # fmt: skip
    ab.add_argument("--budget-s", type=float, default=0.0,
                    help="seconds the run may take, its prepares included: past --rounds, while rows are open, a "
                    "block of 4 rounds more if the seconds left pay for it at the last block's price a round, else 2 "
                    "if they pay for those; --rounds always run: a shorter budget is overrun (0: no more)")  # fmt: skip
    ab.add_argument("--threshold", type=parse_threshold, default=THRESHOLD, help="the practical threshold (0.75%%)")
    ab.add_argument("--confidence", type=parse_confidence, default=0.95,
                    help="1 - the rate of wrong SLOWER or FASTER over the matrix, and of a row beyond the threshold "
                    "called SAME (0.95)")
    ab.add_argument("--gpu", help="the GPU both sides run on (CUDA_VISIBLE_DEVICES)")
    ab.add_argument("--gpus", help="all, or 0,1,...: the suite's units (families, other modules) split over these "
                    "GPUs, each running both sides' rounds for its own; one table, judged together")  # fmt: skip
    ab.add_argument("--work-dir", type=Path, help="caches, logs and each process's JSON (default: a new temp folder)")
    ab.add_argument("--resume", action="store_true",
                    help="continue the run in --work-dir: its caches and the rounds it finished are kept")  # fmt: skip
    ab.add_argument("--prepare-only", action="store_true",
                    help="run only each side's prepare (compiles, exports, calibrations: the cold start) into "
                    "--work-dir's caches, then stop; --resume then runs the rounds, and a new run there starts warm")
    ab.add_argument("--reuse-compiles", action="store_true",
                    help="rounds load every build of their side's prepare process, TensorRT plans and kernels "
                    "compiled with timed choices included: faster, but that one build's draw then sits in every "
                    "round of its side (an A/A read 2%% SLOWER so); by default a round's process builds those afresh")
    ab.add_argument("--relay", action="store_true",
                    help="a round's two processes load at once, then take the GPU a family at a time in turn: one "
                    "load a round instead of two, and each family's A and B timed seconds apart")  # fmt: skip
    ab.add_argument("--prepare-workers", type=number(int, 1, "whole number"), metavar="N",
                    help="xdist workers in which each side's prepare compiles its families at once (default: from "
                    "the host, a core and 7 GiB free each, the sides' prepares running at once)")  # fmt: skip
    ab.add_argument("--explain", action="store_true", help="after the rounds, profile each SLOWER or FASTER row once "
                    "more per side and show which kernels its time moved to")  # fmt: skip
    ab.add_argument("--explain-all", action="store_true", help="--explain for every row")
    ab.add_argument("--markdown", type=Path, help="write the table, e.g. for a pull-request comment")
    ab.add_argument("--json", type=Path, help="write the verdicts as JSON")
    ab.add_argument("--export", type=Path, help="write github-action-benchmark's customSmallerIsBetter input")
    ab.add_argument("--store", type=argtypes.store, metavar="URL", help="add the verdicts to a store, as "
                    "--vitperf-store's: sqlite:///FILE, a file, or postgresql+psycopg://HOST/DB")  # fmt: skip
    ab.add_argument("pytest_args", nargs="*", help="after --: the suites and pytest options, e.g. -- suites/")
    ab.set_defaults(func=_ab)
