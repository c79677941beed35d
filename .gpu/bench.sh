#!/usr/bin/env bash
# The second lent-GPU call of 2026-11-26, on the machine .gpu/seeds.sh left warm (its models in experiments/runs):
#   bash .gpu/bench.sh OUT
# 1. issue 43's table on the ADL Table 5 baseline (self-att/self-att seed 3): .gpu/run43.sh without the CUDA tests;
# 2. the RNN and CNN decoders (self-att/RNN, self-att/CNN seed 3) at beam 5, batch 64, fp32: eager vs CUDA graphs;
# 3. COMET's short sentences (issue 38, point 4): experiments/analysis/batchnorm_short_sentences.py on COMET and
#    the Transformer of COMET Table 1, seed 3, on val.
set -uo pipefail
out=${1:?usage: .gpu/bench.sh OUT}
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
runs=experiments/runs/adl-table5-cpu/runs comet=experiments/runs/comet-table1-cpu/runs
test=(.m30k/test_2016_flickr.de.gz .m30k/test_2016_flickr.en.gz)
RUN43_TESTS=0 bash .gpu/run43.sh "$out" $runs/self-att-self-att/seed-3/model "${test[@]}"
for family in self-att-RNN self-att-CNN; do
    timeout -k 5 40 python3 benchmarks/gpu_decode.py --model $runs/$family/seed-3/model --src "${test[0]}" \
        --ref "${test[1]}" --beams 5 --batch-sizes 64 --precisions fp32 --out "$out/gpu_decode-$family.md" \
        > "$out/gpu_decode-$family.log" 2>&1
    cat "$out/gpu_decode-$family.md"
done
timeout -k 5 100 python3 experiments/analysis/batchnorm_short_sentences.py $comet/COMET/seed-3/model \
    $comet/Transformer/seed-3/model --src .m30k/val.de.gz --ref .m30k/val.en.gz --train-src .m30k/train.de.gz \
    --device cuda > "$out/comet-short.md" 2> "$out/comet-short.log"
cat "$out/comet-short.md"; tail -n 3 "$out/comet-short.log"
