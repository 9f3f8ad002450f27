#!/usr/bin/env bash
# Session 41: the space's walk after the pinning rule became twelve small constraints and the
# walk stopped re-asking accepted ones (4.3 -> 3.5 s on the CPU machine); on the device's host:
# the walk alone, the walk's tests, the tuner's --total-time tests, session 40's phase timer
# (reused from its folder) and its two shell-timed --total-time runs.
set -uo pipefail
S40=benchmarks/results/session40_2026-11-24/scripts
python - <<'PY' 2>&1 | tee "$OUT/walk_time.txt"
import hashlib, time
t = time.perf_counter()
from flashtune.gen import softmax_space as s, attention_space as a
print(f"import spaces {time.perf_counter() - t:.2f} s")
for sp in (s.FORWARD_SPACE, s.BACKWARD_SPACE, a.SPACE):
    t = time.perf_counter(); v = sp._valid_values; dt = time.perf_counter() - t
    print(f"{sp.name}: {len(v)} configs, walk {dt:.2f} s, list hash "
          f"{hashlib.sha256(repr(v).encode()).hexdigest()[:16]}")
PY
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gen.py -k "walked or pruned or size" > "$OUT/walk_tests.txt" 2>&1
echo "walk tests rc=$?"; tail -1 "$OUT/walk_tests.txt"
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_tuner.py -k total_time > "$OUT/total_time_tests.txt" 2>&1
echo "total-time tests rc=$?"; tail -1 "$OUT/total_time_tests.txt"
timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/tuner_gpu.txt" 2>&1
echo "tuner -m gpu rc=$?"; tail -1 "$OUT/tuner_gpu.txt"
timeout 120 python "$S40/tune_phases.py" 20 softmax:bfloat16:1024x65536 > "$OUT/phases_20.txt" 2>&1
echo "phases (total 20) rc=$?"; grep -E "imports done|list candidates|trial|tuned|ran out" "$OUT/phases_20.txt" | head -8
run() {  # name, total, problems...
  local name=$1 total=$2; shift 2
  local start; start=$(date +%s.%N)
  timeout 200 python -m flashtune tune --db "sqlite:///$OUT/$name.sqlite" "$@" --total-time "$total" > "$OUT/$name.txt" 2>&1
  echo "$name rc=$? wall $(python -c "import time; print(round(time.time() - $start, 1))") s (--total-time $total)"
  tr '\r' '\n' < "$OUT/$name.txt" | grep -v '%|' | cut -c1-160 | tail -4
}
run two 40 --problem softmax:float16:4096x50257 --problem softmax:float32:16x1048576
run one 20 --problem softmax:bfloat16:1024x65536
