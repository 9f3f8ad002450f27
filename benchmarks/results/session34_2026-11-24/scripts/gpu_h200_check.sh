#!/usr/bin/env bash
# Session 34's last device call (H200): the tuner's new input check on a GPU (the -m gpu tuner
# tests and a small tune), the session's changed test files on CUDA tensors, a quick bench.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/gpu_tuner_tests.txt" 2>&1
echo "-m gpu tuner rc=$?"; tail -1 "$OUT/gpu_tuner_tests.txt"
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_tuner.py tests/test_attention_api.py \
  tests/test_ops_edge.py tests/test_bench_units.py tests/test_cli_arguments.py > "$OUT/changed_tests_cuda.txt" 2>&1
echo "changed files on CUDA rc=$?"; tail -1 "$OUT/changed_tests_cuda.txt"
timeout 90 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --problem attention_fwd:float16:1x8x1024x64 --trials 6 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -2 "$OUT/tune.txt"
timeout 140 python -m flashtune bench --quick --ops softmax --budget 120 --no-overhead --out "$OUT/bench" \
  > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"; tail -12 "$OUT/bench_stdout.txt"
