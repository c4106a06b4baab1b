"""State for one pytest run: settings, the device and backend, engines, measurements, verdicts."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.floor import FLOORS_FILE, Floor, FloorsFile
from pytest_vitperf.measurement import Measurement, Spec
from pytest_vitperf.precision import PRECISIONS, unsupported_reason

if TYPE_CHECKING:
    from pytest_vitperf.backends import Backend, Engine
    from pytest_vitperf.baselines.gate import Outcome
    from pytest_vitperf.baselines.store import JsonDirStorage
    from pytest_vitperf.env import Device
    from pytest_vitperf.options import Settings

GPU_DEFAULTS = (("vit_base_patch16_224",), (1, 64))
CPU_DEFAULTS = (("vit_tiny_patch16_224",), (1, 8))
# trtexec warms up for 200 ms, but on an H200 at its 700 W cap the SM clock swings between 1.5 and
# 2.0 GHz for the first seconds of load: 200 ms gave a CoV of 2.8-3.1% on ViT-B/16 batch 64 FP16,
# 2000 ms gave 1.2% (docs/benchmarks.md).
GPU_WARMUP_MS = 2000.0
CPU_WARMUP_MS = 200.0


@dataclass(frozen=True)
class BaselineRow:
    """One line of the baselines table, as plain data so that xdist workers can hand it over."""

    model: str
    precision: str
    batch: int
    baseline: str
    current: str
    delta: str
    p_value: str
    verdict: str
    note: str = ""


@dataclass(frozen=True)
class Verdict:
    """Outcome of a speedup check against a floor; `floor` None means no floor applies."""

    reference: Measurement
    candidate: Measurement
    floor: float | None
    source: str = ""

    @property
    def speedup(self) -> float:
        return self.reference.median / self.candidate.median

    @property
    def passed(self) -> bool:
        return self.floor is None or self.speedup >= self.floor


def _worker_index() -> int:
    """xdist worker number (gw3 -> 3), so that each worker takes its own GPU."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker[2:]) if worker[2:].isdigit() else 0


