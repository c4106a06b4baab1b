"""Baselines per backend version and GPU: storage, comparison, and trtexec imports."""

from pytest_vitperf.verdicts.baselines.compare import Comparison, compare
from pytest_vitperf.verdicts.baselines.store import (
    Baseline,
    BaselineFileError,
    BaselineKey,
    BaselineStorage,
    JsonDirStorage,
)

__all__ = [
    "Baseline",
    "BaselineFileError",
    "BaselineKey",
    "BaselineStorage",
    "Comparison",
    "JsonDirStorage",
    "compare",
]
