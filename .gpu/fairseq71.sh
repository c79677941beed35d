#!/usr/bin/env bash
# Issue 71 on a lent GPU, one call: adlnmt and fairseq training the same Transformer side by side
# (benchmarks/fairseq_gpu.py), the profile of adlnmt's update (benchmarks/profile_train.py), then the CUDA tests.
# Prepared here first, and carried as .fs71 (ignored by git; 20 MB):
#   git -C FAIRSEQ_CLONE archive HEAD fairseq fairseq_cli | tar -x -C .fs71/src     # fairseq main, 3d262bb
#   .fs71/whl: hydra-core 1.0.7, omegaconf 2.0.6 (the wheel file from PyPI: pip download refuses its metadata),
#     antlr4-python3-runtime 4.8 (`pip wheel`: pure Python), bitarray (cp311, cp312, cp313: whichever Python the
#     device has)
#   here: the wheels unpacked into SITE with Cython and scikit-learn beside them (fairseq imports it), a copy SRC of
#   .fs71/src made to run by `python .gpu/fairseq_setup.py SRC SITE`, then
#   PYTHONPATH=SITE python benchmarks/fairseq_gpu.py prepare --work .fs71/work --fairseq-src SRC
# Then, from the repository root on the device (the call carries .fs71):
#   bash .gpu/fairseq71.sh OUT SECONDS [RUN ...]      (RUN as in fairseq_gpu.py; default: the eight below)
# OUT: fairseq_gpu.{md,json}, logs.tgz, profile.txt, cuda-tests.log, setup.log.
set -uo pipefail
out=${1:?usage: .gpu/fairseq71.sh OUT SECONDS [RUN ...]} seconds=${2:?usage: .gpu/fairseq71.sh OUT SECONDS [RUN ...]}
shift 2
# each precision side by side, then a second fp16 pair in the other order while time is left
runs=(adlnmt:fp16 fairseq:fp16 adlnmt:bf16 fairseq:bf16 adlnmt:fp32 fairseq:fp32 fairseq:fp16 adlnmt:fp16)
[ $# -gt 0 ] && runs=("$@")
deadline=$((SECONDS + seconds))
mkdir -p "$out" /tmp/site
# Wheels unpacked, not installed: pip refuses omegaconf 2.0.6's metadata (PyYAML (>=5.1.*)).
for wheel in .fs71/whl/*.whl; do python3 -m zipfile -e "$wheel" /tmp/site; done
rm -rf /tmp/fairseq-src && cp -r .fs71/src /tmp/fairseq-src
python3 .gpu/fairseq_setup.py /tmp/fairseq-src /tmp/site > "$out/setup.log" 2>&1 || tail -n 20 "$out/setup.log"
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
PYTHONPATH=/tmp/fairseq-src:$PYTHONPATH python3 -c "import fairseq; print('fairseq', fairseq.__version__)" 2>&1 | tail -n 1
echo "=== benchmark $(date -u +%T)"
python3 benchmarks/fairseq_gpu.py train --work .fs71/work --fairseq-src /tmp/fairseq-src --out "$out" \
    --updates 300 --seconds $((deadline - SECONDS - 150)) --runs "${runs[@]}"
echo "=== profile $(date -u +%T)"
(cd benchmarks && timeout -k 5 60 python3 profile_train.py --device cuda --precision bf16 \
    --compare-off accelerator_loss_chunk_mib) >> "$out/profile.txt" 2>&1
grep "ms/update" "$out/profile.txt"
echo "=== CUDA tests $(date -u +%T)"
left=$((deadline - SECONDS))
[ $left -gt 30 ] && timeout -k 5 $left python3 -m pytest -m cuda tests/cuda -q -p no:cacheprovider \
    > "$out/cuda-tests.log" 2>&1
tail -n 3 "$out/cuda-tests.log"
echo "=== done $(date -u +%T)"
