from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

# The key that signs the compiled parts of the tests' cache folders (core/signing.py): the tests, and the processes
# they start, never make a key file in the home folder. tests/test_signing.py sets its own.
os.environ.setdefault("VITPERF_CACHE_KEY", "pytest-vitperf tests")

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "test_vit_latency.py"


def load_tool(name: str) -> Any:
    """tools/NAME.py as a module (the tools are scripts, not a package), for tests that run their functions; tools/
    on sys.path, as a script has it, for the tools that import one another."""
    import importlib.util

    if str(REPO / "tools") not in sys.path:
        sys.path.append(str(REPO / "tools"))

    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules[name] = tool  # where a dataclass of the tool looks its module up
    spec.loader.exec_module(tool)
    return tool

# timm's own test ViT (160 px, patch 16, width 64, 6 blocks): a real timm ViT that a 2-core CPU runs in 7 ms (FP32)
# to 20 ms (FP16), where vit_tiny takes 55 to 210 ms. No warm-up, batch 1, three samples a block, and in a family
# one build per precision and three rounds of 8 one-launch turns per engine: the flow end to end in a second or two
# per case (tests/test_family.py runs two builds).
FAST = (
    "--gpu-bench",
    "--vitperf-models=test_vit",
    "--vitperf-warmup-ms=0",
    "--vitperf-duration-ms=0",
    "--vitperf-min-iterations=3",
    "--vitperf-rounds=3",
    "--vitperf-rounds-agree=0",
    "--vitperf-builds=1",
    "--vitperf-slice-ms=1",
    "--vitperf-batch-sizes=1",
    "-p",
    "no:cacheprovider",
)


@pytest.fixture(scope="session", autouse=True)
def _heavy_imports_first() -> None:
    """pytester's in-process runs drop modules first imported inside them, and torch, its compiler caches and the
    native extensions under Model Optimizer's ONNX export (lief, onnxruntime) break the process when imported a
    second time: load them before any inner run (not at conftest import, which would slow `pytest --help`)."""
    import huggingface_hub.constants  # noqa: F401
    import modelopt.torch.quantization  # noqa: F401
    import onnxruntime  # noqa: F401
    import safetensors.torch  # noqa: F401
    import sklearn.model_selection  # noqa: F401
    import sqlalchemy.orm  # noqa: F401
    import timm  # noqa: F401
    import torch  # noqa: F401
    from alembic import command  # noqa: F401
    from modelopt.onnx.autocast.convert import convert_to_f16  # noqa: F401
    from modelopt.torch._deploy.utils import get_onnx_bytes_and_metadata  # noqa: F401


@pytest.fixture(autouse=True)
def _registry_restored() -> Iterator[None]:
    """pytester runs in this process: what an inner run's conftest.py registers is removed after the test, so that
    no later test sees another test's precisions."""
    from pytest_vitperf.core.precision import PRECISIONS, unregister

    before = set(PRECISIONS)
    yield
    for name in set(PRECISIONS) - before:
        unregister(name)


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs a test starts (pytester's, `vitperf ab`'s processes) are not xdist workers, even when `pytest -n`
    runs the test: pytest-benchmark turns itself off where PYTEST_XDIST_WORKER is set, leaving --benchmark-json
    unwritten, and the plugin would take the variables for its own workers' (workers.py)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory holding the real latency suite (no floors file)."""
    pytester.makepyfile(test_vit_latency=SUITE.read_text())
    return pytester


# A second, separately built BF16 engine judged against BF16 itself: an A/A pair on the CPU.
AGAIN = """
from dataclasses import replace

from pytest_vitperf.core.precision import ALL_BACKENDS, get_precision, register

bf16 = get_precision("bf16")
register(replace(bf16.variant("bf16-again", "BF16, built again", bf16.recipe, backends=ALL_BACKENDS), reference="bf16"))
"""


@pytest.fixture
def aa(suite: pytest.Pytester) -> pytest.Pytester:
    suite.makeconftest(AGAIN)
    return suite


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder shared by the accuracy suite's runs of this test session: each recipe calibrates once."""
    return tmp_path_factory.mktemp("vitperf-cache")


def recorded_rounds(stored: Any) -> list[Any]:
    """Rounds kept in tests/data/ab (a list of [A, B], each {row: [median ms, SM MHz]}) as `vitperf ab` reads them:
    pairs of processes, each {row: Side}."""
    from pytest_vitperf.verdicts.ab import Side

    return [tuple({k: Side(*v) for k, v in side.items()} for side in pair) for pair in stored]


def with_ready_engines(src: Path, dst: Path, hashes: dict[str, str], seconds: dict[str, float] | None = None) -> Path:
    """`src`, a process's --benchmark-json, written to `dst` with each engine saying which ready engine it ran:
    `hashes` by precision, and with `seconds`, how long loading it took."""
    import json

    doc = json.loads(src.read_text())
    for b in doc["benchmarks"]:
        p = b["params"]["precision"]
        took = {"seconds": seconds[p]} if seconds is not None else {}
        b.setdefault("options", {})["ready"] = {"how": "loaded", "sha256": hashes[p], **took}
    dst.write_text(json.dumps(doc))
    return dst
