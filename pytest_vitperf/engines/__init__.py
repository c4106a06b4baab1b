"""Making what is measured, grouped by what each part makes: models/ (the models and data sets), quant/ (precisions:
recipes, exports, real-quant and fused kernels), onnx/ (an export's graph and what it quantizes), tensorrt/ (plans),
backends/ (what turns a model into an engine); beside them GEMM operands (gemms.py), ready-to-load compiled engines
(ready.py), weights' memory (memory.py) and the sensitivity self-test's delay (delay.py)."""

# The parts of a --vitperf-cache-dir that come out the same from every build of the same inputs: exports,
# calibrations, converted models, the FP32 reference outputs, compiled extensions. The rest (Inductor's kernels,
# TensorRT plans and timing caches) is one compile's draw of kernels, which `vitperf ab` samples afresh per process;
# Inductor's kernels, and the ready-to-load engines made of them (engines/ready.py), join the reproducible parts when
# compiled without timed choices (--vitperf-compile=deterministic).
REPRODUCIBLE_PARTS = ("onnx", "calibration", "converted", "references", "torch_extensions")
INDUCTOR_PART = "inductor"
READY_PART = "ready"
