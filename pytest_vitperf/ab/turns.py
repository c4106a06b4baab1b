"""`vitperf ab`'s processes: each started fresh, given the GPU in turn, ended with what it started, and read. A process
starts AHEAD turns early (more where turns are short) and waits for its turn file (--vitperf-wait-for) doing CPU work
only; it hands the GPU on once its last test has run (--vitperf-turn-done)."""

from __future__ import annotations

import argparse
import functools
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
from pytest_vitperf.ab.plan import PREPARE_PLAN, host, own_builds, prepare_args, shared_parts, suite_args
from pytest_vitperf.ahead import READY
from pytest_vitperf.core import processes
from pytest_vitperf.core.relay import GO, alternate
from pytest_vitperf.core.signing import CHECKED_ENV
from pytest_vitperf.options import RELAY, TURN_DONE, UNITS, WAIT_FOR

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Process

ENDED = ".ended"  # beside a process's JSON: when it ended (report.round_time)
DONE = ".done"  # beside it: touched by the process once its last test has run (--vitperf-turn-done)
RELAYED = ".relay"  # beside it: its relay file (--vitperf-relay), where a round's two processes share the GPU


class SideFailed(Exception):
    pass


@dataclass
class Running:
    """A started process of one side; `cache` is its own build folder (removed when it ends), else None."""

    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    cache: Path | None
    out: Path  # its --benchmark-json
    began: float  # when it was started, by the file system's clock (ready_after)


def start(
    cmd: list[str], side: str, label: str, work: Path, args: argparse.Namespace, env: dict[str, str],
    turn: Path | None = None, units: Path | None = None, relay: bool = False,
) -> Running:  # fmt: skip
    """A fresh process of `side`, its output kept in the work folder; with `turn`, it runs no test before that file
    exists (--vitperf-wait-for); with `units`, it runs only the tests that file names (--vitperf-units: the rows
    still open). The prepare process (and with --reuse-compiles every process) uses the side's cache, compiles in
    --prepare-workers at once (plan.prepare_args), and measures only PREPARE_PLAN; otherwise a round's process builds
    in a cache of its own that borrows the side's reproducible parts. With `relay`, it shares the GPU with the other
    process of its round (core/relay.py)."""
    prepare = label == "prepare"
    own = not prepare and label != LABEL and not args.reuse_compiles  # a profile process is never a timed round
    cache = work / f"cache-{side}"
    if own:
        cache = own_builds(cache, work / f"cache-{side}-{label}", shared_parts(args.pytest_args))
    waits = [f"{WAIT_FOR}={turn}"] if turn is not None else []
    out = work / f"{label}-{side}.json"
    relays = [out.with_suffix(RELAYED), out.with_suffix(RELAYED + GO)]
    for f in relays:
        f.unlink(missing_ok=True)  # an earlier run's, cut off: a stale answer would let it measure out of turn
    full = [*cmd, "-m", "pytest", "--gpu-bench", "-p", "no:cacheprovider", "-q", f"--benchmark-json={out}",
            f"--vitperf-cache-dir={cache}", f"{TURN_DONE}={out.with_suffix(DONE)}", *waits,
            *(prepare_args(args.prepare_workers) if prepare else ()), *suite_args(args.pytest_args),
            *(PREPARE_PLAN if prepare else ()),
            *([f"{UNITS}={units}"] if units is not None else []),
            *([f"{RELAY}={relays[0]}"] if relay else [])]  # fmt: skip
    log = (work / f"{label}-{side}.log").open("wb")
    if not prepare:  # what it borrows of its side's folder, the side's prepare checked (core/signing.py)
        env = {**env, CHECKED_ENV: str(cache)}
    began = time.time()
    popen = processes.start(full, stdout=log, stderr=subprocess.STDOUT, env=env)
    return Running(popen, log, cache if own else None, out, began)


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
        for f in (r.out.with_suffix(RELAYED), r.out.with_suffix(RELAYED + GO)):
            f.unlink(missing_ok=True)  # its relay's hand-overs, done
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
# ready in time, and a round took about 23 s where its turns took 6 s (2026-12-02). So more wait then: as many turns
# of the last one's length as a process needs before it can take its turn, up to MOST_AHEAD processes. What it needs
# is measured (ready_after); READY_S until then. A process of the nightly set needed 82 s (H200, 2026-12-04).
READY_S = 12.0
# Up to MOST_AHEAD, as far as the host holds them: a process getting ready takes about a CPU (imports, then its FP32
# models on one thread: ahead.ahead_of_turn) and up to AHEAD_GIB (the nightly set's seven models), and TIMED_CPUS stay
# with the pair being timed. 6 were too few where turns took 5-8 s and a process 28-41 s to be ready: each block's
# last round waited 10-14 s. With 12 those blocks took 24-28 s, not 37-40, and processes timed beside 9-13 others
# getting ready spread as beside fewer (docs/measurements/2026-12-05-h200-nightly-cold-aa-at-131cc22-and-latency-aa.md).
MOST_AHEAD, AHEAD_GIB, TIMED_CPUS = 12, 4.0, 4


