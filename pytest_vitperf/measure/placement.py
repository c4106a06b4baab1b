"""Where a process ran its timing: the CPU its timing thread was on, that CPU's NUMA node, the GPU's NUMA node, and
where an engine's input and output sit within a 2 MiB page. A process that runs a small ViT in another state than
its side's others (verdicts.ab.other_states) can then be set beside those others, fact by fact (ab/states.py).

Read from Linux's /proc and /sys; None wherever a fact cannot be read (another OS, a container that hides them).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

PAGE = 2 * 2**20  # the GPU's large page: two buffers at one offset within it share their cache sets and TLB reach
SYS = Path("/sys")


def current_cpu() -> int | None:
    """The CPU the calling thread is on now (field 39 of /proc/thread-self/stat, after the command's closing
    parenthesis, which may itself hold spaces)."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


@cache  # read once a CPU: each measurement asks
def cpu_node(cpu: int | None, sys: Path = SYS) -> int | None:
    """The NUMA node of `cpu`: the nodeN link in its sysfs folder."""
    if cpu is None:
        return None
    nodes = sorted((sys / "devices" / "system" / "cpu" / f"cpu{cpu}").glob("node[0-9]*"))
    return int(nodes[0].name[4:]) if nodes else None


@cache
def pci_node(bus_id: str | None, sys: Path = SYS) -> int | None:
    """The NUMA node of a PCI device ('00000000:19:00.0' as CUDA and NVML write it); None where the platform has
    none (-1) or the file cannot be read."""
    if not bus_id:
        return None
    domain, _, rest = bus_id.lower().partition(":")
    try:
        node = int((sys / "bus" / "pci" / "devices" / f"{domain[-4:]}:{rest}" / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def offset(address: int | None) -> int | None:
    """Where `address` sits within its 2 MiB page."""
    return None if address is None else address % PAGE


def of_timing(cpus: Iterable[int | None], gpu_bus_id: str | None) -> dict[str, Any]:
    """A measurement's placement: the CPUs its timing thread was seen on (at each clock reading, else now), their
    NUMA nodes and the GPU's."""
    seen = sorted({c for c in cpus if c is not None}) or [c for c in (current_cpu(),) if c is not None]
    return {"cpus": seen, "cpu_nodes": sorted({n for c in seen if (n := cpu_node(c)) is not None}),
            "gpu_node": pci_node(gpu_bus_id)}  # fmt: skip
