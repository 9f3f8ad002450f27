#!/usr/bin/env bash
# The session's last device call: session 27's gpu_final.sh (every -m gpu test in 14 shards,
# a quick softmax and attention bench), then on the GPU the session's new CPU tests that run
# on CUDA tensors too: attention vmap rule, softmax's 4th positional argument, DISABLE's
# backward, the 0-byte database and the FLASHTUNE_LOG source line.
set -uo pipefail
bash benchmarks/results/session27_2026-11-23/scripts/gpu_final.sh
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_attention_adversarial.py -k vmap \
  tests/test_ops_edge.py -k "vmap or fourth" > "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests (attention vmap, 4th arg) rc=$?"; tail -2 "$OUT/new_tests_gpu.txt"
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_dispatch.py \
  -k "disable or empty_database or log_names" >> "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests (dispatch) rc=$?"; tail -2 "$OUT/new_tests_gpu.txt"
