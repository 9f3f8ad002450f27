#!/usr/bin/env bash
# Session 34, call 1: the driver fallback of scrub_l2 on the GPU (the parametrized -m gpu test and
# a probe with no reset / the runtime's / the driver's).
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py -k l2_hint > "$OUT/l2_test.txt" 2>&1
echo "l2 test rc=$?"; tail -2 "$OUT/l2_test.txt"
timeout 200 python benchmarks/results/session34_2026-11-24/scripts/l2_reset_paths.py 2>&1 | tee "$OUT/l2_reset_paths.txt"
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_tuner.py > "$OUT/tuner_cuda.txt" 2>&1
echo "test_tuner on CUDA rc=$?"; tail -1 "$OUT/tuner_cuda.txt"
cat "$OUT/device.txt"
