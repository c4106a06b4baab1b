"""Reading trtexec's `--exportTimes` trace: a JSON list with one object per timed inference, holding
startInMs, endInMs, startComputeMs, endComputeMs, startOutMs, endOutMs, inMs, computeMs, outMs, latencyMs
and endToEndMs. Some versions put a `{"count": N}` object first. The samples are the per-query computeMs:
GPU compute time, the figure trtexec summarises as "GPU Compute Time"."""

from __future__ import annotations

import math
from pathlib import Path

from pytest_vitperf.jsonfile import FileError, read_json


class TraceFileError(FileError):
    kind = "trtexec times file"


def read_compute_ms(path: Path) -> list[float]:
    data = read_json(path, TraceFileError)
    if not isinstance(data, list):
        raise TraceFileError(path, "expected a JSON list of per-inference objects (trtexec --exportTimes)")
    count = None
    if data and isinstance(data[0], dict) and set(data[0]) == {"count"}:
        count = data[0]["count"]
        data = data[1:]
    samples = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or "computeMs" not in item:
            raise TraceFileError(path, f"entry {i} has no computeMs; is this an --exportTimes file?")
        v = item["computeMs"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise TraceFileError(path, f"entry {i} computeMs is {v!r}, expected a non-negative number")
        samples.append(float(v))
    if not samples:
        raise TraceFileError(path, "holds no inferences")
    if count is not None and count != len(samples):
        raise TraceFileError(path, f"says count {count} but holds {len(samples)} inferences (truncated?)")
    return samples
