"""Backends: the built-in ones (made through the `pytest_vitperf_make_backend` hook like any a conftest.py adds, see
hookspec.py) and the choice of backend for a run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_vitperf.engines.backends.base import Backend, Engine, SelfTimed, VitperfError
from pytest_vitperf.engines.backends.tensorrt import TensorRTBackend, TensorRTRTXBackend
from pytest_vitperf.engines.backends.torch import TorchBackend
from pytest_vitperf.engines.backends.trtexec import TrtexecBackend, TrtexecRTXBackend

if TYPE_CHECKING:
    from pytest_vitperf.measure.env import Device

__all__ = ["BUILTIN", "Backend", "Engine", "SelfTimed", "VitperfError", "get_backend", "select_backend"]

# In order of preference for --vitperf-backend auto, which stops at torch: the trtexec ones run only when named, as
# a second path to the number the Python API gives.
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


def select_backend(
    name: str,
    device: Device,
    make: Callable[[str], Backend] = get_backend,
    names: Sequence[str] = tuple(BUILTIN),
) -> tuple[Backend, str | None]:
    """The backend to use and why it cannot run here (None when it can).

    `auto` picks the first of `names` that can run on `device`; torch always can.
    """
    if name != "auto":
        backend = make(name)
        return backend, backend.unavailable_reason(device)
    for candidate in names:
        backend = make(candidate)
        if backend.unavailable_reason(device) is None:
            return backend, None
    backend = make("torch")
    return backend, backend.unavailable_reason(device)
