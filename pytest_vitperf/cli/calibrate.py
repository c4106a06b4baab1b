"""`vitperf calibrate`: the spread between fresh processes on this machine, stored beside the baselines.

It runs the suites K times, each a fresh process with --vitperf-record-run: every row's baseline gains K runs (a
median each, with the GPU's UUID, its clock and the date), and the gate judges that row against their spread from
then on (verdicts/baselines/compare.py). With --store URL the runs go to a store instead, whose baselines are its
runs (--vitperf-store-baselines): there every night's run adds to the spread as well.

Then it prints each row's spread and the smallest slowdown the gate can see there, and, with --inject-delay
PRECISION=REL,
gates one more process with a known delay on that precision and says whether it was caught.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_vitperf.cli import argtypes
from pytest_vitperf.cli.baselines import DEFAULT_BASELINES
from pytest_vitperf.core import processes
from pytest_vitperf.options.parsers import parse_threshold
from pytest_vitperf.report.tables import table
from pytest_vitperf.store.baselines import BaselineStorage
from pytest_vitperf.verdicts.spreads import Prior


def _pytest(args: argparse.Namespace, *extra: str) -> list[str]:
    where = ([f"--vitperf-store={args.store}", "--vitperf-store-baselines"] if args.store else
             [f"--vitperf-baseline-dir={args.baseline_dir}"])  # fmt: skip
    return [sys.executable, "-m", "pytest", "--gpu-bench", "-p", "no:cacheprovider", *where, *args.pytest_args,
            *extra]  # fmt: skip


def _storage(args: argparse.Namespace) -> BaselineStorage:
    from pytest_vitperf.store.baselines import JsonDirStorage
    from pytest_vitperf.store.sql import SqlStore

    return SqlStore(args.store) if args.store else JsonDirStorage(args.baseline_dir)


def _run(cmd: list[str], quiet: bool) -> subprocess.CompletedProcess[str]:
    """One fresh process, ended with all it started if this one is interrupted (processes.interruptible)."""
    print("$ " + " ".join(cmd[1:]), flush=True)
    pipe = subprocess.PIPE if quiet else None
    return processes.run(cmd, stdout=pipe, stderr=pipe, text=True)


def _again(args: argparse.Namespace) -> str:
    return "vitperf calibrate " + " ".join(shlex.quote(a) for a in sys.argv[2:])


def _calibrate(args: argparse.Namespace) -> int:
    from pytest_vitperf.store.sql import store_problem

    if args.store and (problem := store_problem(args.store)):  # before its runs, not after them
        print(f"vitperf calibrate: --store {args.store}: {problem}", file=sys.stderr)
        return 2
    at = [0]  # the run under way
    try:
        with processes.interruptible():
            return _runs(args, at)
    except processes.Interrupted as exc:
        what = f"run {at[0]} of {args.runs} was cut off" if at[0] <= args.runs else "the delay check was cut off"
        print(f"vitperf calibrate: {exc} and every process it started has ended: {what}. The "
              f"{min(at[0] - 1, args.runs)} run(s) before it stay in the baselines of "
              f"{args.store or args.baseline_dir}; run again: {_again(args)}",
              file=sys.stderr)  # fmt: skip
        return exc.code


def spread_rows(
    storage: BaselineStorage, rate: float, priors: dict[tuple[Path, str], Prior | None] | None = None
) -> list[tuple[str, ...]]:
    """Every baseline row with runs: its runs on the board of its newest run, their spread, and the smallest slowdown
    the gate sees there (what compare() would judge a run of that board with). `priors` receives the matrix prior
    of each folder (backend version and GPU model) and board."""
    from pytest_vitperf.verdicts.baselines.compare import compare, matrix_prior

    baselines = [b for b in storage.all() if b.runs]
    priors = {} if priors is None else priors
    rows: list[tuple[str, ...]] = []
    for b in baselines:
        newest = b.runs[-1]
        where = (b.key.relpath().parent, newest.gpu_uuid)
        if where not in priors:
            priors[where] = matrix_prior([o for o in baselines if o.key.relpath().parent == where[0]], where[1])
        c = compare(b, newest.median_ms, gpu_uuid=newest.gpu_uuid, level=rate / len(baselines), prior=priors[where])
        k = b.key
        rows.append((k.model, k.precision, f"{k.batch}{' (cold)' if k.cold else ''}", str(c.runs),
                     "unknown" if c.sd_log is None else f"{c.sd_log:.2%}" + (
                         "" if c.own_sd_log is None else f" (own {c.own_sd_log:.2%})"),
                     "-" if c.detectable is None else f"{c.detectable:.1%}",
                     newest.gpu_uuid[:12] or "-", newest.date))  # fmt: skip
    return rows


def _runs(args: argparse.Namespace, at: list[int]) -> int:
    if args.runs < 3:
        print("vitperf calibrate: a spread needs 3 runs or more: vitperf calibrate --runs 5", file=sys.stderr)
        return 2
    for k in range(1, args.runs + 1):
        at[0] = k
        print(f"== run {k} of {args.runs}")
        done = _run(_pytest(args, "--vitperf-record-run"), args.quiet)
        if done.returncode != 0:
            print(f"vitperf calibrate: run {k} exited {done.returncode}; nothing more is recorded. Fix it, then run "
                  f"again: {_again(args)}", file=sys.stderr)  # fmt: skip
            return 1
    priors: dict[tuple[Path, str], Prior | None] = {}
    rows = spread_rows(_storage(args), args.false_alarm, priors)
    header = ("model", "precision", "batch", "runs", "spread (sd)", "can see", "board", "last run")
    for line in table(header, rows):
        print(line)
    print(f"spread: the sd of log median between runs on this board, moderated by the other rows' (own: the row's "
          f"alone); can see: the smallest slowdown the gate flags "
          f"4 times in 5, at a {args.false_alarm:.0%} false-alarm rate over these {len(rows)} rows")  # fmt: skip
    for (folder, board), prior in priors.items():
        print(f"prior of {folder} on {board[:12] or 'an unrecorded board'}: "
              + ("none (fewer than 3 rows with a spread)" if prior is None else prior.text()))  # fmt: skip
    if args.inject_delay is None:
        return 0
    at[0] = args.runs + 1
    precision, rel = args.inject_delay
    print(f"== a known delay: {precision} +{rel:.0%}")
    done = _run(_pytest(args, f"--vitperf-inject-delay={precision}={rel}"), quiet=True)
    caught = [line for line in done.stdout.splitlines() if f" {precision} " in line and "regression" in line]
    for line in caught:
        print(line)
    if done.returncode == 1 and caught:
        print(f"caught: {precision} +{rel:.0%} was flagged as a regression")
        return 0
    print(f"MISSED: {precision} +{rel:.0%} was not flagged (exit {done.returncode}); the spread above says what "
          "this machine can see")  # fmt: skip
    return 1


def _inject(text: str) -> tuple[str, float]:
    from pytest_vitperf.options.parsers import parse_delays

    name, rel = parse_delays(text)[0]
    return argtypes.precision(name), rel


def add(sub: Any) -> None:
    cal = sub.add_parser("calibrate", help="measure the spread between fresh processes, stored beside the baselines")
    cal.add_argument("--runs", type=int, default=5, help="fresh processes to run (5)")
    cal.add_argument("--baseline-dir", type=Path, default=DEFAULT_BASELINES,
                     help=f"the baselines that gain the runs ({DEFAULT_BASELINES})")
    cal.add_argument("--store", type=argtypes.store, metavar="URL",
                     help="record the runs in this store instead, and read its baselines (--vitperf-store-baselines)")
    cal.add_argument("--false-alarm", type=parse_threshold, default=0.05, metavar="RATE",
                     help="as --vitperf-false-alarm (5%%)")
    cal.add_argument("--inject-delay", type=_inject, metavar="PRECISION=REL",
                     help="then check that a known delay is caught, as --vitperf-inject-delay's: fp8=2%%")
    cal.add_argument("--quiet", action="store_true", help="keep each run's output to itself")
    cal.add_argument("pytest_args", nargs="*", help="after --: the suites and pytest options, e.g. -- suites/")
    cal.set_defaults(func=_calibrate)
