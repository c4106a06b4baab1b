"""The processes that ran a family in another state (verdicts.ab.other_states), set beside the family's other
processes fact by fact, so that a run that meets two states also says what differed between them: whether the
process led its round, the SM clock and power under its samples, the CPUs its timing thread ran on and their NUMA
nodes (the GPU's beside them), and where its engines' input and output sit within a 2 MiB page
(measure/placement.py). Under the table, and in the JSON's "placement".
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_vitperf.measure.measurement import Measurement
    from pytest_vitperf.verdicts.ab import States

KIB = 1024
ROUND_FILE = re.compile(r"round(\d+)-([AB])\.json")  # what ab.turns names a round process's JSON


def placement(folder: Path, found: States, gpu: str | None = None) -> list[dict[str, Any]]:
    """Every round process's facts of each family that a process ran in another state: one entry a process and
    family, its state 'other' or 'usual'. `folder` holds the rounds' JSONs (a GPU's own with --gpus)."""
    from pytest_vitperf.ab.folder import measured_in
    from pytest_vitperf.measure.measurement import BenchmarkJsonError
    from pytest_vitperf.verdicts.ab import order

    families = {f for fs in found.found.values() for f in fs}
    if not families:
        return []
    out = []
    named = {path: int(n[1]) for path in folder.glob("round*-[AB].json") if (n := ROUND_FILE.fullmatch(path.name))}
    for path, i in sorted(named.items(), key=lambda kv: (kv[1], kv[0].name)):
        side = path.stem[-1]
        try:
            measured = measured_in(path)
        except BenchmarkJsonError:
            continue  # a round that wrote nothing was said when it ended
        by_family: dict[str, list[Measurement]] = {}
        for m in measured:
            if (family := f"{m.spec.model} b{m.spec.batch}") in families:
                by_family.setdefault(family, []).append(m)
        for family, ms in sorted(by_family.items()):
            state = "other" if family in found.found.get((i, side), ()) else "usual"
            out.append({"round": i, "side": side, "gpu": gpu, "family": family, "state": state,
                        "leads": order(i + 1)[-1][0] == side, **_facts(ms)})  # fmt: skip
    return out


def _facts(ms: Sequence[Measurement]) -> dict[str, Any]:
    """A process's facts of one family, over its precisions' measurements."""
    from pytest_vitperf.measure.placement import offset

    readings = [r for m in ms for r in m.clocks]
    where = [m.spec.options.get("placement") or {} for m in ms]
    offsets = {}
    for m in ms:
        at = m.spec.options.get("addresses") or {}
        offsets[m.spec.precision] = [offset(at.get("input")), offset(at.get("output"))]
    return {
        "sm_mhz": statistics.median(r.sm_mhz for r in readings) if readings else None,
        "power_w": round(statistics.median(r.power_w for r in readings), 1) if readings else None,
        "cpus": sorted({c for w in where for c in w.get("cpus", ())}),
        "cpu_nodes": sorted({n for w in where for n in w.get("cpu_nodes", ())}),
        "gpu_node": next((w["gpu_node"] for w in where if w.get("gpu_node") is not None), None),
        "offsets": offsets,  # per precision: input, output (bytes within a 2 MiB page)
    }


def lines(placed: Sequence[Mapping[str, Any]]) -> list[str]:
    """Under the table: for each family found in another state, its processes in that state beside its others."""
    out: list[str] = []
    for family in sorted({p["family"] for p in placed}):
        ps = [p for p in placed if p["family"] == family]
        out += ["", f"Where {family}'s processes ran, those in another state first:", "",
                "| process | state | led its round | SM MHz | W | CPUs | NUMA: CPUs; GPU | inputs at KiB of 2 MiB |",
                "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for p in sorted(ps, key=lambda p: (p["state"] != "other", p["round"], p["side"])):
            on = f" (GPU {p['gpu']})" if p.get("gpu") is not None else ""
            inputs = sorted({o[0] // KIB for o in p["offsets"].values() if o[0] is not None})
            out.append(f"| round {p['round']} {p['side']}{on} | {p['state']} | {'yes' if p['leads'] else 'no'} | "
                       f"{_or_dash(p['sm_mhz'])} | {_or_dash(p['power_w'])} | {_listed(p['cpus'])} | "
                       f"{_listed(p['cpu_nodes'])}; {_or_dash(p['gpu_node'])} | {_listed(inputs)} |")  # fmt: skip
    return out


def _or_dash(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _listed(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values) or "-"
