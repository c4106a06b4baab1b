#!/usr/bin/env bash
# `vitperf ab` on one GPU, the runs that show what it can tell apart: an A/A (one environment as both sides), an
# A/A + delta (B adds a known GPU-side delay to FP8) and a real difference between environments (B turns off
# cuBLASLt for addmm, which changes the kernels of every Linear with a bias).
#
#   tools/ab_runs.sh aa|delay|delay1|addmm|night-aa|night-delay1 WORK OUT [vitperf ab options]
#
# delay1 is +1% on FP8 (issue 83's acceptance); night-aa and night-delay1 run the nightly set at batches 1 and 16,
# relayed, the latter with +1% on ViT-L/16's FP8 alone.
#
# WORK keeps both sides' caches, logs and per-process JSON (reuse it: later runs prepare warm; --resume continues a
# run that was cut off); OUT gets WHAT.md, WHAT.json and the per-process JSON as WHAT-rounds.tgz.
# The suite (SUITE, default below): the latency suite, vit_base at fp16, bf16, fp8 and int8, batch 1 and 64, at
# `vitperf ab`'s own process plan (until 2026-12-04 it also held the GEMM micro-suite's products of ViT-B/16's four
# Linears, with round settings of its own, which now override that plan only where SUITE names them).
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: tools/ab_runs.sh aa|delay|delay1|addmm|night-aa|night-delay1 WORK OUT [vitperf ab options]"
what=${1:?$usage} work=${2:?$usage} out=${3:?$usage}; shift 3
python=${PYTHON:-python3}
case "$what" in
    aa|night-aa) b=$python ;;
    delay) b="env PYTEST_ADDOPTS=--vitperf-inject-delay=fp8=2% $python" ;;
    delay1) b="env PYTEST_ADDOPTS=--vitperf-inject-delay=fp8=1% $python" ;;
    night-delay1) b="env PYTEST_ADDOPTS=--vitperf-inject-delay=vit_large_patch16_224:fp8=1% $python" ;;
    addmm) b="env DISABLE_ADDMM_CUDA_LT=1 $python" ;;
    *) echo "ab_runs.sh: unknown run $what; $usage" >&2; exit 2 ;;
esac
suite=(suites/test_vit_latency.py --vitperf-models vit_base --vitperf-precisions fp16,bf16,fp8,int8
    --vitperf-batch-sizes 1,64)
relay=()
case "$what" in night-*) relay=(--relay)
    suite=(suites/test_vit_latency.py --vitperf-models nightly --vitperf-precisions fp16,bf16,fp8,int8
        --vitperf-batch-sizes 1,16) ;;
esac
[ -n "${SUITE:-}" ] && read -r -a suite <<< "$SUITE"
mkdir -p "$work" "$out"
start=$SECONDS
"$python" -m pytest_vitperf.cli ab --a "$python" --b "$b" --work-dir "$work" --markdown "$out/$what.md" \
    --json "$out/$what.json" "${relay[@]}" "$@" -- "${suite[@]}"
rc=$?
echo "ab_runs.sh $what: exit $rc after $((SECONDS - start)) s"
tar czf "$out/$what-rounds.tgz" -C "$work" --exclude 'cache-*' .
exit $rc
