"""How far an engine's output is from the FP32 model's on the same fixed input.

A fast engine that computes the wrong thing must not pass: every engine's output is compared with the FP32
model's (eager, on the CPU, where FP32 is not TF32), and each precision's registry entry holds the least cosine it
must reach. The metrics come from numerics.bounds (float64 numpy).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pytest_vitperf.numerics import cosine, max_abs_error, relative_l2
from pytest_vitperf.precision import get_precision

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class OutputError:
    """An output against the FP32 model's output on the same input (the logits of the whole batch)."""

    cosine: float
    max_abs: float
    rel_l2: float
    vs: str = "fp32"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def output_error(reference: torch.Tensor, out: torch.Tensor) -> OutputError:
    ref, got = reference.detach().double().cpu().numpy(), out.detach().double().cpu().numpy()
    return OutputError(cosine(ref, got), max_abs_error(ref, got), relative_l2(ref, got))


def accuracy_failure(precision: str, err: OutputError) -> str | None:
    """Why `err` is too far for `precision` (its registry entry's `min_cosine`), or None."""
    bound = get_precision(precision).min_cosine
    if bound is None or err.cosine >= bound:  # NaN fails: it compares false
        return None
    return (
        f"output cosine {err.cosine:.5f} vs {err.vs} is below {precision}'s bound {bound} "
        f"(max-abs error {err.max_abs:.4g}, relative L2 {err.rel_l2:.4g})"
    )
