#!/usr/bin/env bash
# Session 33's last GPU call: the files changed since call 2 on CUDA tensors, and the -m gpu tests
# that time kernels through bench_gpu (tuner, bench, attention tuning) or use the public ops.
set -uo pipefail
timeout 240 python -m pytest -q -p no:cacheprovider tests/test_subclasses.py tests/test_tuner.py \
  tests/test_dispatch_cli.py tests/test_softmax_bad_input.py > "$OUT/changed_tests_cuda.txt" 2>&1
echo "changed files on CUDA rc=$?"; tail -1 "$OUT/changed_tests_cuda.txt"
timeout 320 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py tests/test_bench_units.py \
  tests/test_ops.py tests/test_fast_launch.py tests/test_attention_tuning.py > "$OUT/gpu_tests.txt" 2>&1
echo "-m gpu rc=$?"; grep -E "passed|failed" "$OUT/gpu_tests.txt" | tail -3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