def most_ahead(cpus: int, free_gib: float) -> int:
    """How many processes may wait for their turn at most, on a host of `cpus` with `free_gib` of memory free."""
    return max(AHEAD, min(MOST_AHEAD, cpus - TIMED_CPUS, int(free_gib // AHEAD_GIB)))


def ahead_for(turn_s: float | None, ready_s: float = READY_S, group: int = 1, most: int = MOST_AHEAD) -> int:
    """How many processes wait for their turn while one runs, after a turn of `turn_s` seconds (None: none yet),
    where a process needs `ready_s` before it can take its turn and `group` processes take a turn together (--relay:
    a round's two); `most` at most (most_ahead)."""
    return AHEAD if not turn_s else max(AHEAD, min(most, group * math.ceil(ready_s / turn_s)))


def ready_after(r: Running, turn: Path) -> float | None:
    """How long a process waiting for its `turn` file took from its start to being ready for it (the READY file it
    touches: ahead.wait_for_turn), None if it is not ready yet or waits for none."""
    try:
        return max(0.0, turn.with_suffix(READY).stat().st_mtime - r.began)
    except FileNotFoundError:
        return None


def in_turn(
    tasks: list[tuple[str, str]], commands: dict[str, list[str]], work: Path, args: argparse.Namespace,
    env: dict[str, str], overlap: bool | Callable[[], bool] = True, guess: bool | None = None,
    units: Path | None = None, ended: Callable[[int, Process], None] | None = None,
    ready: Ahead | None = None, then: Ahead | None = None, relay: bool = False,
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
    block's, started ahead after the last of `tasks` as if they followed, and left waiting for their turns in it.
    With `relay`, the two processes of a round (consecutive tasks of one label) have their turn together and share
    the GPU a family at a time (core/relay.py)."""
    then = then or Ahead([], work)
    queue, given = [*tasks, *then.tasks], [units] * len(tasks) + [then.units] * len(then.tasks)
    turns = [work / f"{label}-{side}.turn" for label, side in queue]
    groups = _groups(queue, relay)
    waiting, turn_began, need, most = AHEAD, time.monotonic(), READY_S, most_ahead(*host())
    started: list[Running] = ready.take(tasks) if ready is not None else []
    _clear(work, queue[len(started) :])
    done: list[Process] = []
    tell = ended or (lambda k, process: None)

    def begin(j: int, waits: bool = True) -> Running:  # queue[j]'s process, waiting for its turn file if `waits`
        label, side = queue[j]
        return start(commands[side], side, label, work, args, env, turns[j] if waits else None, given[j],
                     len(groups[j]) > 1)  # fmt: skip

    def hand_on(group: list[int]) -> None:  # the next turn begins; how many wait depends on how long this one took
        nonlocal waiting, turn_began
        for j in group:
            turns[j].touch()
        waiting, turn_began = ahead_for(time.monotonic() - turn_began, need, len(group), most), time.monotonic()

    def finish(group: list[int], nxt: list[int]) -> None:  # the group's turn to its end; then the next group's
        nonlocal need
        early = _done_with_gpu([started[j] for j in group])
        seen = [s for j in group + nxt if j < len(started) and (s := ready_after(started[j], turns[j])) is not None]
        need = max(seen, default=need)  # the last ones to be ready: what the processes started next will need
        if early:
            hand_on(nxt)  # while they write their results and exit
        for j in group:
            done.append(read(work, queue[j][1], queue[j][0], end(started[j]), args, say=ended is None))
            tell(j, done[-1])
        if not early:
            hand_on(nxt)  # one ended without saying it was done: only once it has results

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
                hand_on(groups[0])
        for group in [g for k, g in enumerate(groups[: len(tasks)]) if g[0] == k]:
            with processes.held():
                while len(started) <= group[-1]:  # not started ahead
                    started.append(begin(len(started), waits=False))
                while ahead and len(started) < min(len(queue), group[-1] + 1 + waiting):
                    started.append(begin(len(started)))
            finish(group, groups[group[-1] + 1] if ahead and group[-1] + 1 < len(tasks) else [])
    except BaseException:
        _unused(started[len(done) :])  # a side failed, or we were interrupted: no process is left waiting for its turn
        raise
    then.started = dict(zip(then.tasks, started[len(tasks) :], strict=False))  # they wait for the next block
    return done


def _clear(work: Path, tasks: list[tuple[str, str]]) -> None:
    """The turn and done files of tasks not started yet: an earlier run's, cut off."""
    for label, side in tasks:
        for suffix in (".turn", DONE, READY):
            (work / f"{label}-{side}{suffix}").unlink(missing_ok=True)


def _groups(queue: list[tuple[str, str]], relay: bool) -> list[list[int]]:
    """Each task's group, by index: the tasks that have their turn together (a round's two, with `relay`)."""
    out: list[list[int]] = []
    for j, (label, _) in enumerate(queue):
        paired = relay and j and queue[j - 1][0] == label and len(out[j - 1]) == 1
        out.append(out[j - 1] + [j] if paired else [j])
        if paired:
            out[j - 1] = out[j]
    return out


def _ended_or_done(r: Running) -> bool:
    return r.popen.poll() is not None or r.out.with_suffix(DONE).exists()


def _unused(started: list[Running]) -> None:
    for r in started:
        end(r, kill=True)


def _done_with_gpu(group: list[Running], poll_s: float = 0.05) -> bool:
    """Whether every process of a group touched its --vitperf-turn-done file, waited for until each did or ended; a
    relayed pair (two) is given the GPU in turn meanwhile."""
    if len(group) > 1:
        alternate([r.out.with_suffix(RELAYED) for r in group], [functools.partial(_ended_or_done, r) for r in group])
    for r in group:
        while not _ended_or_done(r):
            time.sleep(poll_s)
    return all(r.out.with_suffix(DONE).exists() for r in group)


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


def again(args: argparse.Namespace, **changed: object) -> str:
    """The command as given, but for the options `changed` (resume=True adds --resume, work_dir=None drops the
    folder), to end a failure message with."""
    args = argparse.Namespace(**{**vars(args), **changed})
    opts = [f"--a {shlex.quote(args.a)}", f"--b {shlex.quote(args.b)}"]
    opts += [f"--rounds {args.rounds}"] if args.rounds else []
    opts += [f"--budget-s {args.budget_s:g}"] if getattr(args, "budget_s", 0) else []
    opts += [f"--{k} {shlex.quote(getattr(args, k))}" for k in ("gpu", "gpus") if getattr(args, k, None)]
    opts += [f"--work-dir {shlex.quote(str(args.work_dir))}"] if args.work_dir else []
    opts += ["--reuse-compiles"] * bool(args.reuse_compiles) + ["--relay"] * bool(getattr(args, "relay", False))
    opts += ["--prepare-only"] * bool(getattr(args, "prepare_only", False))
    opts += ["--resume"] * bool(args.resume)
    return " ".join(["vitperf ab", *opts, "--", *map(shlex.quote, args.pytest_args)])


def recorded(work: Path, label: str, side: str, args: argparse.Namespace, say: bool = True) -> Process | None:
    """A process that an earlier run of this work folder finished, or None (never run, or cut off mid-write)."""
    try:
        return read(work, side, label, 0, args, say) if (work / f"{label}-{side}.json").exists() else None
    except SideFailed:
        return None
