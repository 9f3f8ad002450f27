#!/usr/bin/env bash
# Session 38, call 3: the tuner's time budget now stops a batch partway (76cc449). The tuner's
# -m gpu tests, the new test on this machine, and a run of two problems under --total-time 40
# (its wall time next to the limit, winners stored).
set -uo pipefail
timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/tuner_gpu.txt" 2>&1
echo "tuner -m gpu rc=$?"; tail -1 "$OUT/tuner_gpu.txt"
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_tuner.py -k "cuts_a_batch or total_time" 2>&1 | tail -1
start=$(date +%s.%N)
timeout 200 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x50257 \
  --problem softmax:float32:16x1048576 --total-time 40 > "$OUT/tune.txt" 2>&1
echo "tune rc=$? wall $(python -c "import time; print(round(time.time() - $start, 1))") s (--total-time 40)"
tail -8 "$OUT/tune.txt"
