#!/usr/bin/env bash
# The session's GPU check of the final tree: session 27's gpu_final.sh (every -m gpu test in
# 14 shards, a quick softmax and attention bench), then the session's new CPU tests that run
# on CUDA tensors too: attention under autocast and with a 0-d tensor scale, a numpy dim,
# torch.func.grad inside torch.compile, the boolean env switches, threads.
set -uo pipefail
bash benchmarks/results/session27_2026-11-23/scripts/gpu_final.sh
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_attention_api.py \
  tests/test_attention_adversarial.py tests/test_softmax_adversarial.py \
  -k "autocast or tensor_scale or dim_rejects or func_grad" > "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests (attention autocast/scale, dim, func.grad) rc=$?"; tail -2 "$OUT/new_tests_gpu.txt"
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_dispatch.py tests/test_fast_launch.py \
  tests/test_audit_threads.py -k "switch or boolean or thread" >> "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests (switches, threads) rc=$?"; tail -2 "$OUT/new_tests_gpu.txt"
