"""The backend Protocol: prepare a model at a precision into an Engine, run it, describe it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pytest_vitperf.core.errors import VitperfError

__all__ = ["Backend", "Engine", "SelfTimed", "VitperfError"]

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.measure.kernels import Breakdown
    from pytest_vitperf.measure.timing import Clock


class Engine(Protocol):
    """A model prepared for one precision and batch size, with its input resident on the device. The input is
    `models.fixed_input((batch, C, H, W))`, cast as the engine needs: its output is checked against the FP32 model's
    on that same input (accuracy.py)."""

    backend: str
    model_name: str
    precision: str
    batch: int
    clock: Clock

    def launch(self) -> None:
        """Queue one inference of the whole batch on the engine's stream (synchronous on a CPU)."""
        ...

    def output(self) -> torch.Tensor:
        """Run once, wait, and return the output on the host."""
        ...

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """Run once on `x` (FP32 on the host, the shape of the resident input) and return the output on the host,
        leaving the resident input as it was: how a task's test split goes through the engine (the accuracy
        suite)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Facts about how the engine runs: mode, dtype, sizes, and per-layer detail when known."""
        ...

    def kernel_breakdown(self) -> Breakdown:
        """A separate profiled run: time per inference by kind of kernel (kernels.py)."""
        ...


@runtime_checkable
class SelfTimed(Protocol):
    """An engine that a tool times in its own process (trtexec): `bench` asks it for the samples instead of launching
    it, with the same timing keywords as `timing.sample`. A keyword it cannot honour raises VitperfError."""

    def time_itself(self, *, warmup_ms: float, duration_ms: float, min_iterations: int, **other: Any) -> list[float]:
        ...


class Backend(Protocol):
    name: str

    def version(self) -> str | None: ...

    def unavailable_reason(self, device: Device) -> str | None:
        """Why this backend cannot run on `device`, or None. Must not build anything."""
        ...

    def precision_reason(self, precision: str) -> str | None:
        """Why this backend cannot build `precision` in this environment (a missing optional package), or None."""
        ...

    def prepare(
        self,
        model: torch.nn.Module,
        *,
        model_name: str,
        precision: str,
        batch: int,
        device: Device,
        settings: Settings,
    ) -> Engine:
        """`precision`'s engine of `model` at `batch`. It is given a copy of the run's FP32 model, which it may cast or
        move; a backend whose class sets `keeps_model = True` is given that model itself and leaves it as it was."""
        ...
