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
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_vitperf.ab.explain import chosen, explain
from pytest_vitperf.ab.folder import begin, hold, kept, write_run
from pytest_vitperf.ab.plan import host_prepare_workers, open_units, tests_of, units_file
from pytest_vitperf.ab.progress import Progress
from pytest_vitperf.ab.turns import (
    Ahead,
    Running,
    SideFailed,
    again,
    end,
    host_timed,
    in_turn,
    read,
    recorded,
    start,
)
from pytest_vitperf.core import processes
from pytest_vitperf.verdicts.ab import (
    BLOCK,
    judge,
    order,
    pairs,
    settled,
    states,
    still_measured,
)
from pytest_vitperf.verdicts.budget import more_rounds

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Process, Row

EXAMPLE = "vitperf ab --a .venv --b /opt/candidate-venv --budget-s 600 -- suites/test_vit_latency.py"


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


def _rounds(
    first: int,
    sides: list[tuple[str, str]],
    commands: dict[str, list[str]],
    work: Path,
    args: argparse.Namespace,
    env: dict[str, str],
    prepare: Callable[[], None],
    units: Path | None,
    ended: Callable[[int, tuple[Process, Process]], None],
    ready: Ahead | None = None,
    then: Ahead | None = None,
) -> list[tuple[Process, Process]]:
    """Rounds `first`, `first` + 1, ... in their `sides` orders: as an earlier run of the work folder recorded them
    (--resume), else run now, in turn, each process running the tests `units` names (all without). A round is run
    whole or not at all, so that its order holds. `prepare` comes first, while the first round's process starts
    (turns.in_turn). `ended(i, (a, b))` is told once round i has ended. `ready` and `then`: the processes started
    ahead by the block before, and for the block after (turns.in_turn)."""
    earlier = {i: pair for i in range(first, first + len(sides)) if (pair := _earlier(work, i, args)) is not None}
    tasks = _tasks(first, sides, earlier)

    def overlap() -> bool:
        prepare()
        return not host_timed(work)

    ran: dict[tuple[str, str], Process] = {}

    def task_ended(k: int, process: Process) -> None:
        ran[tasks[k]] = process
        if k % 2:  # a round's second process
            label = tasks[k][0]
            ended(int(label.removeprefix("round")), (ran[(label, "A")], ran[(label, "B")]))

    in_turn(tasks, commands, work, args, env, overlap, units=units, ended=task_ended, ready=ready, then=then,
            relay=getattr(args, "relay", False))  # fmt: skip
    return [earlier.get(i) or (ran[(f"round{i}", "A")], ran[(f"round{i}", "B")])
            for i in range(first, first + len(sides))]  # fmt: skip


def _earlier(work: Path, i: int, args: argparse.Namespace) -> tuple[Process, Process] | None:
    """Round i as an earlier run of the work folder recorded it whole (--resume), else None."""
    a, b = (recorded(work, f"round{i}", s, args, say=False) if args.resume else None for s in "AB")
    return (a, b) if a is not None and b is not None else None


def _tasks(first: int, sides: list[tuple[str, str]], earlier: Collection[int]) -> list[tuple[str, str]]:
    """The processes ((label, side), in turn) of rounds `first`, ... in their `sides` orders, but those `earlier`."""
    return [(f"round{i}", s) for i, pair in enumerate(sides, start=first) if i not in earlier for s in pair]


def _next_block(work: Path, first: int, look: int, args: argparse.Namespace) -> Ahead:
    """The next block's processes, were it to come after `look`: its BLOCK rounds from `first` but those recorded
    whole (--resume), given the file of units that look writes (plan.open_units)."""
    earlier = {i for i in range(first, first + BLOCK) if _earlier(work, i, args) is not None}
    return Ahead(_tasks(first, order(first + BLOCK)[first:], earlier), units_file(work, look))


def _prepare(commands: dict[str, list[str]], work: Path, args: argparse.Namespace, env: dict[str, str]) -> None:
    """Both sides' prepare processes, at once: the rounds borrow only what every build reproduces, which contention
    cannot change, and a cold prepare takes about 100 s a side. With --reuse-compiles the rounds load every build of
    the prepare, timed choices included, so one side at a time: both at once once left an A/A's side B with an FP16
    b64 kernel 3.3% slower in every round (H100)."""
    if args.reuse_compiles:
        for s in "AB":
            in_turn([("prepare", s)], commands, work, args, env, overlap=False)
        return
    codes = _prepares_at_once("AB", commands, work, args, env)
    failed = {s: rc for s, rc in codes.items() if not _prepared(work, s, rc, args)}
    if failed and args.prepare_workers > 1:
        # A prepare's xdist workers once collected differently (two of four none, on a warm cache, while the other
        # side's prepare ran the same tests; H200, 2026-12-02): untimed, it loses only time to prepare again alone.
        for s in failed:
            log = (work / f"prepare-{s}.log").replace(work / f"prepare-{s}.workers.log")
            why = _telling(log) or "no line says why"
            print(f"prepare {s}: in {args.prepare_workers} xdist workers it exited {failed[s]} and wrote no "
                  f"measurements ({why}; its output is in {log}); preparing it in one process", file=sys.stderr,
                  flush=True)  # fmt: skip
        alone = argparse.Namespace(**{**vars(args), "prepare_workers": 1})
        codes = _prepares_at_once(failed, commands, work, alone, env)
        failed = {s: rc for s, rc in codes.items() if not _prepared(work, s, rc, args)}
    for s, rc in failed.items():
        read(work, s, "prepare", rc, args)  # raises, naming its log, once both sides have ended


