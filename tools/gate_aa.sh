#!/usr/bin/env bash
# The stored-baseline gate on one machine, A/A and A/A + delta: one run writes the baselines, `vitperf calibrate` adds
# K runs to every row, then N fresh processes gate against them (with --vitperf-inject-delay PRECISION=REL among the
# pytest arguments, a known slowdown that the gate must flag, while every other row must stay quiet).
#
#   tools/gate_aa.sh write OUT [pytest args]         one run with --vitperf-update-baselines into OUT/baselines
#   tools/gate_aa.sh calibrate K OUT [pytest args]   vitperf calibrate --runs K --baseline-dir OUT/baselines
#   tools/gate_aa.sh gate N OUT [pytest args]        N processes gating; OUT/gate-J.json and OUT/gate-J.log
#
# The rows are the gated ones of the latency and GEMM suites (SUITES, default below). Each process's medians are in
# its --benchmark-json, so that tools/gate_matrix.py can judge the runs again offline with other statistics.
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: tools/gate_aa.sh write OUT | calibrate K OUT | gate N OUT [pytest args]"
phase=${1:?$usage}; shift
case "$phase" in
    write) n=1 ;;
    calibrate|gate) n=${1:?$usage}; shift ;;
    *) echo "gate_aa.sh: unknown phase $phase; $usage" >&2; exit 2 ;;
esac
out=${1:?$usage}; shift
mkdir -p "$out"
python=${PYTHON:-python3}
read -r -a suites <<< "${SUITES:-suites/test_vit_latency.py suites/test_gemm.py -k test_latency_or_test_gemm_speed}"
suites=("${suites[@]/test_latency_or_test_gemm_speed/test_latency or test_gemm_speed}")
base=(--gpu-bench -p no:cacheprovider -q "--vitperf-baseline-dir=$out/baselines" "${suites[@]}" "$@")
case "$phase" in
    write)
        "$python" -m pytest "${base[@]}" --vitperf-update-baselines --benchmark-json "$out/write.json" \
            > "$out/write.log" 2>&1
        echo "write: exit $?: $(tail -1 "$out/write.log")" ;;
    calibrate)
        "$python" -m pytest_vitperf.cli calibrate --runs "$n" --baseline-dir "$out/baselines" --quiet -- \
            "${suites[@]}" "$@" 2>&1 | tee "$out/calibrate.log" | tail -5 ;;
    gate)
        for _ in $(seq 1 "$n"); do
            j=$(( $(ls "$out"/gate-*.json 2>/dev/null | wc -l) + 1 ))
            start=$SECONDS
            "$python" -m pytest "${base[@]}" --benchmark-json "$out/gate-$j.json" > "$out/gate-$j.log" 2>&1
            rc=$?
            flagged=$(grep -cE "  (regression|improvement; refresh with)" "$out/gate-$j.log")
            echo "gate $j: exit $rc, $((SECONDS - start)) s, lines flagged: $flagged: $(tail -1 "$out/gate-$j.log")"
        done ;;
esac
