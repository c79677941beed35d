#!/usr/bin/env bash
# Issue 65's multilingual example end to end: prepare the four data directories that
# experiments/multi30k-multilingual.yaml names (under experiments/data/, each skipped when it holds a prepared data
# set already), then run the grid at SCALE (default small, a smoke test; further arguments go to adlnmt experiment).
#
#   experiments/multi30k-multilingual.sh [SCALE [adlnmt experiment options ...]]
#
# ADLNMT (default "python3 -m adlnmt") runs adlnmt; M (default ../shared/data/multi30k, from the repository root)
# holds Multi30k's gzip files.
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${1:-small}
[ $# -gt 0 ] && shift
M=${M:-../shared/data/multi30k}
read -r -a adlnmt <<< "${ADLNMT:-python3 -m adlnmt}"

prepare() {  # NAME, then the --train/--valid flags of its corpora
    local out=experiments/data/$1
    shift
    if [ -f "$out/manifest.json" ]; then
        echo "$out: prepared already"
        return
    fi
    "${adlnmt[@]}" prepare --vocab-size 8000 --workers 2 --out "$out" "$@"
}

every=()
for L in de fr cs; do
    corpus=(--train "$L-en=$M/train.$L.gz,$M/train.en.gz" --valid "$L-en=$M/val.$L.gz,$M/val.en.gz")
    prepare "multi30k-$L-en" "${corpus[@]}"
    every+=("${corpus[@]}")
done
prepare multi30k-xx-en "${every[@]}"
"${adlnmt[@]}" experiment experiments/multi30k-multilingual.yaml --scale "$scale" "$@"
