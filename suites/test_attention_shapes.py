"""Attention-shape rules: which ViT can have its attention quantized at which precision.

Over the model zoo, each case lists the rules it is expected to break, so a change in verdict (a timm update, a new
rule) fails. Over the run's own models (--vitperf-models, any timm name or a registered model) at the run's
precisions, each case passes where no rule is broken, is an expected failure that names the broken rules where one
is (its latency is still measured: the rules say why it may not be faster), and is skipped as "not a ViT" where no
patch embedding or attention can be read.
"""

import pytest

from pytest_vitperf.attention import judge, read_shape
from pytest_vitperf.core.precision import PRECISIONS, get_precision
from pytest_vitperf.engines.models.zoo import DIGITS_MODEL, MODEL_NAMES, QF_VIT, build_model

pytestmark = pytest.mark.gpu_bench

# timm ViTs: 196 patches + 1 class token = 197 tokens, attention as 4D scaled_dot_product_attention. The two built on
# the rules (the quantization-friendly ViT-B and the digits ViT) break none.
TIMM_BLOCK_SCALED = ("seq_len", "attention_3d", "class_token")
BLOCK_SCALED = ("mxfp8", "nvfp4")
EXPECTED = {
    (model, precision): (
        TIMM_BLOCK_SCALED
        if get_precision(precision).root in BLOCK_SCALED and model not in (QF_VIT, DIGITS_MODEL)
        else ()
    )
    for model in MODEL_NAMES
    for precision in PRECISIONS
}
CASES = [
    pytest.param(model, precision, breaks, id=f"{model}-{precision}-breaks:{'+'.join(breaks) or 'none'}")
    for (model, precision), breaks in EXPECTED.items()
]


def without_weights(model):
    """A zoo model on the meta device: the rules read only shapes, and drawing vit_large's 300M random weights took
    8 s of CPU (6 s of a warm main job on an H200) for the same shape."""
    import torch

    with torch.device("meta"):
        return build_model(model)


@pytest.fixture(scope="module")
def shapes():
    """`shapes(name, build=without_weights)`: the model's attention shape, read once; "not a ViT: ..." where no patch
    embedding or attention can be read."""
    cache = {}

    def get(model, build=without_weights):
        if model not in cache:
            try:
                cache[model] = read_shape(build(model))
            except ValueError as exc:  # no patch embedding, or no attention ran
                cache[model] = f"not a ViT: {exc}"
        return cache[model]

    return get


@pytest.mark.parametrize(("model", "precision", "breaks"), CASES)
def test_attention_rules(shapes, model, precision, breaks):
    violations = judge(shapes(model), precision)
    assert tuple(v.rule for v in violations) == breaks, "\n".join(map(str, violations))


def test_attention_rules_of_the_run_models(shapes, vitperf_session, vitperf_model, vitperf_precision):
    shape = shapes(vitperf_model, vitperf_session.model)  # the run's model: registered, with its weights
    if isinstance(shape, str):
        pytest.skip(shape)
    violations = judge(shape, vitperf_precision)
    if violations:
        pytest.xfail("; ".join(map(str, violations)))
