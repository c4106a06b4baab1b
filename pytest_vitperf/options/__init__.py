"""Command-line and ini options: their names. table.py holds the table of them (each one's parser and help) and
registers them with pytest, resolve.py turns them into Settings, and parsers.py holds the value parsers.

Kept free of heavy imports: `pytest --help` loads this module.
"""

from __future__ import annotations

GPU_BENCH = "--gpu-bench"
GPU_BENCH_INI = "vitperf_gpu_bench"
BACKEND = "--vitperf-backend"
PRECISIONS_OPT = "--vitperf-precisions"
BATCH_SIZES = "--vitperf-batch-sizes"
MODELS = "--vitperf-models"
WEIGHTS = "--vitperf-weights"
WARMUP_MS = "--vitperf-warmup-ms"
DURATION_MS = "--vitperf-duration-ms"
MIN_ITERATIONS = "--vitperf-min-iterations"
CUDA_GRAPH = "--vitperf-cuda-graph"
NO_CUDA_GRAPH = "--no-vitperf-cuda-graph"
CLOCKS = "--vitperf-clocks"
NO_CLOCKS = "--no-vitperf-clocks"
COMPILE = "--vitperf-compile"
CACHE_DIR = "--vitperf-cache-dir"
FLOORS = "--vitperf-floors"
BASELINE_DIR = "--vitperf-baseline-dir"
HISTORY = "--vitperf-history"
STORE = "--vitperf-store"
EXPORT = "--vitperf-export"
REPORT = "--vitperf-report"
THRESHOLD = "--vitperf-regression-threshold"
NOISE = "--vitperf-noise-threshold"
MAX_NOISE = "--vitperf-max-noise"
ACCURACY_BOUND = "--vitperf-accuracy-bound"
ACCURACY_DATA = "--vitperf-accuracy-data"
TIMEOUT_MS = "--vitperf-timeout-ms"
UPDATE_BASELINES = "--vitperf-update-baselines"
STRICT = "--vitperf-strict"
COLD = "--vitperf-cold"
KERNELS = "--vitperf-kernels"
SHARE_DEVICES = "--vitperf-share-devices"
BUILD_APART = "--vitperf-build-apart"
ROUNDS = "--vitperf-rounds"
ROUNDS_AGREE = "--vitperf-rounds-agree"
FIRST_LOOK = "--vitperf-first-look"
BUILDS = "--vitperf-builds"
SLICE_MS = "--vitperf-slice-ms"
ROUND_BUDGET_S = "--vitperf-round-budget-s"
CONFIDENCE = "--vitperf-confidence"
INCONCLUSIVE = "--vitperf-inconclusive"
SEED = "--vitperf-seed"
INJECT_DELAY = "--vitperf-inject-delay"
FALSE_ALARM = "--vitperf-false-alarm"
BOARD_SPREAD = "--vitperf-board-spread"
RECORD_RUN = "--vitperf-record-run"
STORE_BASELINES = "--vitperf-store-baselines"
GEMM_HOT = "--vitperf-gemm-hot"
WAIT_FOR = "--vitperf-wait-for"
TURN_DONE = "--vitperf-turn-done"
RELAY = "--vitperf-relay"
THREADS = "--vitperf-threads"
UNITS = "--vitperf-units"
SHARD = "--vitperf-shard"

INCONCLUSIVE_OUTCOMES = ("warn", "xfail", "fail")

LATENCY_SUITE = "test_vit_latency.py"  # the suite whose speedups floors judge: `vitperf floors make` runs it

COMPILE_MODES = ("auto", "off", "default", "deterministic", "max-autotune")


def _dest(opt: str) -> str:
    return opt.lstrip("-").replace("-", "_")
