"""`vitperf ab`'s work folder: held by one run at a time, cleared for a new run or checked for a --resume, what
an interrupted run leaves in it, and its processes' JSONs read once for the report."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.ab.turns import SideFailed, again, recorded

if TYPE_CHECKING:
    from filelock import BaseFileLock

    from pytest_vitperf.measure.measurement import Measurement

RUN_FILE = "ab-run.json"  # what a work folder was run with, so that --resume continues only the same run
LOCK, OWNER = ".ab.lock", "ab-owner.txt"  # held while a run uses its work folder; and which run that is


def hold(work: Path, args: argparse.Namespace) -> BaseFileLock | None:
    """The work folder's lock, taken (the kernel drops it if we die); None, said, where another run holds it: a run
    started in a folder in use took the other's done files for its own processes' and stalled (H200, 2026-12-04)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(work / LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        try:
            owner = (work / OWNER).read_text().strip()
        except OSError:
            owner = "which one is not written yet"
        print(f"vitperf ab: {work} is in use by another vitperf ab run ({owner}); wait for it to end, or run this "
              f"one in a new folder: {again(args, work_dir=None, resume=False)}", file=sys.stderr)  # fmt: skip
        return None
    (work / OWNER).write_text(f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    return lock


def what(args: argparse.Namespace) -> dict[str, object]:
    """What a run is, as its RUN_FILE records it: a --resume continues only the same."""
    relay = {"relay": True} if getattr(args, "relay", False) else {}  # a run before --relay is resumed as it was
    return {"a": args.a, "b": args.b, "pytest_args": args.pytest_args, "reuse_compiles": args.reuse_compiles, **relay}


def write_run(work: Path, args: argparse.Namespace, looks: int) -> None:
    """The run and how many looks it has taken, in its work folder."""
    (work / RUN_FILE).write_text(json.dumps({**what(args), "looks": looks}, indent=1))


def begin(work: Path, args: argparse.Namespace) -> None:
    """A new run's work folder cleared of an earlier run's processes, or a resumed run's checked to be of this run."""
    if not args.resume:
        for old in [*work.glob("round*-[AB].*"), *work.glob("prepare-[AB].*"), *work.glob("explain-[AB].*"),
                    *work.glob("open-after-look*.txt")]:  # fmt: skip
            old.unlink()  # an earlier run's processes: a later --resume must not take them for this run's
        write_run(work, args, 0)
        return
    try:
        earlier = json.loads((work / RUN_FILE).read_text())
        if int(earlier.pop("looks")) < 0:
            raise ValueError(earlier)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
        raise SideFailed(f"{work / RUN_FILE} holds no earlier vitperf ab run to resume; start one without --resume: "
                         f"{again(args, resume=False)}") from None  # fmt: skip
    if earlier != what(args):
        raise SideFailed(f"{work / RUN_FILE} holds a run of other sides or suites; resume that "
                         f"one, or start this one elsewhere: {again(args, resume=False)}")  # fmt: skip


def kept(work: Path, args: argparse.Namespace) -> str:
    """What an interrupted run leaves for --resume: the processes that finished, as the work folder holds them."""
    prepared = [s for s in "AB" if recorded(work, "prepare", s, args, say=False)]
    done = 0
    while all(recorded(work, f"round{done}", s, args, say=False) for s in "AB"):
        done += 1
    return (f"Kept in {work}: {len(prepared)} of 2 prepares and {done} whole round(s); not run: "
            f"{'the rounds' if len(prepared) < 2 else f'round {done} on'}")  # fmt: skip


def parsed(path: Path) -> Any:
    """A process's JSON, parsed once however many parts of the report read it (the file as it is now)."""
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> Any:
    from pytest_vitperf.core.files import read_json
    from pytest_vitperf.measure.measurement import BenchmarkJsonError

    return read_json(path, BenchmarkJsonError)


def measured_in(path: Path) -> list[Measurement]:
    """A process's measurements (measurement.read_benchmark_json), from its JSON parsed once."""
    from pytest_vitperf.measure.measurement import BenchmarkJsonError, measurements_of

    try:
        doc = parsed(path)
    except OSError as exc:
        raise BenchmarkJsonError(path, f"cannot be read ({exc.strerror or exc})") from None
    return measurements_of(doc, path)
