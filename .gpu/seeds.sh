#!/usr/bin/env bash
# The lent-GPU call of 2026-11-26 (issue 38): seeds of two grids side by side within a deadline, the CUDA tests
# beside them. From the repository root, with .m30k (the corpus) and .whl (nltk, for METEOR) carried:
#   bash .gpu/seeds.sh OUT SECONDS
# OUT/results.tgz: experiments/results/ to unpack over the checkout; OUT/logs.tgz: the runs' logs;
# OUT/cuda-tests.log. The model directories stay on the machine (experiments/runs/, ignored) for a next call.
set -uo pipefail
out=${1:?usage: .gpu/seeds.sh OUT SECONDS} seconds=${2:?usage: .gpu/seeds.sh OUT SECONDS}
deadline=$((SECONDS + seconds))
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
mkdir -p "$out" ../shared/data
[ -e ../shared/data/multi30k ] || ln -s "$PWD/.m30k" ../shared/data/multi30k
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, adlnmt.train.device as d; print('torch', torch.__version__, d.full_fp32())" || exit 1
timeout -k 10 300 python3 -m pytest -m cuda tests/cuda -q -p no:cacheprovider > "$out/cuda-tests.log" 2>&1 &
grid() {  # GRID LOG OPTIONS...: one grid until the deadline (45 s kept for packing)
    local grid=$1 log=$2; shift 2
    timeout -k 40 -s TERM $((deadline - SECONDS - 45)) python3 -m adlnmt experiment "$grid" --scale cpu \
        --device "${DEVICE:-cuda}" --threads 1 --decode-beside-training "$@" > "$out/$log" 2>&1
    echo "=== $grid: exit $?" >> "$out/$log"
}
grid experiments/adl-table5.yaml adl-table5.log --seeds 2,3,4 --jobs 11 &  # seed by seed: 2 (2 to redo), 3, then 4
grid experiments/comet-table1.yaml comet-table1.log --seeds 3 --variants COMET,Transformer --jobs 2 &  # for point 4
wait
tar czf "$out/results.tgz" experiments/results
find experiments/runs -name log.txt -print0 2>/dev/null | tar czf "$out/logs.tgz" --null -T -
grep -h "^done\|^FAILED\|=== " "$out"/*.log; tail -3 "$out/cuda-tests.log"
