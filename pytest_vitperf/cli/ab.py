"""`vitperf ab`: the current environment (A) and a candidate (B) measured side by side on one GPU.

Each side is a venv, a Python interpreter, or a command prefix that starts one (a container run), with
pytest-vitperf installed. Each side first runs the suites once into its own cache folder (not timed; both sides at
once), which keeps what every build of the same inputs reproduces (exports, calibrations, converted models, and
Inductor's kernels compiled without timed choices). Then every round runs one fresh process per side, in ABBA BAAB
order; each builds whatever else its engines need (a build that times candidates is a draw: two compiles of one
engine differed by up to 7.5%), so that the rounds' B/A ratios sample builds as well as processes (verdicts/ab.py).
With a time budget, rows still unknown get more rounds, four at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pytest_vitperf.cli import argtypes
from pytest_vitperf.cli.ab_explain import LABEL, chosen, explain
from pytest_vitperf.cli.ab_plan import own_builds, shared_parts, suite_args
from pytest_vitperf.core import processes
from pytest_vitperf.options import TURN_DONE, WAIT_FOR
from pytest_vitperf.options.parsers import parse_threshold
from pytest_vitperf.verdicts.ab import BLOCK, THRESHOLD, families_in, judge, more_rounds, order, other_states, pairs

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Process, Row

EXAMPLE = "vitperf ab --a .venv --b /opt/candidate-venv --budget-s 600 -- suites/test_vit_latency.py"
ENDED = ".ended"  # beside a process's JSON: when it ended (ab_report.round_time)
DONE = ".done"  # beside it: touched by the process once its last test has run (--vitperf-turn-done)


def side_command(env: str) -> list[str]:
    """The command that starts a side's Python: a venv folder's bin/python, an interpreter, or a command prefix."""
    path = Path(env)
    if path.is_dir():
        python = path / "bin" / "python"
        if not python.exists():
            raise argparse.ArgumentTypeError(f"{env} is a folder without bin/python: give a venv, an interpreter or "
                                             f"a command prefix, e.g. {EXAMPLE}")  # fmt: skip
        return [str(python)]
    return [env] if path.is_file() else shlex.split(env)


class SideFailed(Exception):
    pass


@dataclass
class _Running:
    """A started process of one side; `cache` is its own build folder (removed when it ends), else None."""

    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    cache: Path | None
    out: Path  # its --benchmark-json


def _start(
    cmd: list[str], side: str, label: str, work: Path, args: argparse.Namespace, env: dict[str, str],
    turn: Path | None = None,
) -> _Running:  # fmt: skip
    """A fresh process of `side`, its output kept in the work folder; with `turn`, it runs no test before that file
    exists (--vitperf-wait-for). The prepare process (and with --reuse-compiles every process) uses the side's
    cache; otherwise a round's process builds in a cache of its own that borrows the side's reproducible parts."""
    own = label not in ("prepare", LABEL) and not args.reuse_compiles  # a profile process is never a timed round
    cache = work / f"cache-{side}"
    if own:
        cache = own_builds(cache, work / f"cache-{side}-{label}", shared_parts(args.pytest_args))
    waits = [f"{WAIT_FOR}={turn}"] if turn is not None else []
    out = work / f"{label}-{side}.json"
    full = [*cmd, "-m", "pytest", "--gpu-bench", "-p", "no:cacheprovider", "-q", f"--benchmark-json={out}",
            f"--vitperf-cache-dir={cache}", f"{TURN_DONE}={out.with_suffix(DONE)}", *waits,
            *suite_args(args.pytest_args)]  # fmt: skip
    log = (work / f"{label}-{side}.log").open("wb")
    popen = processes.start(full, stdout=log, stderr=subprocess.STDOUT, env=env)
    return _Running(popen, log, cache if own else None, out)


def _end(r: _Running, kill: bool = False) -> int:
    """Wait for (or kill, with all it started) a process, then drop its own builds: they were its draw, never used
    again. A killed process's JSON goes too: a --resume must not take what it wrote as it was ended for a round."""
    try:
        return processes.end(r.popen, kill=kill)
    finally:
        r.log.close()
        if kill or (r.popen.returncode or 0) < 0:  # killed, by us or by a signal
            r.out.unlink(missing_ok=True)
        elif r.out.exists():  # when it ended, beside when it wrote its results: the time line's last part
            r.out.with_suffix(ENDED).touch()
        if r.cache is not None:
            shutil.rmtree(r.cache, ignore_errors=True)


