#!/usr/bin/env bash
# Session 35, call 2: the softmax templates' 1 / d is div.rn now (was Triton's `/`, PTX
# div.full.f32). fp32 accuracy in ulps per regime (fp32_ulps.py), then every -m gpu softmax
# test in 14 shards, run with the tests' GPU fp32 slack at the project's 2 ulps (it was 4).
set -uo pipefail
D=benchmarks/results/session35_2026-11-24/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
grep -n "^GPU_FP32_SLACK_ULPS" tests/softmax_cases.py >> "$OUT/device.txt"
timeout 150 python $D/fp32_ulps.py 2>&1 | grep -v "leaked\|nanobind\|skipped rem\|See https" | tail -20
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 400 python benchmarks/gpu_tests_parallel.py 14 TAG tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"
tail -3 "$OUT/gpu_tests.txt"
grep -h "FAILED\|Error" "$OUT"/t/*.txt 2>/dev/null | head -20
