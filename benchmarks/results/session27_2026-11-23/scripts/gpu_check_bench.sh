#!/usr/bin/env bash
# One device call: every -m gpu test in 14 parallel shards, the twenty-fourth session's
# fuzz_api.py (random public-API cases, default configs), then `flashtune bench --quick --ops
# softmax` (a sanity check: this session changed the kernel loader, the dispatcher's winner
# table and host-side checks, no template). usage: gpu_check_bench.sh N_SOFT N_ATT SEED
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
mkdir -p "$OUT/t" "$OUT/bench"
OUT="$OUT/t" MARK=gpu timeout 400 python benchmarks/gpu_tests_parallel.py 14 TAG tests/ > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
tail -2 "$OUT/gpu_tests.txt"
timeout 200 python "$HERE/../../session24_2026-11-23/scripts/fuzz_api.py" "$1" "$2" "$3" > "$OUT/fuzz_stdout.txt" 2>&1
echo "fuzz rc=$?"
tail -4 "$OUT/fuzz_api.log"
timeout 150 python -m flashtune bench --quick --ops softmax --budget 130 --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"
tail -30 "$OUT/bench_stdout.txt"
cat "$OUT/device.txt"
