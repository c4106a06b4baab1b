"""`vitperf ab`'s processes: each started fresh, given the GPU in turn, ended with what it started, and read. A process
starts AHEAD turns early (more where turns are short) and waits for its turn file (--vitperf-wait-for) doing CPU work
only; it hands the GPU on once its last test has run (--vitperf-turn-done)."""

from __future__ import annotations

import argparse
import math
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pytest_vitperf.ab.explain import LABEL
from pytest_vitperf.ab.plan import PREPARE_PLAN, own_builds, prepare_args, shared_parts, suite_args
from pytest_vitperf.core import processes
from pytest_vitperf.core.signing import CHECKED_ENV
from pytest_vitperf.options import TURN_DONE, UNITS, WAIT_FOR

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Process

ENDED = ".ended"  # beside a process's JSON: when it ended (report.round_time)
DONE = ".done"  # beside it: touched by the process once its last test has run (--vitperf-turn-done)


class SideFailed(Exception):
    pass


@dataclass
class Running:
    """A started process of one side; `cache` is its own build folder (removed when it ends), else None."""

    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    cache: Path | None
    out: Path  # its --benchmark-json


def start(
    cmd: list[str], side: str, label: str, work: Path, args: argparse.Namespace, env: dict[str, str],
    turn: Path | None = None, units: Path | None = None,
) -> Running:  # fmt: skip
    """A fresh process of `side`, its output kept in the work folder; with `turn`, it runs no test before that file
    exists (--vitperf-wait-for); with `units`, it runs only the tests that file names (--vitperf-units: the rows
    still open). The prepare process (and with --reuse-compiles every process) uses the side's cache, compiles in
    --prepare-workers at once (plan.prepare_args), and measures only PREPARE_PLAN; otherwise a round's process builds
    in a cache of its own that borrows the side's reproducible parts."""
    prepare = label == "prepare"
    own = not prepare and label != LABEL and not args.reuse_compiles  # a profile process is never a timed round
    cache = work / f"cache-{side}"
    if own:
        cache = own_builds(cache, work / f"cache-{side}-{label}", shared_parts(args.pytest_args))
    waits = [f"{WAIT_FOR}={turn}"] if turn is not None else []
    out = work / f"{label}-{side}.json"
    full = [*cmd, "-m", "pytest", "--gpu-bench", "-p", "no:cacheprovider", "-q", f"--benchmark-json={out}",
            f"--vitperf-cache-dir={cache}", f"{TURN_DONE}={out.with_suffix(DONE)}", *waits,
            *(prepare_args(args.prepare_workers) if prepare else ()), *suite_args(args.pytest_args),
            *(PREPARE_PLAN if prepare else ()),
            *([f"{UNITS}={units}"] if units is not None else [])]  # fmt: skip
    log = (work / f"{label}-{side}.log").open("wb")
    if not prepare:  # what it borrows of its side's folder, the side's prepare checked (core/signing.py)
        env = {**env, CHECKED_ENV: str(cache)}
    popen = processes.start(full, stdout=log, stderr=subprocess.STDOUT, env=env)
    return Running(popen, log, cache if own else None, out)


@dataclass
class Ahead:
    """The next block's first processes, started while this block's last ones run, before the look that says whether
    that block comes and which tests it keeps (`units`, the file the look writes; plan.open_units): their start (an
    interpreter, imports, FP32 models: about 12 s on an H200) overlaps this block's turns, not the GPU's wait after
    the look. Those the next block does not run are ended unused."""

    tasks: list[tuple[str, str]]
    units: Path
    started: dict[tuple[str, str], Running] = field(default_factory=dict)

    def take(self, tasks: list[tuple[str, str]]) -> list[Running]:
        """The started processes of the first of `tasks`, in order, to run them; every other one is ended."""
        out = []
        for task in tasks:
            if task not in self.started:
                break
            out.append(self.started.pop(task))
        self.drop()
        return out

    def drop(self) -> None:
        """End them all, unused: no block follows, or it keeps other tests than they were given."""
        _unused(list(self.started.values()))
        self.started.clear()


