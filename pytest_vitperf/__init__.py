"""pytest-vitperf: Vision Transformer precision benchmarks as pytest tests.

What a conftest.py or a script imports is exported here, so that it does not depend on which room of the package
holds it (CHANGELOG.md lists what moved). The heavier names load on first use: importing the plugin stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.precision import PRECISIONS, Precision, Recipe, get_precision, register, unsupported_reason
from pytest_vitperf.measure.measurement import Measurement, Spec, speedup

_LAZY = {
    "Backend": "pytest_vitperf.engines.backends.base",
    "Engine": "pytest_vitperf.engines.backends.base",
    "SelfTimed": "pytest_vitperf.engines.backends.base",
    "build_model": "pytest_vitperf.engines.models.zoo",
    "quantization_coverage": "pytest_vitperf.engines.onnx.coverage",
    "check_attention_shapes": "pytest_vitperf.attention",
    "assert_quantization_friendly": "pytest_vitperf.attention",
}

__all__ = [
    "PRECISIONS",
    "Measurement",
    "Precision",
    "Recipe",
    "Spec",
    "VitperfError",
    "get_precision",
    "register",
    "speedup",
    "unsupported_reason",
    *_LAZY,
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytest_vitperf' has no attribute {name!r}")
