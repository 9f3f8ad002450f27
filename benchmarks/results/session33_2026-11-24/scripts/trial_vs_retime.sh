#!/usr/bin/env bash
# Session 33: trial against re-timing. The probe, then two small tunes of one problem (with the
# precompile pool, and without it), each DB's trials and winner printed.
set -uo pipefail
S=benchmarks/results/session33_2026-11-24/scripts
timeout 240 python "$S/trial_vs_retime.py" 2>&1 | grep -v Warning | tee "$OUT/trial_vs_retime.txt"
for pw in default 0; do
  extra=(); [ "$pw" = 0 ] && extra=(--precompile-workers 0)
  timeout 120 python -m flashtune tune --db "sqlite:///$OUT/tune_$pw.sqlite" --problem softmax:float16:4096x1000 \
    --trials 6 "${extra[@]}" --quiet > "$OUT/tune_$pw.txt" 2>&1
  echo "tune precompile=$pw rc=$?"
  python - "$OUT/tune_$pw.sqlite" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
short = lambda cfg: " ".join(f"{k}={v}" for k, v in json.loads(cfg).items() if k in ("regime", "block", "rows_per_program", "num_warps", "exp2"))
for cfg, med in c.execute("select config, median_ms from ft_v1_trials where status='ok' order by measured_at"):
    print(f"  trial   {med*1e3:7.2f} us  {short(cfg)}")
for cfg, med in c.execute("select config, median_ms from ft_v1_winners"):
    print(f"  winner  {med*1e3:7.2f} us  {short(cfg)} (re-timed)")
PY
done