def _host_timed(work: Path) -> bool:
    """Whether side A's prepare process timed on the host (a CPU run): the CPU is then what is measured."""
    from pytest_vitperf.measure.measurement import read_benchmark_json
    from pytest_vitperf.measure.timing import PerfCounterClock

    return any(m.spec.timer == PerfCounterClock.name for m in read_benchmark_json(work / "prepare-A.json"))


# How many processes wait for their turn while one runs. One turn ahead was enough while a turn took 20 s or more;
# at 13 s (H200, 2026-11-29) the next process, which needs about 12 s before it can take its turn, was sometimes not
# ready, and 15.4 s passed from one process's results to the next one's.
AHEAD = 2


def _in_turn(
    tasks: list[tuple[str, str]], commands: dict[str, list[str]], work: Path, args: argparse.Namespace,
    env: dict[str, str], overlap: bool = True,
) -> list[Process]:  # fmt: skip
    """The processes of `tasks` ((label, side), in order), one at a time on the GPU. With `overlap`, each one
    starts AHEAD turns early and waits for a turn file written once the one before it is done with the GPU (its last
    test has run) or has ended: its interpreter, imports and FP32 models (CPU work, about 12 s on an H200) overlap
    the others' runs, and its turn the other's reports and exit (about 4 s); it touches the GPU in its own turn.
    Without, each starts once the one before it has ended (a CPU run times the CPU itself)."""
    turns = [work / f"{label}-{side}.turn" for label, side in tasks]
    for t in [*turns, *(work / f"{label}-{side}{DONE}" for label, side in tasks)]:
        t.unlink(missing_ok=True)  # an earlier run's, cut off
    started: list[_Running] = []
    done: list[Process] = []
    try:
        for k, (label, side) in enumerate(tasks):
            with processes.held():
                if k == 0 or not overlap:
                    started.append(_start(commands[side], side, label, work, args, env))
                while overlap and len(started) < min(len(tasks), k + 1 + AHEAD):
                    j = len(started)
                    nxt_label, nxt_side = tasks[j]
                    started.append(_start(commands[nxt_side], nxt_side, nxt_label, work, args, env, turns[j]))
            nxt = turns[k + 1] if overlap and k + 1 < len(tasks) else None
            early = nxt is not None and _done_with_gpu(started[k])
            if nxt is not None and early:
                nxt.touch()  # while it writes its results and exits
            rc = _end(started[k])
            done.append(_read(work, side, label, rc, args))
            if nxt is not None and not early:
                nxt.touch()  # it ended without saying it was done: only once it has results
    finally:
        for r in started[len(done) :]:
            _end(r, kill=True)  # a side failed, or we were interrupted: no process is left waiting for its turn
    return done


def _done_with_gpu(r: _Running, poll_s: float = 0.05) -> bool:
    """Whether the process touched its --vitperf-turn-done file, waited for until it did or ended."""
    done = r.out.with_suffix(DONE)
    while r.popen.poll() is None and not done.exists():
        time.sleep(poll_s)
    return done.exists()


