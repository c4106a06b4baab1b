"""Backends: the built-in ones, made through the `pytest_vitperf_make_backend` hook like any a conftest.py adds,
and the choice of backend for a run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_vitperf.backends.base import Backend, Engine, SelfTimed, VitperfError
from pytest_vitperf.backends.tensorrt import TensorRTBackend, TensorRTRTXBackend
from pytest_vitperf.backends.torch import TorchBackend
from pytest_vitperf.backends.trtexec import TrtexecBackend, TrtexecRTXBackend
from pytest_vitperf.hookspec import backend_names

if TYPE_CHECKING:
    from pytest_vitperf.env import Device

__all__ = [
    "BUILTIN", "Backend", "BuiltinBackends", "Engine", "SelfTimed", "VitperfError", "get_backend", "select_backend"
]

# In order of preference for --vitperf-backend auto, which stops at torch: the trtexec ones run only when named, as
# a second path to the number the Python API gives.
BUILTIN: dict[str, Callable[[], Backend]] = {
    "tensorrt": TensorRTBackend,
    "tensorrt-rtx": TensorRTRTXBackend,
    "torch": TorchBackend,
    "trtexec": TrtexecBackend,
    "trtexec-rtx": TrtexecRTXBackend,
}


class BuiltinBackends:
    """The built-in backends as a pytest plugin: they register through the same hooks as a user's."""

    @pytest.hookimpl(tryfirst=True)  # first in the list: auto prefers them
    def pytest_vitperf_backend_names(self) -> list[str]:
        return list(BUILTIN)

    @pytest.hookimpl(trylast=True)  # a conftest.py may replace a built-in under its name
    def pytest_vitperf_make_backend(self, name: str) -> Backend | None:
        factory = BUILTIN.get(name)
        return factory() if factory is not None else None


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


def hook_maker(config: Any) -> tuple[Callable[[str], Backend], list[str]]:
    """The make function and the names of every backend the run's plugins and conftest.py files provide."""
    names = backend_names(config)

    def make(name: str) -> Backend:
        backend = config.hook.pytest_vitperf_make_backend(config=config, name=name)
        if backend is None:
            raise ValueError(f"unknown backend {name!r}; valid: auto, {', '.join(names)}")
        return backend

    return make, names
