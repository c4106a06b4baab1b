"""Backend registry and the choice of backend for a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_vitperf.backends.base import Backend, Engine, VitperfError
from pytest_vitperf.backends.tensorrt import TensorRTBackend, TensorRTRTXBackend
from pytest_vitperf.backends.torch import TorchBackend

if TYPE_CHECKING:
    from pytest_vitperf.env import Device

__all__ = ["BACKENDS", "Backend", "Engine", "VitperfError", "get_backend", "select_backend"]

# In order of preference for --vitperf-backend auto.
BACKENDS: dict[str, type[Backend]] = {
    "tensorrt": TensorRTBackend,
    "tensorrt-rtx": TensorRTRTXBackend,
    "torch": TorchBackend,
}


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}") from None


def select_backend(name: str, device: Device) -> tuple[Backend, str | None]:
    """The backend to use and why it cannot run here (None when it can).

    `auto` picks the first backend in BACKENDS that can run on `device`; torch always can.
    """
    if name != "auto":
        backend = get_backend(name)
        return backend, backend.unavailable_reason(device)
    for candidate in BACKENDS:
        backend = get_backend(candidate)
        if backend.unavailable_reason(device) is None:
            return backend, None
    backend = get_backend("torch")
    return backend, backend.unavailable_reason(device)
