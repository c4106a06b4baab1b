"""Child processes that cannot outlive the run, and interrupts that end them.

Every process the project starts (`vitperf ab`'s sides, `vitperf calibrate`'s runs, export workers) gets a process
group of its own, so that ending it ends whatever it started too (Inductor's compile workers, xdist's workers), and
the kernel's parent-death signal, so that a parent killed outright (SIGKILL, an OOM kill) takes it along. A child on
a GPU that outlived its parent would sit beside the next job's measurements.

SIGINT and SIGTERM raise `Interrupted` in the main thread, once: the handler puts the default action back, so a
second signal ends the process at once, while the parent-death signal still ends its children. Start a child and
record it under `held()`: an interrupt raised inside Popen, after the fork, would leave a child no one ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOPPED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; `code` is the shell's exit code for it (130, 143)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.code = 128 + signum
        super().__init__(f"{self.name} arrived")


def on_first_signal(error: Callable[[int], BaseException]) -> Callable[[], None]:
    """SIGINT and SIGTERM, the first time, raise `error(signum)` in the main thread, and put the default action back,
    so that a second one kills at once. Returns what puts the old handlers back. Only the main thread may set
    handlers: from another, nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def first(signum: int, frame: Any) -> None:
        for s in STOPPED:
            signal.signal(s, signal.SIG_DFL)
        if _Hold.depth:
            _Hold.pending = error(signum)
            return
        raise error(signum)

    old = {s: signal.signal(s, first) for s in STOPPED}

    def restore() -> None:
        for s, handler in old.items():
            signal.signal(s, handler)

    return restore


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within: the first SIGINT or SIGTERM raises Interrupted, and a second one kills at once."""
    restore = on_first_signal(Interrupted)
    try:
        yield
    finally:
        restore()


class _Hold:
    """held()'s depth, and the interrupt that arrived within it. Python runs signal handlers in the main thread only,
    between its bytecodes: blocking the signals instead would not do, as another thread would take them."""

    depth = 0
    pending: BaseException | None = None


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Within: a first SIGINT or SIGTERM is kept and raised as the block is left (a second one still kills). Start a
    child and record it in one, so that an interrupt cannot land between the two."""
    _Hold.depth += 1
    try:
        yield
    finally:
        _Hold.depth -= 1
        if not _Hold.depth and _Hold.pending is not None:
            pending, _Hold.pending = _Hold.pending, None
            raise pending


def die_with_parent(parent: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent ends (Linux; elsewhere nothing). With `parent`, the
    pid it should have: a parent that ended before the request was made is caught too."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def start(cmd: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """A child in a process group of its own, killed by the kernel if this process dies. Start children from the
    main thread: the parent-death signal follows the thread that started the child, not the process."""
    parent = os.getpid()

    def setup() -> None:  # in the child, between fork and exec
        os.setpgid(0, 0)
        die_with_parent(parent)

    # a run of its own, never the xdist worker its parent may be: pytest-benchmark, where it sees
    # PYTEST_XDIST_WORKER, writes no --benchmark-json
    env = {k: v for k, v in (popen.pop("env", None) or os.environ).items() if not k.startswith("PYTEST_XDIST_")}
    return subprocess.Popen(list(cmd), preexec_fn=setup, env=env, **popen)


def end(child: subprocess.Popen[Any], kill: bool = True) -> int:
    """Reap a started child: killed at once with its whole process group, or (`kill` False) waited for, and then what
    it left running in its group killed. A wait cut short (Interrupted) kills it too."""
    try:
        if not kill:
            child.wait()
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)  # the group outlives its leader while a member lives: never another's
        child.wait()
    return child.returncode


def run(cmd: Sequence[str], **popen: Any) -> subprocess.CompletedProcess[Any]:
    """`start` a child under `held` and wait for its output; an interrupt while waiting ends it and all it started."""
    child: subprocess.Popen[Any] | None = None
    try:
        with held():
            child = start(cmd, **popen)
        out, err = child.communicate()
    finally:
        if child is not None:
            end(child, kill=child.returncode is None)
    return subprocess.CompletedProcess(list(cmd), child.returncode, out, err)
