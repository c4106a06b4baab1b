"""Making what is measured: models, precision recipes and their ONNX exports, TensorRT plans, the backends that turn
a model into an engine, GEMM operands, and what an export quantizes (coverage)."""

# The parts of a --vitperf-cache-dir that come out the same from every build of the same inputs: exports,
# calibrations, converted models, the FP32 reference outputs, compiled extensions. The rest (Inductor's kernels,
# TensorRT plans and timing caches) is one compile's draw of kernels, which `vitperf ab` samples afresh per process;
# Inductor's kernels, and the ready-to-load engines made of them (engines/ready.py), join the reproducible parts when
# compiled without timed choices (--vitperf-compile=deterministic).
REPRODUCIBLE_PARTS = ("onnx", "calibration", "converted", "references", "torch_extensions")
INDUCTOR_PART = "inductor"
READY_PART = "ready"
