#!/usr/bin/env bash
# Session 32, after the tuner's change (a challenger judged by the slower of its trial and its
# re-timing): tune the two small-row shapes in three dtypes again on the H200, print the stored
# winners against the heuristic defaults, then bench those winners (flashtune bench's softmax
# rows for these shapes come from the same database).
set -uo pipefail
P=""
for dt in float16 bfloat16 float32; do for s in 65536x128 16384x1024; do P="$P --problem softmax:$dt:$s"; done; done
timeout 200 python -m flashtune tune --db "sqlite:///$OUT/tuned.sqlite" $P --trials 6 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"
python - "$OUT/tuned.sqlite" <<'PY'
import json, sqlite3, sys
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
con = sqlite3.connect(sys.argv[1])
for cfg, ms, dt, bucket in con.execute("select config, median_ms, dtype, bucket from ft_v1_winners"):
    b = json.loads(bucket); c = json.loads(cfg)
    d = dict(default_config("softmax", SoftmaxProblem(b["rows_bucket"], b["cols_bucket"], dt), 132))
    pick = lambda x: {k: x[k] for k in ("regime", "block", "rows_per_program", "num_warps")}
    print(dt, b["rows_bucket"], b["cols_bucket"], f"{ms*1e3:.2f} us", "DEFAULT" if c == d else f"{pick(c)} (default {pick(d)})")
PY