def _read(work: Path, side: str, label: str, rc: int, args: argparse.Namespace, say: bool = True) -> Process:
    """The rows of a process that exited `rc`, from the JSON it wrote in the work folder (`_start` names it)."""
    from pytest_vitperf.measure.measurement import BenchmarkJsonError, read_benchmark_json
    from pytest_vitperf.verdicts.ab import Side

    # 1: tests failed (a floor or a stored baseline); the measurements are still there
    out, log = work / f"{label}-{side}.json", work / f"{label}-{side}.log"
    try:
        measured = read_benchmark_json(out) if rc in (0, 1) else []
    except BenchmarkJsonError:
        measured = []
    if not measured:
        raise SideFailed(f"side {side}'s {label} process exited {rc} and wrote no measurements; its output is in "
                         f"{log}. Fix it, then run again: {_again(args)}")  # fmt: skip
    if say:
        print(f"{label} {side}: {len(measured)} measurements", flush=True)
    return {f"{m.spec.model} {m.spec.precision} b{m.spec.batch}": Side(m.median, m.sm_mhz) for m in measured}


RUN_FILE = "ab-run.json"  # what a work folder was run with, so that --resume continues only the same run


def _what(args: argparse.Namespace) -> dict[str, object]:
    return {"a": args.a, "b": args.b, "pytest_args": args.pytest_args, "reuse_compiles": args.reuse_compiles}


def _write_run(work: Path, args: argparse.Namespace, looks: int) -> None:
    (work / RUN_FILE).write_text(json.dumps({**_what(args), "looks": looks}, indent=1))


def _begin(work: Path, args: argparse.Namespace) -> int:
    """The looks already taken at the rounds a resumed run continues (each one counts against the confidence)."""
    if not args.resume:
        for old in [*work.glob("round*-[AB].*"), *work.glob("prepare-[AB].*"), *work.glob("explain-[AB].*")]:
            old.unlink()  # an earlier run's processes: a later --resume must not take them for this run's
        _write_run(work, args, 0)
        return 0
    try:
        earlier = json.loads((work / RUN_FILE).read_text())
        looks = int(earlier.pop("looks"))
        if looks < 0:
            raise ValueError(looks)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
        raise SideFailed(f"{work / RUN_FILE} holds no earlier vitperf ab run to resume; start one without --resume: "
                         f"{_again(args).replace(' --resume', '')}") from None  # fmt: skip
    if earlier != _what(args):
        raise SideFailed(f"{work / RUN_FILE} holds a run of other sides or suites; resume that "
                         f"one, or start this one elsewhere: {_again(args).replace(' --resume', '')}")  # fmt: skip
    return looks


def _recorded(work: Path, label: str, side: str, args: argparse.Namespace, say: bool = True) -> Process | None:
    """A process that an earlier run of this work folder finished, or None (never run, or cut off mid-write)."""
    try:
        return _read(work, side, label, 0, args, say) if (work / f"{label}-{side}.json").exists() else None
    except SideFailed:
        return None


def _rounds(
    first: int,
    sides: list[tuple[str, str]],
    commands: dict[str, list[str]],
    work: Path,
    args: argparse.Namespace,
    env: dict[str, str],
) -> list[tuple[Process, Process]]:
    """Rounds `first`, `first` + 1, ... in their `sides` orders: as an earlier run of the work folder recorded them
    (--resume), else run now, in turn. A round is run whole or not at all, so that its order holds."""
    recorded = {}
    for i in range(first, first + len(sides)):
        a, b = (_recorded(work, f"round{i}", s, args) if args.resume else None for s in "AB")
        if a is not None and b is not None:
            recorded[i] = (a, b)
    tasks = [(f"round{i}", s) for i, pair in enumerate(sides, start=first) if i not in recorded for s in pair]
    ran = dict(zip(tasks, _in_turn(tasks, commands, work, args, env, overlap=not _host_timed(work)), strict=True))
    return [recorded.get(i) or (ran[(f"round{i}", "A")], ran[(f"round{i}", "B")])
            for i in range(first, first + len(sides))]  # fmt: skip


