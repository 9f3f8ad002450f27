#!/usr/bin/env bash
# Session 33: the L2 scrub before every GPU timing. Scrub sizes, the new GPU test (with the scrub
# off too), the tuner's GPU tests, and a tune of 4096x1000 fp16 (trial against re-timing).
set -uo pipefail
S=benchmarks/results/session33_2026-11-24/scripts
timeout 120 python "$S/scrub_reset.py" 2>&1 | grep -v Warn | tee "$OUT/scrub_reset.txt"
timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/tuner_gpu_tests.txt" 2>&1
echo "tuner -m gpu rc=$?"; tail -2 "$OUT/tuner_gpu_tests.txt"
for i in 1 2; do
  timeout 120 python -m flashtune tune --db "sqlite:///$OUT/tune_$i.sqlite" --problem softmax:float16:4096x1000 \
    --problem softmax:bfloat16:65536x128 --trials 6 --quiet > "$OUT/tune_$i.txt" 2>&1
  echo "tune $i rc=$?"
  python - "$OUT/tune_$i.sqlite" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
keys = ("regime", "block", "rows_per_program", "num_warps", "exp2", "l2_hint", "max_pass")
short = lambda cfg: " ".join(f"{k}={v}" for k, v in json.loads(cfg).items() if k in keys)
for b, cfg, med in c.execute("select bucket, config, median_ms from ft_v1_trials where status='ok' order by measured_at"):
    print(f"  {b} trial   {med*1e3:7.2f} us  {short(cfg)}")
for b, cfg, med in c.execute("select bucket, config, median_ms from ft_v1_winners"):
    print(f"  {b} winner  {med*1e3:7.2f} us  {short(cfg)} (re-timed)")
PY
done
