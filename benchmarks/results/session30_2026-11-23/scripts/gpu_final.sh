#!/usr/bin/env bash
# The session's GPU check of the final tree: session 27's gpu_final.sh (every -m gpu test in
# 14 shards, whose variant matrix now renders the new static asserts on Triton 3.6, and a
# quick softmax and attention bench), then this session's new tests on CUDA tensors, the
# pv_acc fp16 cost check, and `flashtune tune` of small problems (the LSE re-check of
# attention finalists on a GPU). Two device calls (each is limited to 10 minutes):
#   gpu_final.sh matrix    session 27's script
#   gpu_final.sh new       the rest
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = matrix ]; then
  bash benchmarks/results/session27_2026-11-23/scripts/gpu_final.sh
  exit 0
fi
timeout 240 python -m pytest -q -p no:cacheprovider tests/test_template_asserts.py \
  tests/test_attention_adversarial.py tests/test_attention_tuning.py tests/test_gen.py \
  tests/test_audit_environment.py tests/test_ops.py tests/test_softmax_numerics.py \
  -k "assert or pv_accumulator or own_kv_head or lse or family_hash or helper_module or triton_interpret or negative_bit or warnings_as_errors" \
  > "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests rc=$?"; tail -3 "$OUT/new_tests_gpu.txt"
mkdir -p "$OUT/pv"
OUT="$OUT/pv" timeout 150 bash "$HERE/pv_scale.sh" > "$OUT/pv/pv_table.txt" 2>&1
echo "pv rc=$?"; cat "$OUT/pv/pv_table.txt"
timeout 200 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --problem attention_fwd:float16:1x8x1024x64 --problem attention_fwd:bfloat16:1x8x1000x64:causal \
  --trials 6 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -8 "$OUT/tune.txt"
