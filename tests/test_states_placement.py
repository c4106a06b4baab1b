"""Where a process ran its timing is recorded with each measurement (CPU, NUMA nodes, the engines' buffers), and
`vitperf ab` sets a process found in another state beside its family's other processes, fact by fact."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_vitperf.ab.states import lines, placement
from pytest_vitperf.measure.clocks import ClockReading
from pytest_vitperf.measure.placement import PAGE, cpu_node, current_cpu, offset, pci_node
from pytest_vitperf.verdicts.ab import States
from tests.conftest import FAST


def test_the_cpu_is_one_this_process_may_run_on_and_its_numa_node_is_read_from_sysfs(tmp_path: Path) -> None:
    assert current_cpu() in os.sched_getaffinity(0)
    (tmp_path / "devices/system/cpu/cpu5/node1").mkdir(parents=True)
    (tmp_path / "devices/system/cpu/cpu6").mkdir(parents=True)
    assert cpu_node(5, tmp_path) == 1 and cpu_node(6, tmp_path) is None and cpu_node(None, tmp_path) is None
    for bus, node in (("0000:19:00.0", "1\n"), ("0000:1a:00.0", "-1\n")):
        (tmp_path / "bus/pci/devices" / bus).mkdir(parents=True)
        (tmp_path / "bus/pci/devices" / bus / "numa_node").write_text(node)
    # CUDA and NVML write an 8-digit domain, in capitals; sysfs a 4-digit one.
    assert pci_node("00000000:19:00.0", tmp_path) == 1
    assert pci_node("00000000:1A:00.0", tmp_path) is None  # -1: the platform has no NUMA node for it
    assert pci_node("00000000:1b:00.0", tmp_path) is None and pci_node(None, tmp_path) is None
    assert offset(5 * PAGE + 4096) == 4096 and offset(None) is None


def test_a_reading_kept_before_cpus_were_recorded_still_reads() -> None:
    kept: dict[str, Any] = {"samples": 10, "sm_mhz": 1980, "mem_mhz": 3201, "power_w": 255.0, "reasons": 0}
    assert ClockReading(**kept).cpu is None and ClockReading(**kept, cpu=3).to_dict()["cpu"] == 3


def test_a_run_records_where_it_timed_and_ab_sets_a_process_in_another_state_beside_the_others(
    suite: pytest.Pytester, tmp_path: Path
) -> None:
    out = suite.path / "bench.json"
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32,fp16", f"--benchmark-json={out}")
    result.assert_outcomes(passed=2)
    for b in json.loads(out.read_text())["benchmarks"]:
        where = b["options"]["placement"]
        assert where["cpus"] and set(where["cpus"]) <= os.sched_getaffinity(0)
        assert where["cpu_nodes"] == sorted({n for c in where["cpus"] if (n := cpu_node(c)) is not None})
        assert where["gpu_node"] is None  # a CPU run: no GPU
    # Three rounds of that process on each side; round 1's B ran the family in another state.
    work = tmp_path / "work"
    work.mkdir()
    for i in range(3):
        for side in "AB":
            shutil.copy(out, work / f"round{i}-{side}.json")
    (work / "round3-A.json").write_text("cut off mid-write")
    shutil.copy(out, work / "round3x-A.json")  # not a round's name: left alone
    family = "test_vit b1"
    placed = placement(work, States([], {family}, {(1, "B"): [family]}))
    assert [(p["round"], p["side"], p["state"], p["leads"]) for p in placed] == [
        (0, "A", "usual", True), (0, "B", "usual", False), (1, "A", "usual", False), (1, "B", "other", True),
        (2, "A", "usual", False), (2, "B", "usual", True),
    ]  # fmt: skip
    assert all(set(p["offsets"]) == {"fp32", "fp16"} and p["sm_mhz"] is None for p in placed)  # no GPU, no clocks
    table = lines(placed)
    assert table[1] == f"Where {family}'s processes ran, those in another state first:"
    assert table[5].startswith("| round 1 B | other | yes | - | - | ") and len(table) == 5 + 6
    assert placement(work, States([], set(), {})) == []  # no process in another state: nothing to set beside
