"""pytest-vitperf: Vision Transformer precision benchmarks as pytest tests."""

from __future__ import annotations

from pytest_vitperf.measurement import Measurement, Spec, speedup
from pytest_vitperf.precision import PRECISIONS, Precision, get_precision, unsupported_reason

__all__ = ["PRECISIONS", "Measurement", "Precision", "Spec", "get_precision", "speedup", "unsupported_reason"]
__version__ = "0.1.0"
