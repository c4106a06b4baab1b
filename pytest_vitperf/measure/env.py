"""What this run measures on: the device, its driver and runtime, and the software versions.

These facts go into the report header, pytest-benchmark's machine_info and every Measurement, and
they key baselines and floors: a number means nothing without them.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import cache
from importlib import metadata
from typing import Any


@contextlib.contextmanager
def environ(name: str, value: str | None) -> Iterator[None]:
    """`name` set to `value` in the environment for the block (unchanged when `value` is None), then restored:
    compilers that read their cache location only from the environment (Inductor, torch's C++ extension builder)."""
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if value is not None:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def slug(text: str) -> str:
    """File-system-safe key, e.g. 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


@dataclass(frozen=True)
class Device:
    name: str
    sm: int | None = None  # compute capability as 90 for 9.0; None on a CPU
    memory_bytes: int | None = None
    driver: str | None = None
    cuda_runtime: str | None = None
    index: int = 0  # torch's CUDA index (after CUDA_VISIBLE_DEVICES)
    uuid: str | None = None  # "GPU-...", as nvidia-smi prints it: the index alone is not stable across machines

    @property
    def kind(self) -> str:
        return "cpu" if self.sm is None else "cuda"

    @property
    def torch_device(self) -> str:
        return "cpu" if self.sm is None else f"cuda:{self.index}"

    def describe(self) -> str:
        if self.sm is None:
            return f"CPU {self.name} (no CUDA GPU)"
        mem = f", {self.memory_bytes / 2**30:.1f} GiB" if self.memory_bytes else ""
        return (
            f"GPU {self.name} (sm_{self.sm}{mem}), driver {self.driver or '?'}, CUDA runtime {self.cuda_runtime or '?'}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def version_of(*dists: str) -> str | None:
    """Installed version of the first distribution found, without importing it."""
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _smi(fields: str) -> list[str] | None:
    """First GPU's answers to an nvidia-smi query, or None where there is no nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.strip().splitlines()
    return [v.strip() for v in lines[0].split(",")] if lines else None


def _driver_version() -> str | None:
    answer = _smi("driver_version")
    return answer[0] if answer else None


def fingerprint(device: Device) -> dict[str, Any]:
    """What a baseline records about where it was measured, beyond the key (backend, version, GPU)."""
    out: dict[str, Any] = {"device": device.name, "sm": device.sm, "driver": device.driver}
    out["cuda_runtime"] = device.cuda_runtime
    out.update({k: v for k, v in software_versions().items() if v is not None})
    facts = gpu_clock_facts(device)
    if facts:
        out["clocks"] = facts
        out["power_limit_w"] = facts.get("power_limit_w")  # top level: the baseline gate notes when it changes
    return out


def gpu_clock_facts(device: Device) -> dict[str, Any]:
    """Default and max clocks and the enforced power limit, through NVML; {} without a GPU or NVML."""
    from pytest_vitperf.measure.clocks import NvmlProbe

    probe = NvmlProbe.open(device.index) if device.sm is not None else None
    return probe.facts() if probe is not None else {}


@cache
def probe_device(index: int = 0) -> Device:
    """The CUDA device `index` as torch sees it (honours CUDA_VISIBLE_DEVICES), else the CPU."""
    import torch

    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        return Device(name=_cpu_name())
    props = torch.cuda.get_device_properties(index)
    return Device(
        name=props.name,
        sm=props.major * 10 + props.minor,
        memory_bytes=int(props.total_memory),
        driver=_driver_version(),
        cuda_runtime=torch.version.cuda,
        index=index,
        uuid=f"GPU-{props.uuid}",
    )


def software_versions() -> dict[str, str | None]:
    return {
        "python": platform.python_version(),
        "torch": version_of("torch"),
        "timm": version_of("timm"),
        "modelopt": version_of("nvidia-modelopt"),
        "tensorrt": version_of("tensorrt", "tensorrt-cu13", "tensorrt-cu12"),
        "tensorrt-rtx": version_of("tensorrt-rtx-cu13", "tensorrt-rtx-cu12", "tensorrt_rtx"),
        "pytest-vitperf": version_of("pytest-vitperf"),
    }


def header_line(device: Device, backend: str, backend_version: str | None) -> str:
    v = software_versions()
    return (
        f"vitperf: {device.describe()}; backend {backend} {backend_version or '?'}; "
        f"torch {v['torch'] or '-'}, modelopt {v['modelopt'] or '-'}"
    )
