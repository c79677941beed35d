#!/usr/bin/env bash
# Packs a lent machine's grid archives for the trip back (experiments/gpu-grid.sh, .gpu/seeds.sh). From the
# repository root:  experiments/pack-results.sh OUT
# OUT/results.tgz: experiments/results/ as git would keep it (the grid folders' .gitignore: no prepared data, SLURM
# files or locks; of each run only result.json and hyp/, not its weights); OUT/logs.tgz: every run's log.txt.
set -euo pipefail
out=${1:?usage: experiments/pack-results.sh OUT}
{
    find experiments/results -mindepth 2 \( -path 'experiments/results/*/data' -o -path 'experiments/results/*/slurm' \
        -o -path 'experiments/results/*/runs' -o -name experiment.lock \) -prune -o -type f -print
    find experiments/results -mindepth 5 -maxdepth 5 -path 'experiments/results/*/runs/*/*/*' \
        \( -name result.json -o -name hyp \) -print
} | tar czf "$out/results.tgz" -T -
find experiments/runs experiments/results -name log.txt -print0 2>/dev/null | tar czf "$out/logs.tgz" --null -T -
ls -l "$out/results.tgz" "$out/logs.tgz"
