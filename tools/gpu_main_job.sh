#!/usr/bin/env bash
# The main job twice with one cache folder, cold then warm: what a developer runs on a GPU machine before calling
# GPU-facing work done. Prints the device, each run's counts and wall time, and each run's summary tables.
#
#   tools/gpu_main_job.sh [--cache-dir DIR] [--log-dir DIR] [--only cold|warm] [-- extra pytest arguments]
#
# The cache folder starts empty (a cold run) unless --keep-cache is given; --only runs one of the two (warm keeps the
# cache: two calls of a machine with a time limit per call); logs go to --log-dir (default: a new
# temporary folder), with each run's --benchmark-json beside its log (cold.json, warm.json: `vitperf floors suggest`
# reads them). Exits non-zero if either run fails.
set -uo pipefail
cd "$(dirname "$0")/.."

cache=""
logs=""
keep=0
runs="cold warm"
while [ $# -gt 0 ]; do
    case "$1" in
        --cache-dir) cache=$2; shift 2 ;;
        --log-dir) logs=$2; shift 2 ;;
        --keep-cache) keep=1; shift ;;
        --only) runs=$2; [ "$2" = warm ] && keep=1; shift 2 ;;
        --) shift; break ;;
        *) echo "gpu_main_job.sh: unknown argument $1; usage: tools/gpu_main_job.sh [--cache-dir DIR] [--log-dir DIR] [--keep-cache] [--only cold|warm] [-- pytest args]" >&2; exit 2 ;;
    esac
done
cache=${cache:-$(mktemp -d)/vitperf-cache}
logs=${logs:-$(mktemp -d)}
[ "$keep" = 1 ] || rm -rf "$cache"
mkdir -p "$cache" "$logs"
python=${PYTHON:-python3}

echo "== vitperf main job, $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader 2>/dev/null \
    || echo "no nvidia-smi: no NVIDIA GPU visible"
"$python" -m pytest_vitperf.cli env
cmd=("$python" -m pytest --gpu-bench suites/ --vitperf-cache-dir "$cache" -rs -p no:cacheprovider "$@")
echo "command: ${cmd[*]}"

status=0
declare -A walls counts
for run in $runs; do
    start=$SECONDS
    PYTHONUNBUFFERED=1 "${cmd[@]}" --benchmark-json "$logs/$run.json" > "$logs/$run.log" 2>&1
    rc=$?
    walls[$run]=$((SECONDS - start))
    counts[$run]=$(grep -E "^=+ .*(passed|failed|error|skipped).* in [0-9.]+s" "$logs/$run.log" | tail -1 | tr -d '=' | sed 's/^ *//')
    [ "$rc" -eq 0 ] || status=1
    echo
    echo "== $run run: exit $rc, wall ${walls[$run]} s: ${counts[$run]}"
    # The summary and baselines tables (up to pytest-benchmark's own tables), the skip reasons and any failures.
    sed -n '/=* vitperf summary =*/,/^-* benchmark\|short test summary info/p' "$logs/$run.log" \
        | grep -v "short test summary info\|^-* benchmark"
    grep -E "^(SKIPPED|FAILED|ERROR)" "$logs/$run.log"
done

echo
echo "== wall: cold ${walls[cold]:--} s, warm ${walls[warm]:--} s; cache $cache ($(du -sh "$cache" | cut -f1)); logs $logs"
exit "$status"
