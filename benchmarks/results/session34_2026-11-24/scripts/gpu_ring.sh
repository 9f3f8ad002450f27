#!/usr/bin/env bash
# Session 34: the row-pipelined read-once prototype (ring_bench.py) on 16 x 1048576 16-bit.
set -uo pipefail
D=benchmarks/results/session34_2026-11-24/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
CONFIGS="$1" timeout 500 python $D/ring_bench.py 2>&1 | grep -v "leaked\|nanobind\|skipped rem\|See https"
