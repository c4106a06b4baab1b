"""The upgrade report: two backend versions side by side, absolute latency and relative speedup kept apart.

A faster FP16 on the new version lowers every other precision's speedup without any of them getting slower
(TensorRT 10.14.1 -> 10.16.0 on an RTX PRO 6000: FP16 -4.0%, NVFP4 1.60x -> 1.53x). So the report has two
tables and two gates: absolute latency per precision against the regression threshold, and speedup over
FP16 within each version against the floors for the new version.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_vitperf.core.precision import REFERENCE, sort_key
from pytest_vitperf.measure.env import slug
from pytest_vitperf.store.baselines import Baseline, BaselineStorage
from pytest_vitperf.verdicts.baselines.compare import (
    FALSE_ALARM,
    IMPROVEMENT,
    REGRESSION,
    THRESHOLD,
    Comparison,
    compare,
    settle,
)
from pytest_vitperf.verdicts.floors import FloorsFile


class UpgradeError(ValueError):
    pass


@dataclass(frozen=True)
class Row:
    precision: str
    old: Baseline | None
    new: Baseline | None
    comparison: Comparison | None
    old_speedup: float | None
    new_speedup: float | None
    floor: float | None
    floor_source: str = ""
    floor_set_on: str = ""  # "tensorrt 10.14": a floor carried from an earlier version says so

    @property
    def floor_failed(self) -> bool:
        return self.floor is not None and self.new_speedup is not None and self.new_speedup < self.floor


@dataclass
class Group:
    model: str
    batch: int
    rows: list[Row] = field(default_factory=list)


@dataclass
class UpgradeReport:
    backend: str
    old: str
    new: str
    gpu: str
    groups: list[Group]
    threshold: float

    @property
    def regressions(self) -> list[tuple[Group, Row]]:
        return [(g, r) for g in self.groups for r in g.rows if r.comparison and r.comparison.change == REGRESSION]

    @property
    def floor_failures(self) -> list[tuple[Group, Row]]:
        return [(g, r) for g in self.groups for r in g.rows if r.floor_failed]

    @property
    def passed(self) -> bool:
        return not self.regressions and not self.floor_failures

    def markdown(self) -> str:
        return render_markdown(self)

    def to_dict(self) -> dict[str, Any]:
        """The verdict for a machine: what passed, and every row's latencies, change and speedups."""
        rows = []
        for g in self.groups:
            for r in g.rows:
                c = r.comparison
                rows.append({
                    "model": g.model, "batch": g.batch, "precision": r.precision,
                    "old_ms": r.old.value if r.old else None, "new_ms": r.new.value if r.new else None,
                    "statistic": c.statistic if c else None, "change": c.change if c else None,
                    "delta": round(c.delta, 6) if c else None, "p_value": c.p_value if c else None,
                    "old_speedup": r.old_speedup, "new_speedup": r.new_speedup,
                    "floor": r.floor, "floor_failed": r.floor_failed,
                })  # fmt: skip
        return {
            "schema": 1, "backend": self.backend, "from": self.old, "to": self.new, "gpu": self.gpu,
            "threshold": self.threshold, "passed": self.passed, "regressions": len(self.regressions),
            "floor_failures": len(self.floor_failures), "rows": rows,
        }  # fmt: skip


def _select_gpu(storage_root_versions: dict[str, set[str]], gpu: str | None) -> str:
    common = set.intersection(*storage_root_versions.values()) if storage_root_versions else set()
    if gpu is not None:
        want = slug(gpu)
        if want not in common:
            raise UpgradeError(
                f"no baselines for GPU {gpu!r} in both versions; both have: {', '.join(sorted(common)) or 'none'}"
            )
        return want
    if len(common) != 1:
        raise UpgradeError(
            f"{'several' if common else 'no'} GPUs have baselines in both versions"
            f"{': ' + ', '.join(sorted(common)) if common else ''}; choose one with --gpu-model NAME"
        )
    return next(iter(common))


def build_report(
    storage: BaselineStorage,
    backend: str,
    old: str,
    new: str,
    *,
    gpu: str | None = None,
    floors: FloorsFile | None = None,
    floor_overrides: dict[str, float] | None = None,
    threshold: float = THRESHOLD,
) -> UpgradeReport:
    found: dict[str, dict[tuple[str, str, int, str], Baseline]] = {old: {}, new: {}}
    gpus: dict[str, set[str]] = {old: set(), new: set()}
    for b in storage.all():
        k = b.key
        if k.backend == backend and k.backend_version in found:
            found[k.backend_version][(slug(k.gpu), k.model, k.batch, k.precision)] = b
            gpus[k.backend_version].add(slug(k.gpu))
    for version in (old, new):
        if not found[version]:
            raise UpgradeError(f"no baselines for {backend}/{version}; list them with: vitperf show")
    gpu_slug = _select_gpu(gpus, gpu)
    groups: dict[tuple[str, int], dict[str, dict[str, Baseline]]] = defaultdict(lambda: {old: {}, new: {}})
    gpu_name = gpu_slug
    for version in (old, new):
        for (g, model, batch, precision), b in found[version].items():
            if g == gpu_slug:
                groups[(model, batch)][version][precision] = b
                gpu_name = b.key.gpu
    report_groups = []
    for (model, batch), by_version in sorted(groups.items()):
        group = Group(model, batch)
        precisions = sorted(set(by_version[old]) | set(by_version[new]), key=sort_key)

        for p in precisions:
            before, after = by_version[old].get(p), by_version[new].get(p)
            comparison = None
            if before and after:  # the candidate's newest run names its board
                uuid = after.runs[-1].gpu_uuid if after.runs else ""
                comparison = compare(before, after.value, current_mhz=after.stats.get("sm_mhz"), gpu_uuid=uuid,
                                     threshold=threshold, threshold_only=True)  # fmt: skip
            floor, source, set_on = None, "", ""
            if p != REFERENCE:
                if floor_overrides and p in floor_overrides:
                    floor, source = floor_overrides[p], "--floor"
                elif floors is not None:
                    f = floors.find(gpu=gpu_name, backend=backend, version=new, model=model, batch=batch, precision=p)
                    if f is not None:
                        floor, source, set_on = f.min_speedup, f.source or str(floors.path), f.set_on
            speedups = _speedup(by_version[old], p), _speedup(by_version[new], p)
            group.rows.append(Row(p, before, after, comparison, *speedups, floor, source, set_on))
        report_groups.append(group)
    _settle(report_groups)
    return UpgradeReport(backend, old, new, gpu_name, report_groups, threshold)


