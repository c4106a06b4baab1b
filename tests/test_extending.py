"""Extending the plugin without editing it: a precision variant through the registry alone, a backend through the
`pytest_vitperf_make_backend` hook alone, each benchmarked on the CPU by the real latency suite."""

from __future__ import annotations

import re

import pytest

from tests.conftest import FAST

# An INT8 variant that runs on the CPU: the same Model Optimizer calibration and real `torch._int_mm` Linears as
# int8, through the torch backend, which reads what to build from the entry.
VARIANT = """
from dataclasses import replace

from pytest_vitperf.core.precision import ALL_BACKENDS, get_precision, register

int8 = get_precision("int8")
register(replace(int8.variant("int8-cpu", "INT8 on the CPU", int8.recipe, backends=ALL_BACKENDS), cpu=True))
# An entry judged against FP32 instead of FP16.
fp16 = get_precision("fp16")
against_fp32 = fp16.variant("fp16-vs-fp32", "FP16 against FP32", fp16.recipe, backends=ALL_BACKENDS)
register(replace(against_fp32, reference="fp32"))
"""

# A backend that runs the registry's ONNX export of each precision with ONNX Runtime on the CPU.
BACKEND = """
import time

from pytest_vitperf.engines.models.zoo import fixed_input
from pytest_vitperf.engines.quant.recipes import export_onnx
from pytest_vitperf.measure.timing import PerfCounterClock


class OrtEngine:
    backend = "onnxruntime"

    def __init__(self, session, model_name, precision, batch):
        self.session, self.model_name, self.precision, self.batch = session, model_name, precision, batch
        self.clock = PerfCounterClock()
        i = session.get_inputs()[0]
        self.feed = {i.name: fixed_input(tuple(i.shape)).numpy()}  # the input every engine runs; static shape

    def launch(self):
        self.session.run(None, self.feed)

    def output(self):
        import torch

        return torch.from_numpy(self.session.run(None, self.feed)[0])

    def run(self, x):
        import torch

        name = next(iter(self.feed))
        return torch.from_numpy(self.session.run(None, {name: x.numpy()})[0])

    def describe(self):
        return {"backend": "onnxruntime", "provider": "CPUExecutionProvider"}

    def kernel_breakdown(self):
        raise NotImplementedError


class OrtBackend:
    name = "onnxruntime"

    def version(self):
        import onnxruntime

        return onnxruntime.__version__

    def unavailable_reason(self, device):
        return None

    def precision_reason(self, precision):
        return None if precision in ("fp32", "fp16") else f"onnxruntime here runs fp32 and fp16, not {precision}"

    def prepare(self, model, *, model_name, precision, batch, device, settings):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        data = export_onnx(precision, model, batch, cache_dir=settings.cache_dir)
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        return OrtEngine(session, model_name, precision, batch)


def pytest_vitperf_backend_names(config):
    return ["onnxruntime"]


def pytest_vitperf_make_backend(config, name):
    return OrtBackend() if name == "onnxruntime" else None
"""


INTERVAL = r"\d+\.\d+x \[\d+\.\d+, \d+\.\d+\]"  # a speedup with its interval: 1.24x [1.22, 1.26]


def _rows(result: pytest.RunResult) -> dict[str, dict[str, str]]:
    """Summary rows by precision, each a dict by column name (cut at the header's column starts)."""
    lines = result.stdout.lines
    top = next(i for i, line in enumerate(lines) if line.startswith("model ") and "vs fp16" in line)
    starts = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", lines[top])]
    out = {}
    model = lines[top + 2].split()[0]
    for line in lines[top + 2 :]:
        if not line.startswith(model + " "):
            break
        ends = [s for s, _ in starts[1:]] + [len(line)]
        row = {name: line[s:e].strip() for (s, name), e in zip(starts, ends, strict=True)}
        out[row["precision"]] = row
    return out


def test_a_variant_registered_in_a_conftest_is_benchmarked_against_fp16(
    suite: pytest.Pytester
) -> None:
    suite.makeconftest(VARIANT)
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,int8-cpu,fp16-vs-fp32", "-rs")
    result.assert_outcomes(passed=3)
    rows = _rows(result)
    assert set(rows) == {"fp16", "int8-cpu", "fp16-vs-fp32", "fp32"}  # fp32 measured as fp16-vs-fp32's reference
    assert rows["int8-cpu"]["backend"] == "torch" and re.fullmatch(INTERVAL, rows["int8-cpu"]["vs fp16"])
    assert re.fullmatch(INTERVAL + " vs fp32", rows["fp16-vs-fp32"]["vs fp16"])
    assert rows["fp16"]["SM MHz"] == "-"  # no GPU clock on a CPU
    result.stdout.fnmatch_lines(  # what the precision could not quantize in this model, once however many batches
        ["note: test_vit int8-cpu: 25 Linears in int8 (*); layer types it does not convert, kept in high "
         "precision: Conv2d x1 (patch_embed.proj)"]
    )  # fmt: skip
    # Unknown names are still refused, listing the registered variant among the valid ones.
    bad = suite.runpytest(*FAST, "--vitperf-precisions=int8-gpu")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*unknown precision 'int8-gpu'; valid: *int8-cpu*"])


def test_a_backend_from_the_hook_is_selected_and_benchmarked(suite: pytest.Pytester) -> None:
    suite.makeconftest(BACKEND)
    result = suite.runpytest(*FAST, "--vitperf-backend=onnxruntime", "--vitperf-precisions=fp16,fp32,bf16", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*vitperf: *onnxruntime*", "*onnxruntime here runs fp32 and fp16, not bf16*"])
    rows = _rows(result)
    assert set(rows) == {"fp16", "fp32"} and {r["backend"] for r in rows.values()} == {"onnxruntime"}
    assert re.fullmatch(INTERVAL, rows["fp32"]["vs fp16"])  # judged against fp16 like any precision
    bad = suite.runpytest(*FAST, "--vitperf-backend=onnx")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    valid = "auto, tensorrt, tensorrt-rtx, torch, trtexec, trtexec-rtx, onnxruntime"
    bad.stderr.fnmatch_lines([f"*unknown backend 'onnx'; valid: {valid}*"])


# The torch backend as a conftest.py replaces it under its name, on a machine that cannot build bf16: a missing
# optional package or kernel says so with NotBuilt, as fp8-attn's cuDNN path does.
NO_BF16 = """
from pytest_vitperf.core.errors import NotBuilt
from pytest_vitperf.engines.backends.torch import TorchBackend


class NoBf16(TorchBackend):
    def prepare(self, model, *, precision, **rest):
        if precision == "bf16":
            raise NotBuilt("no bf16 kernel here; measure the rest with: --vitperf-precisions fp16,fp32")
        return super().prepare(model, precision=precision, **rest)


def pytest_vitperf_make_backend(config, name):
    return NoBf16() if name == "torch" else None
"""


def test_a_precision_that_cannot_be_built_here_skips_in_its_family_and_the_rest_is_measured(
    suite: pytest.Pytester,
) -> None:
    """NotBuilt from a backend's prepare, inside a family: that precision's test skips with the reason, and the
    family's other precisions are measured in rounds against their reference as before."""
    suite.makeconftest(NO_BF16)
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16,fp32", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *no bf16 kernel here; measure the rest with: --vitperf-precisions fp16,fp32"])
    rows = _rows(result)
    assert set(rows) == {"fp16", "fp32"} and re.fullmatch(INTERVAL, rows["fp32"]["vs fp16"])