def end(r: Running, kill: bool = False) -> int:
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


def host_timed(work: Path) -> bool:
    """Whether side A's prepare process timed on the host (a CPU run): the CPU is then what is measured."""
    from pytest_vitperf.measure.measurement import read_benchmark_json
    from pytest_vitperf.measure.timing import PerfCounterClock

    return any(m.spec.timer == PerfCounterClock.name for m in read_benchmark_json(work / "prepare-A.json"))


def gpu_likely(env: dict[str, str]) -> bool:
    """Whether the sides will time a GPU, guessed before the prepares say (host_timed): NVML counts one, and
    CUDA_VISIBLE_DEVICES does not hide them all. A wrong guess costs only processes started early and ended unused."""
    from pytest_vitperf.workers import host_gpu_count

    return env.get("CUDA_VISIBLE_DEVICES", "0").strip() not in ("", "-1") and bool(host_gpu_count())


# How many processes wait for their turn while one runs. One turn ahead was enough while a turn took 20 s or more;
# at 13 s (H200, 2026-11-29) the next process, which needs about 12 s before it can take its turn, was sometimes not
# ready, and 15.4 s passed from one process's results to the next one's. The two after the first start with the
# prepares: started once those had ended, round 0's side B was ready 5.5 s after its turn came (H200, fce8755).
AHEAD = 2
# Where turns are short (the rows still open after a look: 2 engines took a 3 s turn on an H200), two ahead are not
# ready in time, and a round took about 23 s where its turns took 6 s (2026-12-02). So more wait then: as many as
# READY_S, what a process needs before it can take its turn, holds turns of the last one's length, up to MOST_AHEAD.
READY_S, MOST_AHEAD = 12.0, 6


def ahead_for(turn_s: float | None) -> int:
    """How many processes wait for their turn while one runs, after a turn of `turn_s` seconds (None: none yet)."""
    return AHEAD if not turn_s else max(AHEAD, min(MOST_AHEAD, math.ceil(READY_S / turn_s)))


def in_turn(
    tasks: list[tuple[str, str]], commands: dict[str, list[str]], work: Path, args: argparse.Namespace,
    env: dict[str, str], overlap: bool | Callable[[], bool] = True, guess: bool | None = None,
    units: Path | None = None, ended: Callable[[int, Process], None] | None = None,
    ready: Ahead | None = None, then: Ahead | None = None,
) -> list[Process]:  # fmt: skip
    """The processes of `tasks` ((label, side), in order), one at a time on the GPU. With `overlap`, each one starts
    AHEAD turns early (ahead_for: more after a short turn) and waits for a turn file written once the one before it is
    done with the GPU (its last test has run) or has ended: its interpreter, imports and FP32 models (CPU work,
    about 12 s on an H200) overlap the others' runs, and its turn the other's reports and exit; it touches the GPU
    in its own turn. Without, each starts once the one before it has ended (a CPU run times the CPU itself).
    `overlap` may be what comes first (the prepares) and says whether they overlap: the first process starts
    meanwhile, and has its turn once that has returned. So do the AHEAD after it where `guess` (default: gpu_likely)
    says they will overlap; they are ended unused if not. `units` narrows every process's tests (start); `ended(k,
    process)` is told once task k has been read (it then says so; else each process's count is printed). `ready`:
    the first tasks' processes, started by the block before (the others it holds end unused); `then`: the next
    block's, started ahead after the last of `tasks` as if they followed, and left waiting for their turns in it."""
    then = then or Ahead([], work)
    queue, given = [*tasks, *then.tasks], [units] * len(tasks) + [then.units] * len(then.tasks)
    turns = [work / f"{label}-{side}.turn" for label, side in queue]
    waiting, turn_began = AHEAD, time.monotonic()
    started: list[Running] = ready.take(tasks) if ready is not None else []
    for t in [*turns[len(started) :], *(work / f"{label}-{side}{DONE}" for label, side in queue[len(started) :])]:
        t.unlink(missing_ok=True)  # an earlier run's, cut off
    done: list[Process] = []

    def begin(j: int, waits: bool = True) -> Running:  # queue[j]'s process, waiting for its turn file if `waits`
        label, side = queue[j]
        return start(commands[side], side, label, work, args, env, turns[j] if waits else None, given[j])

    def hand_on(turn: Path) -> None:  # the next turn begins; how many wait depends on how long this one took
        nonlocal waiting, turn_began
        turn.touch()
        waiting, turn_began = ahead_for(time.monotonic() - turn_began), time.monotonic()

    try:
        ahead = overlap
        if callable(overlap):
            first = 1 + AHEAD * (gpu_likely(env) if guess is None else guess)
            with processes.held():
                started += [begin(j) for j in range(len(started), min(first, len(tasks)))]
            ahead = overlap()
            if not ahead:  # a CPU run: none may import beside the one timed
                _unused(started[1:])
                del started[1:]
            if tasks:
                turns[0].touch()
                turn_began = time.monotonic()
        for k, (label, side) in enumerate(tasks):
            with processes.held():
                if len(started) == k:  # not started ahead
                    started.append(begin(k, waits=False))
                while ahead and len(started) < min(len(queue), k + 1 + waiting):
                    started.append(begin(len(started)))
            nxt = turns[k + 1] if ahead and k + 1 < len(tasks) else None
            early = nxt is not None and _done_with_gpu(started[k])
            if nxt is not None and early:
                hand_on(nxt)  # while it writes its results and exits
            rc = end(started[k])
            done.append(read(work, side, label, rc, args, say=ended is None))
            if ended is not None:
                ended(k, done[-1])
            if nxt is not None and not early:
                hand_on(nxt)  # it ended without saying it was done: only once it has results
    except BaseException:
        _unused(started[len(done) :])  # a side failed, or we were interrupted: no process is left waiting for its turn
        raise
    then.started = dict(zip(then.tasks, started[len(tasks) :], strict=False))  # they wait for the next block
    return done


