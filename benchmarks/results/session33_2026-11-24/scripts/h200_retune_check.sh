#!/usr/bin/env bash
# Session 33: on the H200, where session 32 saw re-timings 10-18% faster than trials on
# 65536x128, a tune with scrub_l2 in every timing: each trial next to its config's re-timing.
set -uo pipefail
timeout 200 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:65536x128 \
  --problem softmax:bfloat16:65536x128 --problem softmax:float16:16384x1024 --trials 6 --quiet > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -4 "$OUT/tune.txt"
python - "$OUT/tune.sqlite" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
keys = ("regime", "block", "rows_per_program", "num_warps", "exp2", "l2_hint", "max_pass")
short = lambda cfg: " ".join(f"{k}={v}" for k, v in json.loads(cfg).items() if k in keys)
winners = {(d, b): (cfg, med) for d, b, cfg, med in c.execute("select dtype, bucket, config, median_ms from ft_v1_winners")}
for (d, b), (wcfg, wmed) in winners.items():
    print(f"{d} {b}: winner re-timed {wmed*1e3:.2f} us  {short(wcfg)}")
    for cfg, med in c.execute("select config, median_ms from ft_v1_trials where status='ok' and dtype=? and bucket=? order by measured_at", (d, b)):
        mark = "  <- winner" if json.loads(cfg) == json.loads(wcfg) else ""
        print(f"   trial {med*1e3:7.2f} us  {short(cfg)}{mark}")
PY