def _settle(groups: list[Group]) -> None:
    """Benjamini-Hochberg over the report's rows of known spread (compare.settle)."""
    rows = [(g, i) for g in groups for i in range(len(g.rows))]
    settled = settle([g.rows[i].comparison for g, i in rows], FALSE_ALARM)
    for (g, i), c in zip(rows, settled, strict=True):
        g.rows[i] = replace(g.rows[i], comparison=c)


def describe(c: Comparison | None, threshold: float) -> str:
    """Words for a latency change: regression or improvement beyond the threshold, the direction within it."""
    if c is None:
        return "only in one version"
    if c.change == REGRESSION:
        return f"REGRESSION beyond {threshold:.0%}"
    if c.change == IMPROVEMENT:
        return f"improvement beyond {threshold:.0%}: refresh the baseline"
    if c.delta == 0:
        return "same"
    return f"{'improvement' if c.delta < 0 else 'slower'} (within {threshold:.0%})"


def _test(c: Comparison | None) -> str:
    if c is None:
        return "-"
    return f"threshold only ({c.method})" if c.p_value is None else f"{c.method}, p = {c.p_value:.2g}"


def _speedup(version: dict[str, Baseline], precision: str) -> float | None:
    ref, b = version.get(REFERENCE), version.get(precision)
    return ref.value / b.value if ref and b else None


def _ms(b: Baseline | None) -> str:
    return f"{b.value:.2f} ms" if b else "-"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def render_markdown(r: UpgradeReport) -> str:
    lines = [f"# {r.backend} {r.old} → {r.new} on {r.gpu}", ""]
    for g in r.groups:
        lines += [f"## {g.model}, batch {g.batch}", "", "### Absolute latency", ""]
        lines += [f"| precision | {r.old} | {r.new} | Δ | change | test |", "|---|---|---|---|---|---|"]
        for row in g.rows:
            c = row.comparison
            delta = f"{c.delta:+.1%}" if c else "-"
            test = _test(c)
            lines.append(
                f"| {row.precision} | {_ms(row.old)} | {_ms(row.new)} | {delta} | {describe(c, r.threshold)} | {test} |"
            )
        lines += ["", f"### Speedup over {REFERENCE} (same version)", ""]
        lines += [f"| precision | {r.old} | {r.new} | Δ | floor | verdict |", "|---|---|---|---|---|---|"]
        ref = next((x for x in g.rows if x.precision == REFERENCE), None)
        for row in g.rows:
            if row.precision == REFERENCE:
                continue
            d = (
                f"{row.new_speedup - row.old_speedup:+.2f}x"
                if row.new_speedup is not None and row.old_speedup is not None
                else "-"
            )
            on = f", set on {row.floor_set_on}" if row.floor_set_on else ""
            if row.floor is None:
                verdict = "no floor"
            elif row.new_speedup is None:
                verdict = "not measured"
            elif row.floor_failed:
                verdict = f"FAIL: {row.new_speedup:.2f}x < {row.floor:.2f}x{on} ({row.floor_source})"
                if ref is not None and ref.comparison and row.comparison:
                    verdict += (
                        f"; {REFERENCE} latency {ref.comparison.delta:+.1%}, "
                        f"{row.precision} latency {row.comparison.delta:+.1%}"
                    )
            else:
                verdict = f"pass (≥ {row.floor:.2f}x{on})"
            floor = _x(row.floor)
            lines.append(
                f"| {row.precision} | {_x(row.old_speedup)} | {_x(row.new_speedup)} | {d} | {floor} | {verdict} |"
            )
        lines.append("")
    why = []
    if r.regressions:
        why.append(f"{len(r.regressions)} latency regression(s) beyond {r.threshold:.0%}")
    if r.floor_failures:
        why.append(f"{len(r.floor_failures)} speedup floor(s) failed")
    lines.append(f"**Gate: {'PASS' if r.passed else 'FAIL'}**" + (f" — {'; '.join(why)}." if why else ""))
    return "\n".join(lines) + "\n"
