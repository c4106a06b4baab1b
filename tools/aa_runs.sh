#!/usr/bin/env bash
# A/A and sensitivity runs: N fresh processes of the latency suite, each measuring one family per batch of FP16, two
# separately built FP16 engines (fp16-a against a floor of 0.97, fp16-b against 1.03) and two more with a known
# injected delay (fp16-d1 +1%, fp16-d3 +3%); then tools/intervals.py over them all.
#
#   tools/aa_runs.sh N OUT_DIR [extra pytest arguments]
#
# Writes OUT_DIR/aa-K.json (--benchmark-json of process K), OUT_DIR/aa-K.log and OUT_DIR/summary.json, and prints
# the intervals table. fp16-b fails its floor in every process where the run judges right: pytest exits 1 there.
# Arguments after OUT_DIR come last, so they override these (pytest keeps an option's last value). What a run can
# see at batch 1 depends on its builds (docs/statistics.md): for the +1% and +3% delays alone, with four builds,
#   tools/aa_runs.sh 10 OUT --vitperf-builds 4 --vitperf-batch-sizes 1 --vitperf-precisions fp16,fp16-d1,fp16-d3
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:?usage: tools/aa_runs.sh N OUT_DIR [pytest args]}; out=${2:?usage: tools/aa_runs.sh N OUT_DIR [pytest args]}
shift 2
mkdir -p "$out"
export PYTHONPATH="$PWD/tools${PYTHONPATH:+:$PYTHONPATH}"
python=${PYTHON:-python3}
for k in $(seq 1 "$n"); do
    start=$SECONDS
    "$python" -m pytest --gpu-bench suites/test_vit_latency.py -p aa_precisions -p no:cacheprovider -q \
        --vitperf-precisions fp16,fp16-a,fp16-b,fp16-d1,fp16-d3 --vitperf-inject-delay fp16-d1=1%,fp16-d3=3% \
        --vitperf-floors tools/aa_floors.json --benchmark-json "$out/aa-$k.json" "$@" > "$out/aa-$k.log" 2>&1
    echo "process $k: exit $?, $((SECONDS - start)) s: $(tail -1 "$out/aa-$k.log")"
done
"$python" tools/intervals.py "$out"/aa-*.json --floors tools/aa_floors.json --precisions 1 --out "$out/summary.json"