def _prepare(commands: dict[str, list[str]], work: Path, args: argparse.Namespace, env: dict[str, str]) -> None:
    """Both sides' prepare processes, at once: the rounds borrow only what every build reproduces, which contention
    cannot change, and a cold prepare takes about 100 s a side. With --reuse-compiles the rounds load every build of
    the prepare, timed choices included, so one side at a time: both at once once left an A/A's side B with an FP16
    b64 kernel 3.3% slower in every round (H100)."""
    if args.reuse_compiles:
        for s in "AB":
            _in_turn([("prepare", s)], commands, work, args, env, overlap=False)
        return
    started: list[_Running] = []
    try:
        for s in "AB":
            with processes.held():
                started.append(_start(commands[s], s, "prepare", work, args, env))
        codes = [_end(r) for r in started]
    finally:
        for r in started:
            if r.popen.returncode is None:
                _end(r, kill=True)  # interrupted while the other was waited for
    for s, rc in zip("AB", codes, strict=True):
        _read(work, s, "prepare", rc, args)  # a side that failed raises here, after both have ended


def _again(args: argparse.Namespace, resume: bool = False) -> str:
    """The command as given (with --resume if `resume`), to end a failure message with."""
    opts = [f"--a {shlex.quote(args.a)}", f"--b {shlex.quote(args.b)}"]
    opts += [f"--rounds {args.rounds}"] if args.rounds else []
    opts += [f"--budget-s {args.budget_s:g}"] if getattr(args, "budget_s", 0) else []
    opts += [f"--{k} {shlex.quote(getattr(args, k))}" for k in ("gpu", "gpus") if getattr(args, k, None)]
    opts += [f"--work-dir {shlex.quote(str(args.work_dir))}"] if args.work_dir else []
    opts += ["--reuse-compiles"] * bool(args.reuse_compiles) + ["--resume"] * bool(args.resume or resume)
    return " ".join(["vitperf ab", *opts, "--", *map(shlex.quote, args.pytest_args)])


def _run(
    commands: dict[str, list[str]], work: Path, args: argparse.Namespace, env: dict[str, str]
) -> tuple[int, list[tuple[Process, Process]], list[Row]]:
    """The prepares (unless a resumed run has them), then the rounds: --rounds, else a block, and then as many more
    as the budget pays for while rows are unknown or, without --rounds, its throughput rows cannot yet see twice the
    threshold (verdicts.ab.more_rounds): the looks taken, the rounds, and the rows judged."""
    start = time.monotonic()
    looks = _begin(work, args)
    if not (args.resume and all(_recorded(work, "prepare", s, args) for s in "AB")):
        _prepare(commands, work, args, env)
    rounds: list[tuple[Process, Process]] = []
    planned = args.rounds or BLOCK
    aim = None if args.rounds else 2 * args.threshold
    while True:
        began, before = time.monotonic(), len(rounds)
        rounds += _rounds(before, order(planned)[before:], commands, work, args, env)
        per_round = (time.monotonic() - began) / (len(rounds) - before)  # resumed ones cost nothing: a low guess
        looks += 1
        _write_run(work, args, looks)
        rows = judge(pairs(rounds), threshold=args.threshold, confidence=args.confidence, looks=looks,
                     two_states=families_in(other_states(rounds)))  # fmt: skip
        more = more_rounds(rows, len(rounds), looks, aim=aim, threshold=args.threshold, confidence=args.confidence,
                           per_round_s=per_round, left_s=args.budget_s - (time.monotonic() - start))  # fmt: skip
        if not more:
            return looks, rounds, rows
        planned += more


def _kept(work: Path, args: argparse.Namespace) -> str:
    """What an interrupted run leaves for --resume: the processes that finished, as the work folder holds them."""
    prepared = [s for s in "AB" if _recorded(work, "prepare", s, args, say=False)]
    done = 0
    while all(_recorded(work, f"round{done}", s, args, say=False) for s in "AB"):
        done += 1
    return (f"Kept in {work}: {len(prepared)} of 2 prepares and {done} whole round(s); not run: "
            f"{'the rounds' if len(prepared) < 2 else f'round {done} on'}")  # fmt: skip


