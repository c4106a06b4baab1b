"""CI exports: each format validates against its consumer's documented format (tests/data/schemas names the source),
on measurements stored from an H100 run; the option end to end on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.report.exports import FORMATS, benchmark_name
from tests.conftest import FAST

jsonschema = pytest.importorskip("jsonschema")
DATA = Path(__file__).parent / "data"
SCHEMAS = {"github-action-benchmark": "github-action-benchmark-custom.json", "bencher": "bencher-metric-format.json"}


@pytest.fixture(scope="module")
def h100() -> list[Measurement]:
    doc = json.loads((DATA / "clocks" / "h100-vit_base-b64-fp16-fp8.json").read_text())
    return [Measurement.from_dict(m) for m in doc["measurements"]]


def validate(fmt: str, doc: object) -> None:
    schema = json.loads((DATA / "schemas" / SCHEMAS[fmt]).read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(doc)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_export_validates_against_its_documented_format(fmt: str, h100: list[Measurement]) -> None:
    validate(fmt, json.loads(json.dumps(FORMATS[fmt](h100))))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_malformed_export_would_be_caught(fmt: str, h100: list[Measurement]) -> None:
    doc = FORMATS[fmt](h100)
    broken = [{**doc[0], "value": "6.5"}] if fmt == "github-action-benchmark" else {"x": {"latency": {"lower": 1.0}}}
    with pytest.raises(jsonschema.ValidationError):
        validate(fmt, broken)


def test_values_units_and_names(h100: list[Measurement]) -> None:
    m = h100[0]
    gab = {b["name"]: b for b in FORMATS["github-action-benchmark"](h100)}
    assert gab[benchmark_name(m)]["value"] == pytest.approx(m.median) and gab[benchmark_name(m)]["unit"] == "ms"
    bmf = FORMATS["bencher"](h100)[benchmark_name(m)]
    assert bmf["latency"]["value"] == pytest.approx(m.median * 1e6)  # Bencher's latency measure is in ns
    assert bmf["latency"]["lower_value"] <= bmf["latency"]["value"] <= bmf["latency"]["upper_value"]
    assert bmf["throughput"]["value"] == pytest.approx(m.spec.batch * 1000 / m.median)
    assert len({benchmark_name(x) for x in h100}) == len(h100)  # one series per measurement
    assert "NVIDIA H100 80GB HBM3" in benchmark_name(m)  # another GPU never continues this series


def test_the_option_writes_both_and_refuses_an_unknown_format(suite: pytest.Pytester) -> None:
    r = suite.runpytest(
        *FAST,
        "--vitperf-precisions=fp32,fp16",
        "--vitperf-export=github-action-benchmark=out/gab.json,bencher=bmf.json",
    )
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["wrote github-action-benchmark: */out/gab.json", "wrote bencher: */bmf.json"])
    validate("github-action-benchmark", json.loads((suite.path / "out" / "gab.json").read_text()))
    validate("bencher", json.loads((suite.path / "bmf.json").read_text()))
    bad = suite.runpytest(*FAST, "--vitperf-export=junit=x.xml")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        ["*'junit=x.xml' is not FORMAT=FILE with FORMAT one of: github-action-benchmark, bencher*"]
    )