def _unused(started: list[Running]) -> None:
    for r in started:
        end(r, kill=True)


def _done_with_gpu(r: Running, poll_s: float = 0.05) -> bool:
    """Whether the process touched its --vitperf-turn-done file, waited for until it did or ended."""
    done = r.out.with_suffix(DONE)
    while r.popen.poll() is None and not done.exists():
        time.sleep(poll_s)
    return done.exists()


def read(work: Path, side: str, label: str, rc: int, args: argparse.Namespace, say: bool = True) -> Process:
    """The rows of a process that exited `rc`, from the JSON it wrote in the work folder (`start` names it)."""
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
                         f"{log}. Fix it, then run again: {again(args)}")  # fmt: skip
    if say:
        print(f"{label} {side}: {len(measured)} measurements", flush=True)
    return {f"{m.spec.model} {m.spec.precision} b{m.spec.batch}": Side(m.median, m.sm_mhz) for m in measured}


def again(args: argparse.Namespace, resume: bool = False) -> str:
    """The command as given (with --resume if `resume`), to end a failure message with."""
    opts = [f"--a {shlex.quote(args.a)}", f"--b {shlex.quote(args.b)}"]
    opts += [f"--rounds {args.rounds}"] if args.rounds else []
    opts += [f"--budget-s {args.budget_s:g}"] if getattr(args, "budget_s", 0) else []
    opts += [f"--{k} {shlex.quote(getattr(args, k))}" for k in ("gpu", "gpus") if getattr(args, k, None)]
    opts += [f"--work-dir {shlex.quote(str(args.work_dir))}"] if args.work_dir else []
    opts += ["--reuse-compiles"] * bool(args.reuse_compiles) + ["--resume"] * bool(args.resume or resume)
    return " ".join(["vitperf ab", *opts, "--", *map(shlex.quote, args.pytest_args)])


def recorded(work: Path, label: str, side: str, args: argparse.Namespace, say: bool = True) -> Process | None:
    """A process that an earlier run of this work folder finished, or None (never run, or cut off mid-write)."""
    try:
        return read(work, side, label, 0, args, say) if (work / f"{label}-{side}.json").exists() else None
    except SideFailed:
        return None
