#!/usr/bin/env bash
# Issue 43 on a lent GPU, from the repository root, after the models are trained (about 200 s in all):
#   bash .gpu/run43.sh OUT MODEL_DIR TEST_SRC TEST_REF
# 1. every CUDA test (tests/cuda, CUDA graphs included) → OUT/cuda-tests.log;
# 2. benchmarks/gpu_decode.py on MODEL_DIR → OUT/gpu_decode.md (rows written as they come), its log OUT/gpu_decode.log.
set -uo pipefail
usage="usage: bash .gpu/run43.sh OUT MODEL_DIR TEST_SRC TEST_REF"
out=${1:?$usage} model=${2:?$usage} src=${3:?$usage} ref=${4:?$usage}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$out"
bench_mode=()  # without a GPU (a try on the CPU): the reduced table
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/device.txt" 2>&1 ||
    bench_mode=(--device cpu --quick)
if ls .whl/ctranslate2-*.whl > /dev/null 2>&1; then  # CTranslate2 carried (its wheels need CUDA 12's cuBLAS)
    "${PYTHON:-python3}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/ctranslate2-*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
    sites=$("${PYTHON:-python3}" -c 'import site; print(*site.getsitepackages())')
    cublas13=$(find $sites -name 'libcublas.so.13*' 2>/dev/null | head -n 1)
    if [ -n "$cublas13" ]; then  # try the device's CUDA 13 cuBLAS under the CUDA 12 name (the row says so)
        mkdir -p /tmp/cublas12 && ln -sf "$cublas13" /tmp/cublas12/libcublas.so.12
        export LD_LIBRARY_PATH=/tmp/cublas12${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} CT2_NOTE="cuBLAS 13 as libcublas.so.12"
    fi
fi
start=$SECONDS
if [ "${RUN43_TESTS:-1}" = 1 ]; then  # RUN43_TESTS=0: the CUDA tests ran in an earlier call
    timeout -k 5 125 "${PYTHON:-python3}" -m pytest -m cuda tests/cuda -q -p no:cacheprovider > "$out/cuda-tests.log" 2>&1
    echo "cuda tests: exit $? after $((SECONDS - start)) s"; tail -n 15 "$out/cuda-tests.log"
fi
start=$SECONDS
timeout -k 5 65 "${PYTHON:-python3}" benchmarks/gpu_decode.py --model "$model" --src "$src" --ref "$ref" "${bench_mode[@]}" \
    --out "$out/gpu_decode.md" > "$out/gpu_decode.log" 2>&1
echo "gpu_decode: exit $? after $((SECONDS - start)) s"; cat "$out/gpu_decode.md" 2>/dev/null; grep -v "^|" "$out/gpu_decode.log" | tail -n 8
