#!/usr/bin/env bash
# A lent-GPU call (issues 38, 45): seeds of grids side by side within a deadline, the CUDA tests beside them. From the
# repository root, with .m30k (the corpus) and .whl (nltk, for METEOR) carried:
#   bash .gpu/seeds.sh OUT SECONDS GRID[@SCALE]:SEEDS:JOBS[:VARIANTS] ...
# e.g. experiments/adl-table3.yaml:1,2,3:4 experiments/comet-table1.yaml@cpu-mixed:1:4 (SCALE: cpu unless given;
# H100/H200: 60-70 updates/s in all for these models, 4 or 8 side by side, so 8-10 runs a 545 s call; rows shared
# with another grid's archived runs are reused, not trained).
# OUT/results.tgz: experiments/results/ to unpack over the checkout (no data or weights); OUT/logs.tgz: the runs' logs;
# OUT/cuda-tests.log (SEEDS_CUDA_TESTS=0 skips the tests, leaving every core to the runs). The weights stay on the
# machine (ignored by git) for a next call. SEEDS_MPS=1 starts NVIDIA's Multi-Process Service first, so that the runs'
# small kernels share the GPU at once instead of taking turns (the same kernels, so the same arithmetic); on the fifth
# loan (H100) it started and ran 9 and then 6 runs side by side, with no clear gain (benchmarks/NOTES.md); where the
# daemon or a CUDA call through it fails, the runs go on without it (said in the output). Plan whole waves: runs cut by
# the deadline leave their checkpoints on the machine, lost when it is given back. Before a second call on the warm
# machine, copy the first call's new runs into this checkout: the device mirrors the working tree, so the finished
# runs' result.json and hyp/ (archive files, not ignored by git) are deleted there when the sent tree lacks them.
# A grid and scale named again (other seeds of other variants, e.g. GRID:3:1:A GRID:1,2,3:3:B) runs beside the first
# in its own folder, experiments/runs/NAME-SCALE-K (its data and weights; a folder is locked by the command at work),
# archiving into the same results folder, as two CPU lanes do (docs/experiments.md).
set -uo pipefail
usage="usage: .gpu/seeds.sh OUT SECONDS GRID[@SCALE]:SEEDS:JOBS[:VARIANTS] ..."
out=${1:?$usage} seconds=${2:?$usage}
shift 2
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
declare -A named  # how many specs name each grid and scale so far: the K-th (K > 1) gets its own --out and log
runs=()  # FILE:SCALE:K:SEEDS:JOBS:VARIANTS, each spec checked and its scale made explicit
for spec in "$@"; do
    IFS=: read -r grid seeds jobs variants <<< "$spec"
    file=${grid%@*} scale=cpu
    [ "$grid" = "$file" ] || scale=${grid#*@}
    [ -f "$file" ] && [[ $seeds =~ ^[0-9]+(,[0-9]+)*$ ]] && [[ $jobs =~ ^[1-9][0-9]*$ ]] ||
        { echo "bad grid spec $spec: a grid file, seeds 1,2,..., jobs >= 1 ($usage)" >&2; exit 2; }
    named[$file@$scale]=$((${named[$file@$scale]:-0} + 1))
    runs+=("$file:$scale:${named[$file@$scale]}:$seeds:$jobs:$variants")
done
deadline=$((SECONDS + seconds))
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
mkdir -p "$out" ../shared/data
[ -e ../shared/data/multi30k ] || ln -s "$PWD/.m30k" ../shared/data/multi30k
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, adlnmt.train.device as d; print('torch', torch.__version__, d.full_fp32())" || exit 1
if [ "${SEEDS_MPS:-0}" = 1 ]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d && timeout 60 python3 -c "import torch; torch.ones(1, device='cuda').sum().item()"
    then
        echo "MPS: on"
        trap 'echo quit | nvidia-cuda-mps-control' EXIT
    else
        echo quit | nvidia-cuda-mps-control 2>/dev/null
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        echo "MPS: off (the daemon or a CUDA call through it failed; the runs take turns on the GPU)"
    fi
fi
if [ "${SEEDS_CUDA_TESTS:-1}" != 0 ]; then
    timeout -k 10 300 python3 -m pytest -m cuda tests/cuda -q -p no:cacheprovider > "$out/cuda-tests.log" 2>&1 &
fi
grid() {  # GRID SCALE LOG OPTIONS...: one grid until the deadline (45 s kept for packing)
    local grid=$1 scale=$2 log=$3; shift 3
    timeout -k 40 -s TERM $((deadline - SECONDS - 45)) python3 -m adlnmt experiment "$grid" --scale "$scale" \
        --device "${DEVICE:-cuda}" --threads 1 --decode-beside-training "$@" > "$out/$log" 2>&1
    echo "=== $grid: exit $?" >> "$out/$log"
}
for run in "${runs[@]}"; do  # each spec in the background, seed by seed in the order given
    IFS=: read -r file scale k seeds jobs variants <<< "$run"
    name=$(basename "$file" .yaml)-$scale folders=()
    if [ "$k" -gt 1 ]; then
        name+=-$k
        folders=(--out "experiments/runs/$name" --results "$(python3 -c 'import sys
from adlnmt.experiment.folders import default_results
from adlnmt.experiment.grid import load_grid
print(default_results(load_grid(sys.argv[1], sys.argv[2])))' "$file" "$scale")") || exit 1
    fi
    grid "$file" "$scale" "$name.log" --seeds "$seeds" --jobs "$jobs" ${variants:+--variants "$variants"} \
        "${folders[@]}" &
done
wait
experiments/pack-results.sh "$out"
grep -h "^done\|^FAILED\|=== " "$out"/*.log; [ ! -f "$out/cuda-tests.log" ] || tail -3 "$out/cuda-tests.log"
