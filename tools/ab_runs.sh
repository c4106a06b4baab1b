#!/usr/bin/env bash
# `vitperf ab` on one GPU, the runs that show what it can tell apart: an A/A (one environment as both sides), an
# A/A + delta (B adds a known GPU-side delay to FP8) and a real difference between environments (B turns off
# cuBLASLt for addmm, which changes the kernels of every Linear with a bias).
#
#   tools/ab_runs.sh aa|delay|addmm WORK OUT [vitperf ab options]
#
# WORK keeps both sides' caches, logs and per-process JSON (reuse it: later runs prepare warm; --resume continues a
# run that was cut off); OUT gets WHAT.md, WHAT.json and the per-process JSON as WHAT-rounds.tgz.
# The suite (SUITE, default below): vit_base at fp16, bf16, fp8 and int8, batch 1 and 64, one build per process and
# short in-process rounds (in an A/B run each process is one observation, and its spread comes from the rounds), and
# the GEMM micro-suite's products of ViT-B/16's four Linears (all 78 products would add about a minute a process).
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: tools/ab_runs.sh aa|delay|addmm WORK OUT [vitperf ab options]"
what=${1:?$usage} work=${2:?$usage} out=${3:?$usage}; shift 3
python=${PYTHON:-python3}
case "$what" in
    aa) b=$python ;;
    delay) b="env PYTEST_ADDOPTS=--vitperf-inject-delay=fp8=2% $python" ;;
    addmm) b="env DISABLE_ADDMM_CUDA_LT=1 $python" ;;
    *) echo "ab_runs.sh: unknown run $what; $usage" >&2; exit 2 ;;
esac
suite=(suites/test_vit_latency.py suites/test_gemm.py::test_gemm_speed -k "not gemm or vitb16" --vitperf-models vit_base
    --vitperf-precisions fp16,bf16,fp8,int8 --vitperf-batch-sizes 1,64 --vitperf-builds 1 --vitperf-rounds 3
    --vitperf-slice-ms 100 --vitperf-warmup-ms 300 --vitperf-round-budget-s 0)
[ -n "${SUITE:-}" ] && read -r -a suite <<< "$SUITE"
mkdir -p "$work" "$out"
start=$SECONDS
"$python" -m pytest_vitperf.cli ab --a "$python" --b "$b" --work-dir "$work" --markdown "$out/$what.md" \
    --json "$out/$what.json" "$@" -- "${suite[@]}"
rc=$?
echo "ab_runs.sh $what: exit $rc after $((SECONDS - start)) s"
tar czf "$out/$what-rounds.tgz" -C "$work" --exclude 'cache-*' .
exit $rc