def _preparing(work: Path, args: argparse.Namespace) -> str:
    """What the prepares are, for the progress line: a cold one is the nightly set's first minutes."""
    how = "one side at a time" if args.reuse_compiles else "both sides at once"
    workers = f"{args.prepare_workers} xdist workers a side" if args.prepare_workers > 1 else "one process a side"
    return f"{how} in {workers}, untimed (their output: {work / 'prepare-A.log'}, prepare-B.log)"


_TELLING = re.compile(r"error|collected no tests|differ|crashed|killed|memory", re.IGNORECASE)


def _telling(log: Path) -> str:
    """The last line of a process's output that says why it failed (an error, an xdist worker that collected
    nothing), shortened; '' where none does. The nightly set's prepares on an H200 twice failed in their workers and
    then ran alone, and only the log, gone with the machine, knew why (2026-12-04)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip()[:200] for line in reversed(lines) if _TELLING.search(line)), "")


def _prepares_at_once(
    sides: Iterable[str], commands: dict[str, list[str]], work: Path, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, int]:
    """The prepare processes of `sides`, started at once and waited for: their exit codes."""
    started: dict[str, Running] = {}
    try:
        for s in sides:
            with processes.held():
                started[s] = start(commands[s], s, "prepare", work, args, env)
        return {s: end(r) for s, r in started.items()}
    finally:
        for r in started.values():
            if r.popen.returncode is None:
                end(r, kill=True)  # interrupted while the other was waited for


def _prepared(work: Path, side: str, rc: int, args: argparse.Namespace) -> bool:
    """Whether a side's prepare wrote measurements (then said how many)."""
    try:
        read(work, side, "prepare", rc, args)
    except SideFailed:
        return False
    return True


def _run(
    commands: dict[str, list[str]], work: Path, args: argparse.Namespace, env: dict[str, str], progress: Progress
) -> tuple[int, list[tuple[Process, Process]], list[Row]]:
    """The prepares (unless a resumed run has them; the first round's process starts meanwhile), then the rounds, a
    block at a time: after each block the rows are judged (a look), and those decided leave the later blocks
    (verdicts.ab.still_measured; plan.open_units). --rounds of them, else one block; then, while rows are open, a
    block more (or half a block) as long as --budget-s pays for it (verdicts.budget.more_rounds). A resumed run judges
    its recorded blocks as they were judged. Returns the looks taken, the rounds, and the rows judged."""
    run_began = time.monotonic()
    begin(work, args)
    prepared = args.resume and all(recorded(work, "prepare", s, args) for s in "AB")
    block_began = 0.0

    def prepare() -> None:  # before a block's rounds: the prepares the first time; the rounds are timed from then
        nonlocal prepared, block_began
        if not prepared:
            progress.preparing(_preparing(work, args))
            _prepare(commands, work, args, env)
            prepared = True
            progress.started()
        block_began = time.monotonic()

    rounds: list[tuple[Process, Process]] = []
    planned = args.rounds or BLOCK
    looks, units = 0, None
    ahead: Ahead | None = None  # the next block's first processes, started before the look
    rows: list[Row] = []
    tests: dict[str, str] = {}
    block: list[tuple[Process, Process]] = []  # the rounds of the block running, as they end

    def judged(so_far: list[tuple[Process, Process]], look: int) -> list[Row]:
        found = states(so_far)
        return judge(pairs(found.kept), threshold=args.threshold, confidence=args.confidence, look=look,
                     two_states=found.mixed, decided=settled(rows))  # fmt: skip

    def ended(i: int, pair: tuple[Process, Process]) -> None:  # a block's last round is told once it has been judged
        block.append(pair)
        if i + 1 < len(rounds) + step:  # the estimate reads the rows as the coming look would judge them now
            progress.forecast(judged([*rounds, *block], looks + 1))
            progress.rounds_done(i + 1, planned)

    try:
        while True:
            before = len(rounds)
            block.clear()
            step = min(BLOCK, planned - before) if planned > before else BLOCK
            then = _next_block(work, before + step, looks + 1, args)
            rounds += _rounds(before, order(before + step)[before:], commands, work, args, env, prepare, units, ended,
                              ahead, then)  # fmt: skip
            ahead = then
            per_round = (time.monotonic() - block_began) / step  # resumed ones cost nothing: a low guess
            looks += 1
            write_run(work, args, looks)
            rows = judged(rounds, looks)
            progress.judged(rows)
            more = 0
            if any(r.open for r in rows) and len(rounds) >= planned:
                # at the last block's seconds a round, though the open rows alone run next: after a look, rounds of
                # 2-4 of the latency suite's 8 engines took 78-86% of a whole one on an H200, their processes'
                # start-ups and warm-ups staying (docs/measurements/2026-12-02-h200-ab-second-look-within-5-min.md)
                left = args.budget_s - (time.monotonic() - run_began)
                more = more_rounds(rows, per_round_s=per_round, left_s=left)
            planned += more
            if not any(r.open for r in rows) or len(rounds) >= planned:
                progress.rounds_done(len(rounds), len(rounds), last=True)
                return looks, rounds, rows
            progress.rounds_done(len(rounds), planned)
            tests = tests or tests_of(work)  # read once: the prepares have ended by the first look
            units = open_units(work, looks, still_measured(rows), tests)
            if units != ahead.units:  # every test stays (tests_of found none of the rows): they were given a file
                ahead.drop()
    finally:
        if ahead is not None:
            ahead.drop()  # no block follows, or we were interrupted during a look


