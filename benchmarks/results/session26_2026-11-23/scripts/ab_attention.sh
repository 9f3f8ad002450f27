#!/usr/bin/env bash
# The attention template before (9106d34) and after the +inf-LSE change, alternating twice, in
# one device call. usage: ab_attention.sh (from the repository root, $OUT set)
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OLD=/tmp/ft_old && rm -rf "$OLD" && mkdir -p "$OLD" && cp -r flashtune "$OLD/"
cp "$HERE/_attention_common_9106d34.py.jinja" "$OLD/flashtune/templates/_attention_common.py.jinja"
for round in 1 2; do
  FLASHTUNE_CACHE_DIR=/tmp/ftc_new PYTHONPATH="$PWD:$PYTHONPATH" python "$HERE/ab_attention.py" new$round
  FLASHTUNE_CACHE_DIR=/tmp/ftc_old PYTHONPATH="$OLD:$PYTHONPATH" python "$HERE/ab_attention.py" old$round
done > "$OUT/ab_attention.txt" 2>&1
echo "ab rc=$?"
python - "$OUT/ab_attention.txt" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) > 6 and p[-5] == "ms":
        t[" ".join(p[1:-6])][p[0]] = float(p[-6])
print(f"{'case':36s} {'old ms':>8s} {'new ms':>8s} new/old")
for case, v in t.items():
    old = min(v.get("old1", 1e9), v.get("old2", 1e9)); new = min(v.get("new1", 1e9), v.get("new2", 1e9))
    print(f"{case:36s} {old:8.4f} {new:8.4f} {new / old:6.3f}")
PY
