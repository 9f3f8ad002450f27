#!/usr/bin/env bash
# The session's GPU check of the final tree, two device calls (each is limited to 10 minutes):
#   gpu_final.sh matrix    session 27's script: every -m gpu test in 14 shards (the attention
#                          rescue rendered in every variant) and a quick softmax and attention
#                          bench (now with 16x1048576 in the quick set)
#   gpu_final.sh new       this session's new and changed tests on CUDA tensors, then a small
#                          `flashtune tune` (the finalists' re-check, a stored winner seeded)
set -uo pipefail
if [ "${1:-}" = matrix ]; then
  bash benchmarks/results/session27_2026-11-23/scripts/gpu_final.sh
  exit 0
fi
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_attention_adversarial.py \
  tests/test_attention_dispatch.py tests/test_dispatch.py tests/test_bench_units.py tests/test_tuner.py tests/test_attention_tuning.py \
  -k "huge or w_error or every_batch or recheck or stored or bucket or fraction_of_copy or grid_mode or gate_checks_every" \
  > "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests rc=$?"; tail -3 "$OUT/new_tests_gpu.txt"
timeout 240 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --problem attention_fwd:float16:1x8x1024x64 --problem attention_fwd:bfloat16:1x8x1000x64:causal \
  --trials 6 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -8 "$OUT/tune.txt"
timeout 120 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --trials 4 > "$OUT/tune2.txt" 2>&1
echo "re-tune rc=$?"; tail -4 "$OUT/tune2.txt"
