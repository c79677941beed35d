#!/usr/bin/env bash
# Grids on a lent machine within a deadline (docs/experiments.md, "On a lent GPU"). From the repository root:
#   experiments/gpu-grid.sh OUT SECONDS CORPUS GRID [GRID ...] -- EXPERIMENT-OPTIONS
# e.g. experiments/gpu-grid.sh "$OUT" 540 .m30k experiments/adl-table2.yaml -- --scale cpu --device cuda --jobs 6
# CORPUS is the Multi30k folder carried along: the grids read ../shared/data/multi30k, which is linked to it when
# missing. Each GRID runs `adlnmt experiment GRID EXPERIMENT-OPTIONS` in turn until SECONDS after the start, when the
# running one gets SIGTERM (its finished runs are archived; the others are lost with the machine). OUT/results.tgz
# then holds experiments/results/ (every archive, committed runs included; no data or weights) to unpack over the
# repository; OUT/logs.tgz the runs' logs.
set -uo pipefail
usage="usage: experiments/gpu-grid.sh OUT SECONDS CORPUS GRID [GRID ...] -- EXPERIMENT-OPTIONS"
out=${1:?$usage} seconds=${2:?$usage} corpus=${3:?$usage}
shift 3
grids=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do grids+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#grids[@]} -gt 0 ] || { echo "$usage" >&2; exit 2; }
[ -d "$corpus" ] || { echo "error: corpus folder $corpus not found" >&2; exit 2; }
deadline=$((SECONDS + seconds))
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$out" ../shared/data
[ -e ../shared/data/multi30k ] || ln -s "$(cd "$corpus" && pwd)" ../shared/data/multi30k

for grid in "${grids[@]}"; do
    left=$((deadline - SECONDS - 45))  # 45 s for the stopped runs' states, the report and the tarballs
    if [ $left -lt 30 ]; then echo "=== $grid: not started, the deadline is near"; continue; fi
    echo "=== $grid: $left s left"
    timeout -k 30 -s TERM $left "${PYTHON:-python3}" -m adlnmt experiment "$grid" "$@"
    echo "=== $grid: exit $?"
done
experiments/pack-results.sh "$out"  # the archives as git keeps them: no data or weights