class VitperfSession:
    def __init__(self, settings: Settings, config: Any = None) -> None:
        self.settings = settings
        self.config = config  # the pytest config, for the pytest_vitperf_model_built hook
        self.measurements: dict[tuple[str, str, int, str], Measurement] = {}
        self.verdicts: dict[tuple[str, str, int, str], Verdict] = {}
        self.baseline_rows: list[BaselineRow] = []
        self.baseline_updates: list[str] = []
        self._measured_here: dict[tuple[str, str, int, str], str] = {}  # key -> nodeid
        self._engines: dict[tuple[str, str, int], Engine] = {}
        self._floors: dict[Path, FloorsFile | None] = {}

    # -- where we run ---------------------------------------------------------------------------
    @cached_property
    def device(self) -> Device:
        import torch

        from pytest_vitperf.env import probe_device

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return probe_device(_worker_index() % count if count else 0)

    @cached_property
    def _backend(self) -> tuple[Backend, str | None]:
        from pytest_vitperf.backends import select_backend

        return select_backend(self.settings.backend, self.device)

    @property
    def backend(self) -> Backend:
        return self._backend[0]

    @property
    def backend_reason(self) -> str | None:
        return self._backend[1]

    # -- what we run ----------------------------------------------------------------------------
    @property
    def models(self) -> tuple[str, ...]:
        return self.settings.models or (CPU_DEFAULTS if self.device.sm is None else GPU_DEFAULTS)[0]

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return self.settings.batch_sizes or (CPU_DEFAULTS if self.device.sm is None else GPU_DEFAULTS)[1]

    @property
    def precisions(self) -> tuple[str, ...]:
        return self.settings.precisions or tuple(PRECISIONS)

    def timing(self) -> dict[str, Any]:
        s = self.settings
        warmup = s.warmup_ms
        if warmup is None:
            warmup = CPU_WARMUP_MS if self.device.sm is None else GPU_WARMUP_MS
        return {"warmup_ms": warmup, "duration_ms": s.duration_ms, "min_iterations": s.min_iterations}

    def skip_reason(self, precision: str) -> str | None:
        """Why `precision` cannot be measured here, or None. Nothing is built to find out."""
        if self.backend_reason is not None:
            return self.backend_reason
        return unsupported_reason(precision, self.device, self.backend.name) or self.backend.precision_reason(precision)

    def engine(self, model_name: str, precision: str, batch: int) -> Engine:
        key = (model_name, precision, batch)
        if key not in self._engines:
            from pytest_vitperf.models import build_model

            model = build_model(model_name)
            if self.config is not None:
                hook = self.config.hook.pytest_vitperf_model_built
                model = hook(config=self.config, name=model_name, model=model) or model
            self._engines[key] = self.backend.prepare(
                model,
                model_name=model_name,
                precision=precision,
                batch=batch,
                device=self.device,
                settings=self.settings,
            )
        return self._engines[key]

    def spec(self, engine: Engine) -> Spec:
        return Spec(
            model=engine.model_name,
            precision=engine.precision,
            batch=engine.batch,
            backend=self.backend.name,
            backend_version=self.backend.version(),
            device=self.device.name,
            sm=self.device.sm,
            timer=engine.clock.name,
            options={**self.timing(), **engine.describe()},
        )

    # -- floors ---------------------------------------------------------------------------------
    def floors_file(self, test_dir: Path) -> FloorsFile | None:
        path = self.settings.floors or (test_dir / FLOORS_FILE)
        if path not in self._floors:
            if self.settings.floors is None and not path.exists():
                self._floors[path] = None
            else:
                self._floors[path] = FloorsFile.load(path)  # raises FloorsFileError, naming the file
        return self._floors[path]

    def floor_for(self, test_dir: Path, model: str, precision: str, batch: int) -> Floor | None:
        floors = self.floors_file(test_dir)
        if floors is None:
            return None
        return floors.find(
            gpu=self.device.name,
            backend=self.backend.name,
            version=self.backend.version() or "",
            model=model,
            batch=batch,
            precision=precision,
        )

    # -- baselines ------------------------------------------------------------------------------
    @cached_property
    def baselines(self) -> JsonDirStorage | None:
        from pytest_vitperf.baselines.store import JsonDirStorage

        d = self.settings.baseline_dir
        return JsonDirStorage(d) if d is not None else None

    @cached_property
    def environment(self) -> dict[str, Any]:
        from pytest_vitperf.env import fingerprint

        return fingerprint(self.device)

    def judge_baseline(self, m: Measurement, threshold: float) -> Outcome | None:
        """Compare `m` with its baseline and add a row to the summary; None when no baseline folder is set."""
        from pytest_vitperf.baselines import gate

        if self.baselines is None:
            return None
        o = gate.judge(self.baselines, m, threshold, self.environment)
        s = m.spec
        c = o.comparison
        if c is not None:
            verdict = c.verdict + ("" if c.p_value is not None else " (threshold only: no raw samples)")
            if c.verdict == "improvement":
                verdict += "; refresh with --vitperf-update-baselines"
            note = "; ".join(f"environment: {e}" for e in o.env_changes)
            row = BaselineRow(
                s.model,
                s.precision,
                s.batch,
                f"{c.baseline_ms:.3f} ({c.statistic})",
                f"{c.current_ms:.3f}",
                f"{c.delta:+.1%}",
                "-" if c.p_value is None else f"{c.p_value:.2g}",
                verdict,
                note,
            )
        else:
            row = BaselineRow(s.model, s.precision, s.batch, "-", f"{m.median:.3f}", "-", "-", o.kind, o.note)
        self.baseline_rows.append(row)
        return o

    def write_baselines(self) -> None:
        """Write or refresh the baselines of what this process measured, noting each change."""
        from pytest_vitperf.baselines import gate
        from pytest_vitperf.baselines.store import BaselineFileError

        if self.baselines is None or not self._measured_here:
            return
        for key, nodeid in self._measured_here.items():
            m = self.measurements[key]
            new = gate.to_baseline(m, self.environment, nodeid)
            path = self.baselines.path(new.key)
            try:
                old = self.baselines.get(new.key)
                self.baselines.put([new])
            except BaselineFileError as exc:
                self.baseline_updates.append(f"NOT WRITTEN {new.key.entry}: {exc}")
                continue
            if old is None:
                self.baseline_updates.append(f"added {path} [{new.key.entry}] median {new.value:.3f} ms")
            else:
                change = new.value / old.value - 1
                self.baseline_updates.append(
                    f"refreshed {path} [{new.key.entry}] {old.value:.3f} ms ({old.statistic}) -> "
                    f"{new.value:.3f} ms ({change:+.1%})"
                )

    # -- results --------------------------------------------------------------------------------
    def record(self, m: Measurement, nodeid: str = "") -> None:
        self.measurements[m.spec.key] = m
        if nodeid:
            self._measured_here[m.spec.key] = nodeid

    def record_verdict(self, v: Verdict) -> None:
        self.verdicts[v.candidate.spec.key] = v

    def export(self) -> dict[str, Any]:
        """Results as plain data, for xdist workers to hand to the controller."""
        return {
            "baseline_rows": [asdict(r) for r in self.baseline_rows],
            "baseline_updates": list(self.baseline_updates),
            "measurements": [m.to_dict() for m in self.measurements.values()],
            "verdicts": [
                {
                    "reference": v.reference.to_dict(),
                    "candidate": v.candidate.to_dict(),
                    "floor": v.floor,
                    "source": v.source,
                }
                for v in self.verdicts.values()
            ],
        }

    def merge(self, data: dict[str, Any]) -> None:
        self.baseline_rows += [BaselineRow(**r) for r in data.get("baseline_rows", [])]
        self.baseline_updates += data.get("baseline_updates", [])
        for m in data.get("measurements", []):
            self.record(Measurement.from_dict(m))
        for v in data.get("verdicts", []):
            self.record_verdict(
                Verdict(
                    Measurement.from_dict(v["reference"]),
                    Measurement.from_dict(v["candidate"]),
                    v["floor"],
                    v.get("source", ""),
                )
            )
