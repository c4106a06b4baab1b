"""What a `vitperf ab` process does ahead of its turn on the device, on the CPU while another process has the GPU
(imports, hashes, FP32 models), and the wait for that turn (--vitperf-wait-for)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_vitperf.engines.models.zoo import canonical_model_name
from pytest_vitperf.options import WAIT_FOR
from pytest_vitperf.workers import family_of, use_threads

# What a process imports before it waits for its turn, on the CPU while another has the GPU, instead of in its turn:
# a round's process on an H200 spent 2.2 s of its turn in its first interval, which is scipy.stats' first import;
# Inductor's compiler and Model Optimizer's quantization took 1.7 s and 6 s to import on a 2-core CPU (2026-11-28).
AHEAD_OF_TURN = ("torch", "timm", "scipy.stats", "torch._inductor.compile_fx", "modelopt.torch.quantization")
READY = ".ready"  # beside its turn file: touched once the process is ready for its turn (ab.turns.ahead_for reads it)


@dataclass
class Turn:
    """A `vitperf ab` process's turn on the device (--vitperf-wait-for, --vitperf-turn-done), for its time line."""

    began: float = field(default_factory=time.perf_counter)  # when its turn came (else when the process started)
    waited_s: float = 0.0  # importing ahead, then waiting for its turn
    late_s: float = 0.0  # how long its turn had come before it was ready: the device waited for it
    held_s: float = 0.0  # from its turn to handing it on

    def hand_on(self, done: Path) -> list[str]:
        """Its turn is over: touch `done` (vitperf ab begins the next one's) and keep how long it held the device.
        Why `done` could not be written (then the turn is handed on at the exit), if it could not."""
        self.held_s = round(time.perf_counter() - self.began, 1)
        try:
            done.touch()
        except OSError as exc:
            return [f"{done}: {exc.strerror or exc} (the turn was handed on at the exit)"]
        return []


def import_ahead() -> None:
    """Import AHEAD_OF_TURN (after the thread budget is set: Inductor reads it as its config is first imported)."""
    import importlib

    for name in AHEAD_OF_TURN:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def unit_models(units: Path | None) -> set[str] | None:
    """The models of the families a --vitperf-units file keeps (vitperf ab's rows still open). None, every model,
    where there is no such file yet (a process started before the look that writes it) or it keeps other tests."""
    try:
        families = {family_of(line) for line in units.read_text().splitlines() if line} if units else {None}
    except OSError:
        return None
    return None if None in families else {str(f).rsplit("-b", 1)[0] for f in families}


def ahead_of_turn(
    turn: Path, config: Any, models: tuple[str, ...] | None, build: Callable[[str], object], units: Path | None = None
) -> tuple[Turn, dict[str, Any] | None]:
    """What a process waiting for its `turn` file does first, on the CPU while another has the GPU: AHEAD_OF_TURN's
    imports, the hashes a first ready engine's load computes (ready.hash_ahead), pytest-benchmark's CPU probe (a
    subprocess of about 1.5 s on an H200), and `build` of the run's FP32 `models` (2.7 s of an H200 round's 21.7 s
    turn; where none are named, whether the defaults are a GPU's is asked of the driver, which starts no context),
    but those whose families `units` leaves out (unit_models): the nightly set's seven took 12 s and 4 GB on a 2-core
    CPU (2026-12-04), where the rounds after a look may keep one of its 14 families; on one thread. Then it waits.
    Returns its turn, begun (the seconds of the imports and the wait: the time line counts the builds as start-up),
    and the probe's facts."""
    import torch

    from pytest_vitperf.engines.ready import hash_ahead
    from pytest_vitperf.options.resolve import run_defaults

    start = time.perf_counter()
    import_ahead()
    hash_ahead()
    hook = getattr(config.hook, "pytest_benchmark_generate_machine_info", None)
    facts = hook(config=config) if hook is not None else None
    building = time.perf_counter()
    # One thread: initialising weights hardly gains from more (the nightly set's seven on a 2-core CPU: 8.3 s with one,
    # 7.6 s with two), and waiting processes that each take the whole budget crowd the host: two at once took 8.3-8.7 s
    # each with one thread, 15.7-16.5 s with two (2026-12-05). The weights are the same bit for bit (ViT-L, EVA-02).
    restore = use_threads(1)
    try:
        for name in models or run_defaults(torch.cuda.is_available())[0]:
            kept = unit_models(units)  # read again before each: the look may write it meanwhile
            if kept is None or (canonical_model_name(name) or name) in kept:
                with contextlib.suppress(Exception):  # one that cannot be built says so where it always has, in a line
                    build(name)
    finally:
        restore()  # the budget back (workers.share_host set it), for the tests
    built = time.perf_counter() - building
    late = wait_for_turn(turn)
    return Turn(waited_s=round(time.perf_counter() - start - built, 1), late_s=round(late, 1)), facts


TURN_LIMIT_S = 4 * 3600.0  # longer than any process before it should run; a relay that died must not hold us forever


def wait_for_turn(path: Path, limit_s: float = TURN_LIMIT_S, poll_s: float = 0.1) -> float:
    """Block until `path` exists. `vitperf ab` starts a side's next process while the
    one before it runs and writes the file once that one has ended: this process starts and imports meanwhile, on
    the CPU, and touches the GPU only in its turn. It first touches `path`'s READY file: vitperf ab learns how long
    its processes take to be ready, and starts as many ahead as that needs. Returns how long the turn had come
    before this process was ready (0 if it waited): the device waited that long for it."""
    ready = path.with_suffix(READY)
    try:
        ready.touch()
    except OSError as exc:
        raise OSError(f"cannot write {ready} ({exc.strerror or exc}), which says this process is ready for its turn: "
                      f"give vitperf ab a --work-dir it can write") from exc  # fmt: skip
    with contextlib.suppress(FileNotFoundError):
        return max(0.0, ready.stat().st_mtime - path.stat().st_mtime)  # one clock, the file system's
    start = time.monotonic()
    while not path.exists():
        if time.monotonic() - start > limit_s:
            raise TimeoutError(f"waited {limit_s:.0f} s for {path}, which vitperf ab writes when this process's turn "
                               f"comes; run without {WAIT_FOR} to start at once")  # fmt: skip
        time.sleep(poll_s)
    return 0.0