def _ab(args: argparse.Namespace) -> int:
    if args.rounds is not None and args.rounds < 3:
        print(f"vitperf ab: an interval needs 3 rounds or more: {EXAMPLE}", file=sys.stderr)
        return 2
    try:
        commands = {"A": side_command(args.a), "B": side_command(args.b)}
    except argparse.ArgumentTypeError as exc:
        print(f"vitperf ab: {exc}", file=sys.stderr)
        return 2
    work = args.work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="vitperf-ab-"))  # named in what to run next
    work.mkdir(parents=True, exist_ok=True)
    if args.gpus:
        from pytest_vitperf.cli.ab_gpus import split_over_gpus

        return split_over_gpus(commands, work, args)
    env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": args.gpu} if args.gpu is not None else {}))
    explained = None
    try:
        with processes.interruptible():
            looks, rounds, rows = _run(commands, work, args, env)
            if (args.explain or args.explain_all) and (names := chosen(rows, args.explain_all)):
                overlap = not _host_timed(work)
                explained = explain(names, lambda t, ns: _in_turn(t, commands, work, ns, env, overlap), work, args)
    except SideFailed as exc:
        print(f"vitperf ab: {exc}", file=sys.stderr)
        return 2
    except processes.Interrupted as exc:
        print(f"vitperf ab: {exc}, and every process it started has ended. {_kept(work, args)}; resume with: "
              f"{_again(args, resume=True)}", file=sys.stderr)  # fmt: skip
        return exc.code
    device = f"GPU {args.gpu}" if args.gpu is not None else "the default device"
    from pytest_vitperf.cli.ab_report import report, two_states

    return report(rows, device, len(rounds), looks, work, args, explained, two_states(other_states(rounds)))


def add(sub: Any) -> None:
    ab = sub.add_parser("ab", help="measure a candidate environment against the current one, alternating on one GPU")
    ab.add_argument("--a", required=True, help="the current environment: a venv, a python, or a command prefix")
    ab.add_argument("--b", required=True, help="the candidate, in the same forms")
    ab.add_argument("--rounds", type=int, help="pairs of processes to start with (default: one ABBA block of 4, "
                    "then, within --budget-s, what the largest batch's latency rows need to see twice the "
                    "threshold)")  # fmt: skip
    ab.add_argument("--budget-s", type=float, default=0.0,
                    help="seconds in which more rounds may run: while rows are unknown, and without --rounds, until "
                    "the largest batch's rows can see twice the threshold (0: none)")  # fmt: skip
    ab.add_argument("--threshold", type=parse_threshold, default=THRESHOLD, help="the practical threshold (0.5%%)")
    ab.add_argument("--confidence", type=float, default=0.95,
                    help="1 - the rate of wrong SLOWER or FASTER over the matrix, and of a row beyond the threshold "
                    "called SAME (0.95)")
    ab.add_argument("--gpu", help="the GPU both sides run on (CUDA_VISIBLE_DEVICES)")
    ab.add_argument("--gpus", help="all, or 0,1,...: the suite's units (families, other modules) split over these "
                    "GPUs, each running both sides' rounds for its own; one table, judged together")  # fmt: skip
    ab.add_argument("--work-dir", type=Path, help="caches, logs and each process's JSON (default: a new temp folder)")
    ab.add_argument("--resume", action="store_true",
                    help="continue the run in --work-dir: its caches and the rounds it finished are kept")  # fmt: skip
    ab.add_argument("--reuse-compiles", action="store_true",
                    help="rounds load every build of their side's prepare process, TensorRT plans and kernels "
                    "compiled with timed choices included: faster, but that one build's draw then sits in every "
                    "round of its side (an A/A read 2%% SLOWER so); by default a round's process builds those afresh")
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
