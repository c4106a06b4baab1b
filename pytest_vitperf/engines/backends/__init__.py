"""Backends: the built-in ones (made through the `pytest_vitperf_make_backend` hook like any a conftest.py adds, see
hookspec.py) and the choice of backend for a run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from pytest_vitperf.engines.backends.base import Backend, Engine, SelfTimed, VitperfError
from pytest_vitperf.engines.backends.tensorrt import TensorRTBackend, TensorRTRTXBackend
from pytest_vitperf.engines.backends.torch import TorchBackend
from pytest_vitperf.engines.backends.trtexec import TrtexecBackend, TrtexecRTXBackend

if TYPE_CHECKING:
    from pytest_vitperf.measure.env import Device

__all__ = ["BUILTIN", "Backend", "Choice", "Engine", "SelfTimed", "VitperfError", "get_backend", "never_timed",
           "select_backend"]

# In order of preference for --vitperf-backend auto, which stops at torch and passes by those never seen to time an
# engine on a GPU (TIMED_ON_GPU): the trtexec ones run only when named, as a second path to the Python API's number.
BUILTIN: dict[str, Callable[[], Backend]] = {
    "tensorrt": TensorRTBackend,
    "tensorrt-rtx": TensorRTRTXBackend,
    "torch": TorchBackend,
    "trtexec": TrtexecBackend,
    "trtexec-rtx": TrtexecRTXBackend,
}


def get_backend(name: str) -> Backend:
    """A built-in backend by name, outside a pytest run (the `vitperf` command)."""
    try:
        return BUILTIN[name]()
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; valid: {', '.join(BUILTIN)}") from None


# The project's own record of each built-in backend timing engines on a GPU. One without a record has never done so
# here: `auto` passes it by, and a run that names it says so (docs/backends.md).
TIMED_ON_GPU = {"torch": "docs/measurements/2026-11-22-h100-main-job-cold-and-warm.md"}


def never_timed(name: str) -> str | None:
    """Why a built-in backend's numbers are not yet to be trusted, or None (one a conftest.py adds is its own)."""
    if name in BUILTIN and name not in TIMED_ON_GPU:
        return f"{name} has never timed an engine on a GPU in this project's records (docs/backends.md)"
    return None


class Choice(NamedTuple):
    """The run's backend, why it cannot run here (None when it can), and why `auto` took it ("" when named)."""

    backend: Backend
    reason: str | None
    why: str = ""


def select_backend(
    name: str,
    device: Device,
    make: Callable[[str], Backend] = get_backend,
    names: Sequence[str] = tuple(BUILTIN),
) -> Choice:
    """The backend to use, why it cannot run here, and why auto took it.

    `auto` takes the first of `names` that can run on `device` and that has timed engines on a GPU in this project's
    records (TIMED_ON_GPU); torch always can. A backend that runs here but has never been seen to time an engine is
    passed by, and the choice says so: a gate must not rest on numbers nobody has checked.
    """
    if name != "auto":
        backend = make(name)
        return Choice(backend, backend.unavailable_reason(device))
    passed = []
    for candidate in names:
        backend = make(candidate)
        if backend.unavailable_reason(device) is not None:
            continue
        if never_timed(candidate):
            passed.append(f"{candidate} {backend.version() or ''}".strip())
            continue
        why = f"auto took {candidate}, the first backend here that this project has timed engines with on a GPU"
        if passed:
            why += (f"; it passed by {', '.join(passed)}, which can run here but never timed an engine on a GPU in "
                    f"this project's records: name one to use it, e.g. --vitperf-backend {passed[0].split()[0]}")
        return Choice(backend, None, why)
    backend = make("torch")
    return Choice(backend, backend.unavailable_reason(device), "auto took torch")
