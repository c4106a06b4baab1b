"""Baselines per backend version and GPU: storage, comparison, and trtexec imports."""

from pytest_vitperf.store.baselines import (
    Baseline,
    BaselineFileError,
    BaselineKey,
    BaselineStorage,
    JsonDirStorage,
)
from pytest_vitperf.verdicts.baselines.compare import Comparison, compare

__all__ = [
    "Baseline",
    "BaselineFileError",
    "BaselineKey",
    "BaselineStorage",
    "Comparison",
    "JsonDirStorage",
    "compare",
]
