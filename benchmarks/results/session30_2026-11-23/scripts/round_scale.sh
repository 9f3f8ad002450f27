#!/usr/bin/env bash
# The attention scale multiply: FMA-folded (the product's templates) against PTX mul.rn (the
# rejected fix in mul_rn/, copied over this machine's copy of the tree), in one device
# session, each also on huge scores (huge_scores.py). Run (call 5) on c292822 with the fix
# applied to the tree itself, the product's templates copied in for "before"; rejected for
# its cost. The pytest line then ran the fix's own -m gpu test, dropped with the fix.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
T=flashtune/templates
mkdir -p /tmp/after && cp $T/_attention_common.py.jinja $T/attention_fwd.py.jinja $T/attention_fwd_persistent.py.jinja /tmp/after/
python "$HERE/attn_round_scale.py" before > "$OUT/round_before.log" 2>&1
python "$HERE/huge_scores.py" > "$OUT/huge_scores_before.txt" 2>&1
cp "$HERE"/mul_rn/*.jinja $T/
python "$HERE/attn_round_scale.py" after > "$OUT/round_after.log" 2>&1
python "$HERE/huge_scores.py" > "$OUT/huge_scores_after.txt" 2>&1
cp /tmp/after/*.jinja $T/
timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/test_attention_adversarial.py > "$OUT/adversarial_gpu.txt" 2>&1
echo "gpu adversarial rc=$?"; tail -2 "$OUT/adversarial_gpu.txt"
grep -v Warning "$OUT/huge_scores_before.txt" | grep -v "return _read" | sed 's/^/before: /'
grep -v Warning "$OUT/huge_scores_after.txt" | grep -v "return _read" | sed 's/^/after: /'
python - <<'PY'
import json, os
out = os.environ["OUT"]
b = json.load(open(f"{out}/round_before.json")); a = json.load(open(f"{out}/round_after.json"))
print("dtype shape causal: FMA us, mul.rn us, mul.rn/FMA")
for x, y in zip(b, a):
    print(f"{x['dtype'][6:]} {'x'.join(map(str, x['shape']))} {x['causal']}: {x['us']:.1f} {y['us']:.1f} {y['us']/x['us']:.3f}  err {x['err_vs_sdpa']:.1e}/{y['err_vs_sdpa']:.1e}")
PY
