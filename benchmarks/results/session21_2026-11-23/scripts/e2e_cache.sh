#!/usr/bin/env bash
# End to end on a GPU, after the cache fixes (runtime and export read winners through
# op_winner_from_row): tune three problems into a fresh database, show, export, import into
# another, serve the winners (FLASHTUNE_LOG names each decision), bench with that database, and
# the -m gpu tests of the cache, dispatch, ops and tuner files. Logs under $OUT.
set -uo pipefail
D=sqlite:////tmp/e2e.sqlite
rm -f /tmp/e2e.sqlite /tmp/e2e2.sqlite
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/device.txt"
python -m flashtune tune --problem softmax:float16:16x1048576 --problem softmax:bfloat16:4096x50257 \
    --problem attention_fwd:float16:2x16x4096x128 --trials 8 --db "$D" > "$OUT/tune.log" 2>&1
echo "tune rc=$?"; tail -6 "$OUT/tune.log"
python -m flashtune show --db "$D" 2>&1 | tee "$OUT/show.log"
python -m flashtune export "$OUT/winners.json" --db "$D" 2>&1
python -m flashtune import "$OUT/winners.json" --db sqlite:////tmp/e2e2.sqlite 2>&1
FLASHTUNE_DB="$D" FLASHTUNE_LOG=1 python - <<'PY' 2>&1 | tee "$OUT/serve.log"
import torch, flashtune
x = torch.randn(16, 1048576, device="cuda", dtype=torch.float16)
err = (flashtune.softmax(x, -1).double() - torch.softmax(x.double(), -1)).abs().max().item()
print("softmax 16x1048576 fp16 max err", err)
x = torch.randn(4096, 50257, device="cuda", dtype=torch.bfloat16)
err = (flashtune.softmax(x, -1).double() - torch.softmax(x.double(), -1)).abs().max().item()
print("softmax 4096x50257 bf16 max err", err)
q = torch.randn(2, 16, 4096, 128, device="cuda", dtype=torch.float16)
o = flashtune.attention(q, q, q)
ref = torch.nn.functional.scaled_dot_product_attention(q.double(), q.double(), q.double())
print("attention 2x16x4096x128 fp16 max err", (o.double() - ref).abs().max().item())
PY
FLASHTUNE_DB="$D" timeout 150 python -m flashtune bench --ops softmax --budget 120 --no-overhead \
    --out "$OUT/bench_tuned" > "$OUT/bench_tuned.log" 2>&1
echo "bench rc=$?"
mkdir -p "$OUT/gpu_tests"
OUT="$OUT/gpu_tests" MARK=gpu timeout 300 python benchmarks/gpu_tests_parallel.py 14 s21 \
    tests/test_cache.py tests/test_cache_adversarial.py tests/test_cache_failures.py \
    tests/test_dispatch.py tests/test_ops.py tests/test_ops_edge.py tests/test_tuner_gpu.py \
    tests/test_audit_cache_dispatch.py tests/test_fast_launch.py 2>&1 | tail -8
grep -E "^\| (16x1048576|4096x50257) " "$OUT/bench_tuned/flashtune_bench.md" | head -6
