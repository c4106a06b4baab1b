"""Precisions for A/A and sensitivity runs, loaded with `-p aa_precisions` (tools/ on PYTHONPATH): FP16 built again
as separate engines, each judged against FP16 itself. fp16-a and fp16-b carry the floors of tools/aa_floors.json
(0.97 and 1.03: an A/A pair must pass the first and fail the second); fp16-d1 and fp16-d3 are meant for
--vitperf-inject-delay fp16-d1=1%,fp16-d3=3%."""

from pytest_vitperf import get_precision, register
from pytest_vitperf.core.precision import ALL_BACKENDS

fp16 = get_precision("fp16")
for name, title in (
    ("fp16-a", "FP16, built again (A/A, floor 0.97)"),
    ("fp16-b", "FP16, built again (A/A, floor 1.03)"),
    ("fp16-d1", "FP16, built again, for a 1% delay"),
    ("fp16-d3", "FP16, built again, for a 3% delay"),
):
    register(fp16.variant(name, title, fp16.recipe, backends=ALL_BACKENDS))
