"""State for one pytest run: settings, the device and backend, engines, measurements, verdicts."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.floor import FLOORS_FILE, Floor, FloorsFile
from pytest_vitperf.measurement import Measurement, Spec
from pytest_vitperf.precision import PRECISIONS, unsupported_reason

if TYPE_CHECKING:
    from pytest_vitperf.backends import Backend, Engine
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
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.measurements: dict[tuple[str, str, int, str], Measurement] = {}
        self.verdicts: dict[tuple[str, str, int, str], Verdict] = {}
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
        return unsupported_reason(precision, self.device, self.backend.name)

    def engine(self, model_name: str, precision: str, batch: int) -> Engine:
        key = (model_name, precision, batch)
        if key not in self._engines:
            from pytest_vitperf.models import build_model

            self._engines[key] = self.backend.prepare(
                build_model(model_name),
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

    # -- results --------------------------------------------------------------------------------
    def record(self, m: Measurement) -> None:
        self.measurements[m.spec.key] = m

    def record_verdict(self, v: Verdict) -> None:
        self.verdicts[v.candidate.spec.key] = v

    def export(self) -> dict[str, Any]:
        """Results as plain data, for xdist workers to hand to the controller."""
        return {
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