def _sign_sides(work: Path, args: argparse.Namespace) -> None:
    """Sign each prepared side's cache folder as the run ends, whatever ends it (as pytest runs do): a round's process
    may have compiled into the parts it borrows (core/signing.CHECKED_ENV); unsigned, the next run builds them again."""
    from pytest_vitperf.core.signing import cache_key, sign

    for side in "AB":
        if (work / f"cache-{side}").is_dir() and recorded(work, "prepare", side, args, say=False):
            sign(work / f"cache-{side}", cache_key())


def run(args: argparse.Namespace) -> int:
    """`vitperf ab` with its parsed arguments (cli/ab.py); the exit code of its verdicts."""
    if args.prepare_only and args.gpus:
        print(f"vitperf ab: --prepare-only prepares for one GPU; leave out --gpus: {again(args, gpus=None)}",
              file=sys.stderr)
        return 2
    if args.rounds is not None and args.rounds < 3:
        print(f"vitperf ab: an interval needs 3 rounds or more: {EXAMPLE}", file=sys.stderr)
        return 2
    try:
        commands = {"A": side_command(args.a), "B": side_command(args.b)}
    except argparse.ArgumentTypeError as exc:
        print(f"vitperf ab: {exc}", file=sys.stderr)
        return 2
    from pytest_vitperf.store.sql import store_problem

    if args.store is not None and (problem := store_problem(args.store)):  # before an hour of rounds, not after
        print(f"vitperf ab: --store {args.store}: {problem}", file=sys.stderr)
        return 2
    work = args.work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="vitperf-ab-"))  # named in what to run next
    work.mkdir(parents=True, exist_ok=True)
    if (lock := hold(work, args)) is None:
        return 2
    try:
        return _measured(commands, work, args)
    finally:
        lock.release()


def _measured(commands: dict[str, list[str]], work: Path, args: argparse.Namespace) -> int:
    """The run in its work folder, held (folder.hold): its rounds, judged and reported; its verdicts' exit code."""
    if args.gpus:
        from pytest_vitperf.ab.gpus import split_over_gpus

        return split_over_gpus(commands, work, args)
    args.prepare_workers = args.prepare_workers or host_prepare_workers(1, args.reuse_compiles)
    env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": args.gpu} if args.gpu is not None else {}))
    explained = None
    progress = Progress(args.threshold, args.confidence, args.budget_s)
    try:
        with processes.interruptible():
            if args.prepare_only:  # the caches filled, say before the GPU window; --resume runs the rounds
                begin(work, args)
                progress.preparing(_preparing(work, args))
                _prepare(commands, work, args, env)
                print(f"vitperf ab: both sides prepared in {work}; run the rounds with: "
                      f"{again(args, prepare_only=False, resume=True)}")
                return 0
            looks, rounds, rows = _run(commands, work, args, env, progress)
            if (args.explain or args.explain_all) and (names := chosen(rows, args.explain_all)):
                overlap = not host_timed(work)
                explained = explain(names, lambda t, ns: in_turn(t, commands, work, ns, env, overlap), work, args)
    except SideFailed as exc:
        print(f"vitperf ab: {exc}", file=sys.stderr)
        return 2
    except processes.Interrupted as exc:
        print(f"vitperf ab: {exc}, and every process it started has ended. {kept(work, args)}; resume with: "
              f"{again(args, resume=True)}", file=sys.stderr)  # fmt: skip
        return exc.code
    finally:
        progress.close()
        _sign_sides(work, args)
    device = f"GPU {args.gpu}" if args.gpu is not None else "the default device"
    from pytest_vitperf.ab.report import processes_in_states, report
    from pytest_vitperf.ab.states import placement

    found = states(rounds)
    odd, aside = processes_in_states(found)
    return report(rows, device, len(rounds), looks, work, args, explained, odd, aside, placement(work, found))
