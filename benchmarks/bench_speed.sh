#!/usr/bin/env bash
# The speed tables of the speed issue, with `adlnmt bench` (see `adlnmt bench decode --help`):
#
#   benchmarks/bench_speed.sh decode    # every ADL Table 5 decoder + the AAN variants + the Transformer,
#                                       # beams 1,4,8,12,16,20, cached and uncached
#   benchmarks/bench_speed.sh lengths   # AAN (with/without FFN) vs post-norm Transformer: ms/sentence by length
#   benchmarks/bench_speed.sh train     # updates/s, target tokens/s, peak memory per preset
#   benchmarks/bench_speed.sh all       # the three, one after the other
#
# Presets are randomly initialised at the reference size (SIZE), so nothing needs training. Each part
# writes CSV/JSON (and length.png) under $OUT/<part>/ and prints its table. Run it on an otherwise idle
# machine: the tool warns when the load average says other processes compete for the cores.
# Environment (defaults): THREADS (2), SIZE ("--d-model 256 --heads 4 --d-ff 1024"), SENTENCES (200),
# SWEEP_SENTENCES (20), OUT (benchmarks/runs/speed), EXTRA (more flags for every part, e.g. "--repeat 3").
set -euo pipefail
cd "$(dirname "$0")/.."

ADLNMT=${ADLNMT:-.venv/bin/adlnmt}
THREADS=${THREADS:-2}
SIZE=${SIZE:---d-model 256 --heads 4 --d-ff 1024}
SENTENCES=${SENTENCES:-200}
SWEEP_SENTENCES=${SWEEP_SENTENCES:-20}
OUT=${OUT:-benchmarks/runs/speed}
EXTRA=${EXTRA:-}

decode() {
    # shellcheck disable=SC2086
    "$ADLNMT" bench decode --preset @table5 @aan $SIZE --baseline transformer-postnorm --threads "$THREADS" \
        --sentences "$SENTENCES" \
        --beams 1,4,8,12,16,20 --uncached --no-sweep --out "$OUT/decode" $EXTRA
}

lengths() {
    # shellcheck disable=SC2086
    "$ADLNMT" bench decode --preset transformer-aan transformer-aan-noffn transformer-postnorm $SIZE \
        --baseline transformer-postnorm --threads "$THREADS" --no-table \
        --lengths 10,25,50,100,200 --sweep-beams 1,4 --sweep-sentences "$SWEEP_SENTENCES" --uncached \
        --out "$OUT/lengths" $EXTRA
}

train() {
    # shellcheck disable=SC2086
    "$ADLNMT" bench train --preset @table5 @aan $SIZE --threads "$THREADS" --batch-tokens 4000 --updates 20 \
        --warmup-updates 3 --out "$OUT/train" $EXTRA
}

case "${1:-}" in
    decode) decode ;;
    lengths) lengths ;;
    train) train ;;
    all) decode; lengths; train ;;
    *) echo "usage: $0 decode|lengths|train|all" >&2; exit 2 ;;
esac
