#!/usr/bin/env bash
# GPU checks and measurements (see benchmarks/NOTES.md, "On a GPU"). From the repository root, on a CUDA machine:
#   benchmarks/gpu.sh OUT [PART ...]    PART: info tests train decode profile multi30k (default: all, in this order)
# Each part writes OUT/PART.log; bench parts also their bench-results folders under OUT/.
set -uo pipefail
out=${1:?usage: benchmarks/gpu.sh OUT [PART ...]}
shift
parts=${*:-info tests train decode profile multi30k}
py=${PYTHON:-python3}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}src PYTHONUNBUFFERED=1
adlnmt() { "$py" -m adlnmt "$@"; }
mkdir -p "$out"

info() {
  nvidia-smi
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
  nproc
}
tests() { "$py" -m pytest -q -m cuda tests -p no:cacheprovider; }
train() {
  local presets="transformer-small transformer transformer-aan t5-rnn-rnn t5-cnn-cnn"
  for precision in fp32 bf16; do
    for tokens in 4000 32000; do
      adlnmt bench train --preset $presets --device cuda --precision $precision --batch-tokens $tokens \
        --updates 20 --out "$out/train-$precision-$tokens"
    done
  done
}
decode() {
  for batch in 64 256; do
    for off in none host_bookkeeping; do
      local flags=()
      [ "$off" != none ] && flags=(--speedups-off "$off")
      adlnmt bench decode --preset transformer-small transformer transformer-aan t5-self-att-rnn --beams 1,5,20 \
        --batch-size $batch --sentences $((batch * 4)) --no-sweep --device cuda --repeat 2 "${flags[@]}" \
        --out "$out/decode-$batch-off-$off"
    done
  done
}
profile() {
  for off in none host_bookkeeping; do
    "$py" benchmarks/profile_decode.py --preset transformer-small --device cuda --beam 5 --batch-size 64 \
      --sentences 256 --speedups-off "${off/none/}"
  done
}
multi30k() {
  "$py" benchmarks/train_multi30k.py --minutes "${MULTI30K_MINUTES:-5}" --device cuda --precision bf16 \
    --checkpoint-interval 250 --out "$out/multi30k"
  local test_de="$out/multi30k/raw/test_2016_flickr.de"
  for batch in 64 256; do
    adlnmt bench decode --model "$out/multi30k/model" --input "$test_de" --beams 1,5,20 --batch-size $batch \
      --no-sweep --device cuda --repeat 2 --out "$out/decode-multi30k-$batch"
  done
}

for part in $parts; do
  echo "=== $part $(date -u +%T)"
  start=$SECONDS
  "$part" 2>&1 | tee "$out/$part.log"
  echo "=== $part: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s"
done
