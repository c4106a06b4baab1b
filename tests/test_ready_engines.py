"""Ready-to-load compiled engines (engines/ready.py): a compiled engine saved in the cache folder is loaded by a
fresh process without Dynamo tracing the model, gives the output the compiled one gave, and names the same artifact;
a damaged artifact is compiled again and written over; the real-quant Linears can be saved inside one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import with_ready_engines

PREPARE = """
import json, sys, warnings
from pathlib import Path
import torch
from pytest_vitperf.core.settings import Settings
from pytest_vitperf.engines.backends.torch import TorchBackend
from pytest_vitperf.engines.models.zoo import build_model
from pytest_vitperf.measure.env import Device

with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    engine = TorchBackend().prepare(build_model("test_vit"), model_name="test_vit", precision="fp32",
                                    batch=2, device=Device("test CPU"), settings=Settings(compile="default",
                                    cache_dir=Path(sys.argv[1])))
out = engine.output()
torch.save(out, sys.argv[2])
graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
print(json.dumps({"info": engine.info, "graphs": graphs, "said": [str(w.message) for w in said]}))
"""


def _prepare(cache: Path, out: Path) -> dict[str, object]:
    """Prepare a compiled CPU engine in a fresh process; what it says of itself."""
    run = subprocess.run([sys.executable, "-c", PREPARE, str(cache), str(out)], capture_output=True, text=True,
                         timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    facts: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return facts


def test_a_ready_engine_loads_in_a_fresh_process_without_tracing_and_gives_the_same_output(tmp_path: Path) -> None:
    import torch

    cache = tmp_path / "cache"
    first = _prepare(cache, tmp_path / "first.pt")
    info = first["info"]
    assert isinstance(info, dict) and info["ready"]["how"] == "compiled and saved", first
    assert first["graphs"] == 1  # Dynamo traced the model once, as it compiled it
    (saved,) = (cache / "ready").glob("*.bin")

    second = _prepare(cache, tmp_path / "second.pt")
    again = second["info"]
    assert isinstance(again, dict) and again["ready"]["how"] == "loaded", second
    assert second["graphs"] == 0, second  # nothing traced: the compiled graph came from the file
    assert again["ready"]["sha256"] == info["ready"]["sha256"]  # the same artifact: vitperf ab checks its rounds so
    assert torch.equal(torch.load(tmp_path / "first.pt"), torch.load(tmp_path / "second.pt"))

    saved.write_bytes(saved.read_bytes()[:100])  # truncated: said once, compiled again, written over whole
    third = _prepare(cache, tmp_path / "third.pt")
    assert third["info"]["ready"]["how"] == "compiled and saved", third  # type: ignore[index]
    assert any("of test_vit fp32 b2 did not load" in str(w) for w in third["said"]), third  # type: ignore[union-attr]
    assert saved.stat().st_size > 1000


def test_the_real_quant_linears_can_be_saved_inside_a_compiled_model(tmp_path: Path) -> None:
    """torch.compile's serialised artifact refuses classes made inside a function; the Linears that realquant
    makes are module-level classes so that an FP8 or INT8 engine can be saved (seen refused on an H100 before)."""
    import torch

    from pytest_vitperf.engines.quant.linears import Int8Linear
    from pytest_vitperf.engines.ready import compiled

    torch.manual_seed(0)
    w = torch.randn(64, 32)
    model = torch.nn.Sequential(Int8Linear(w, torch.randn(64), w.abs().amax(1, keepdim=True), 3.0), torch.nn.GELU())
    x = torch.randn(20, 32)
    engine, facts = compiled(model.eval(), x, {}, tmp_path, ("int8", 20), torch.no_grad)
    assert facts["ready"]["how"] == "compiled and saved", facts
    with torch.inference_mode():
        y = engine(x)
    loaded, again = compiled(model, x, {}, tmp_path, ("int8", 20), torch.no_grad)
    assert again["ready"]["how"] == "loaded" and again["ready"]["sha256"] == facts["ready"]["sha256"], again
    with torch.inference_mode():
        assert torch.equal(loaded(x), y)


def test_a_model_no_ready_engine_can_be_made_of_compiles_the_usual_way_and_the_warning_names_it(
    tmp_path: Path,
) -> None:
    import torch

    from pytest_vitperf.engines.ready import compiled

    class Broken(torch.nn.Module):  # a graph break: the precompile takes one whole graph
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            torch._dynamo.graph_break()
            return x * 2

    x = torch.randn(3, 4)
    with pytest.warns(UserWarning, match="no ready engine for vit_x fp16 b3 .*; compiled the usual way"):
        engine, facts = compiled(Broken(), x, {}, tmp_path, ("fp16", 3), torch.no_grad, "vit_x fp16 b3")
    assert facts["ready"]["how"] == "not made" and not list((tmp_path / "ready").glob("*.bin")), facts
    with torch.inference_mode():
        assert torch.equal(engine(x), x * 2)


@pytest.mark.parametrize("part", ["inductor", "ready"])
def test_vitperf_ab_rounds_borrow_compiled_engines_only_where_compiles_make_no_timed_choice(part: str) -> None:
    from pytest_vitperf.ab.plan import shared_parts

    assert part in shared_parts([])  # the sides compile deterministically unless told otherwise
    assert part not in shared_parts(["--vitperf-compile=default"])


def test_vitperf_ab_says_whether_every_round_of_a_side_ran_the_one_build(tmp_path: Path) -> None:
    from pytest_vitperf.ab.report import ready_engines, ready_line

    src = Path(__file__).parent / "data" / "h100-vit_base-rounds-benchmark.json"
    same = {"fp16": "aa01", "bf16": "bb01", "fp8": "cc01", "int8": "dd01"}
    for i in range(2):
        for side in "AB":
            with_ready_engines(src, tmp_path / f"round{i}-{side}.json", same)
    found, _ = ready_engines(tmp_path)
    assert found["A"]["vit_base_patch16_224 fp8 b64"] == ["cc01"] and set(found) == {"A", "B"}
    assert ready_line(found) == ["", "Ready engines: every round of a side ran its side's one build of each of 8 rows"]
    with_ready_engines(src, tmp_path / "round1-B.json", {**same, "fp8": "cc02"})  # another build of FP8 on side B
    line = ready_line(ready_engines(tmp_path)[0])[1]
    assert "vit_base_patch16_224 fp8 b1 on side B (2 builds)" in line and "side A" not in line
    assert ready_line({}) == []  # no round ran a ready engine: nothing said


def test_vitperf_ab_says_how_long_a_load_took_and_each_process_s_slowest(tmp_path: Path) -> None:
    """As on an H200 (2026-11-29): each process's first load took 0.56-0.81 s, the others about 0.09 s."""
    from pytest_vitperf.ab.report import ready_engines, ready_line

    src = Path(__file__).parent / "data" / "h100-vit_base-rounds-benchmark.json"
    same = {"fp16": "aa01", "bf16": "bb01", "fp8": "cc01", "int8": "dd01"}
    for i, first in enumerate((0.56, 0.81)):
        took = {"fp16": first, "bf16": 0.09, "fp8": 0.08, "int8": 0.09}
        with_ready_engines(src, tmp_path / f"round{i}-A.json", same, took)
    with_ready_engines(src, tmp_path / "round0-B.json", same)  # a process that says no time: left out
    (tmp_path / "round1-B.json").write_text('{"benchmarks": [')  # cut off: left out
    ready, loads = ready_engines(tmp_path)
    assert sorted(len(p) for p in loads) == [8, 8]  # two engines (b1, b64) a precision
    line = ready_line(ready, loads)[1]
    assert line.endswith("; a load took 0.09 s (median of 16), each process's slowest 0.56-0.81 s"), line
    assert ready_line(ready)[1].endswith("of each of 8 rows")  # no times: nothing said of them
