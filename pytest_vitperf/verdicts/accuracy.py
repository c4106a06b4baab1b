"""How far an engine's output is from the FP32 model's: on the fixed input, and on a task.

A fast engine that computes the wrong thing must not pass: every engine's output is compared with the FP32
model's (eager, on the CPU, where FP32 is not TF32), and each precision's registry entry holds the least cosine it
must reach. The metrics come from numerics.bounds (float64 numpy).

On a task (the digits ViT's test split, digits.py), `task_accuracy` adds what a user weighs a precision by: top-1
accuracy and its drop from FP32, top-1 agreement with the FP32 model, and the absolute error at a quantile (as
Polygraphy's `--check-error-stat quantile`); `TaskBound` in the registry says what each precision may cost. Every
image is judged by FP32 and by the precision, so the drop's interval is the paired one, with McNemar's exact test.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.precision import TaskBound, get_precision
from pytest_vitperf.numerics import cosine, max_abs_error, relative_l2
from pytest_vitperf.verdicts.proportions import Share, mcnemar_exact, paired_difference, wilson
from pytest_vitperf.verdicts.stats import CONFIDENCE

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


FAKE_QUANT_VIA = "Model Optimizer fake quant"  # how a TaskAccuracy's `via` begins when no engine made its logits
DIGITS_TASK = "digits ViT test split"  # the default task; a user's folder names its model and folder
ERROR_QUANTILE = 0.99  # the absolute logit error 99% of the test split's logits stay under


@dataclass(frozen=True)
class TaskAccuracy:
    """One precision's logits on a test split against the FP32 model's, and the labels."""

    precision: str
    via: str  # what produced the logits: "torch engine (cpu)", "Model Optimizer fake quant (cpu)", ...
    images: int
    top1: float
    fp32_top1: float
    agreement: float  # share of images whose top-1 class is the FP32 model's
    error: OutputError
    error_quantile: float  # |logit - FP32 logit| at ERROR_QUANTILE
    lost: int = 0  # images FP32 classifies right and this precision wrong
    gained: int = 0  # images FP32 classifies wrong and this precision right
    task: str = DIGITS_TASK
    floor: str = ""  # the accuracy floor's verdict (verdicts/floors.py): pass, FAIL, inconclusive; "" without one

    @property
    def drop(self) -> float:
        """Points of top-1 accuracy lost against FP32 (negative: gained)."""
        return (self.fp32_top1 - self.top1) * 100

    def drop_interval(self, confidence: float = CONFIDENCE) -> Share:
        """FP32's top-1 minus this precision's, as a fraction, with its interval: every image is judged by both, so
        the interval is the paired one (only the images whose verdict changed move it)."""
        fp32_right = round(self.fp32_top1 * self.images)
        both = fp32_right - self.lost
        return paired_difference(both, self.lost, self.gained, self.images - both - self.lost - self.gained, confidence)

    def agreement_interval(self, confidence: float = CONFIDENCE) -> Share:
        """The share of images whose top-1 class is FP32's, with its Wilson interval: it separates formats long
        before accuracy does, since a changed class need not be a changed verdict."""
        return wilson(round(self.agreement * self.images), self.images, confidence)

    @property
    def mcnemar_p(self) -> float:
        """McNemar's exact test of the precision scoring as FP32 does, from the images whose verdict changed."""
        return mcnemar_exact(self.lost, self.gained)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drop": self.drop, "quantile": ERROR_QUANTILE, "mcnemar_p": self.mcnemar_p,
                "drop_interval": self.drop_interval().to_dict(),
                "agreement_interval": self.agreement_interval().to_dict()}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskAccuracy:
        derived = ("drop", "quantile", "drop_interval", "agreement_interval", "mcnemar_p")
        fields = {k: v for k, v in d.items() if k not in derived}
        return cls(**{**fields, "error": OutputError(**fields["error"])})


def task_accuracy(
    precision: str,
    via: str,
    logits: torch.Tensor,
    reference: torch.Tensor,
    labels: torch.Tensor,
    task: str = DIGITS_TASK,
) -> TaskAccuracy:
    """`logits` and the FP32 model's `reference` logits ([images, classes]) against `labels` ([images]) of `task`."""
    import numpy as np

    got, ref = logits.detach().double().cpu().numpy(), reference.detach().double().cpu().numpy()
    y = labels.cpu().numpy()
    top, ref_top = got.argmax(-1), ref.argmax(-1)
    return TaskAccuracy(
        precision=precision,
        via=via,
        images=len(y),
        top1=float(np.mean(top == y)),
        fp32_top1=float(np.mean(ref_top == y)),
        agreement=float(np.mean(top == ref_top)),
        error=output_error(reference, logits),
        error_quantile=float(np.quantile(np.abs(got - ref), ERROR_QUANTILE)),
        lost=int(np.sum((ref_top == y) & (top != y))),
        gained=int(np.sum((ref_top != y) & (top == y))),
        task=task,
    )


def task_failures(acc: TaskAccuracy, bound: TaskBound) -> list[str]:
    """What in `acc` is beyond `bound`; empty when within it. NaN logits fail every bound they meet."""
    out = []
    if bound.max_drop is not None and not acc.drop <= bound.max_drop:
        out.append(
            f"top-1 {acc.top1:.2%} is {acc.drop:.2f} points below FP32's {acc.fp32_top1:.2%} (at most {bound.max_drop})"
        )
    if bound.min_agreement is not None and not acc.agreement >= bound.min_agreement:
        out.append(f"top-1 agreement with FP32 {acc.agreement:.2%} (at least {bound.min_agreement:.2%})")
    if bound.min_cosine is not None and not acc.error.cosine >= bound.min_cosine:
        out.append(f"logit cosine {acc.error.cosine:.5f} (at least {bound.min_cosine})")
    return out


def first_nonfinite(model: torch.nn.Module, x: torch.Tensor) -> str | None:
    """The first module, in execution order, whose output holds NaN or Inf on `x`; None if none does."""
    import torch

    bad: list[str] = []

    def check(name: str) -> Any:
        def hook(_m: Any, _a: Any, out: Any) -> None:
            if not bad and isinstance(out, torch.Tensor) and out.is_floating_point() and not torch.isfinite(out).all():
                bad.append(name or type(model).__name__)

        return hook

    handles = [m.register_forward_hook(check(n)) for n, m in model.named_modules()]
    try:
        with torch.inference_mode():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return bad[0] if bad else None
