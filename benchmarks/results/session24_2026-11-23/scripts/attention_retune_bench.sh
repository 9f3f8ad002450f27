#!/usr/bin/env bash
# After the attention template change (P_SHIFT) every stored attention winner is stale: tune
# the 30 benchmark attention problems afresh (6 trials each, into an empty database), then
# `flashtune bench --ops attention` against SDPA's backends and FlexAttention. Logs under $OUT.
set -uo pipefail
export FLASHTUNE_DB="sqlite:///$OUT/attention.sqlite"
python -m flashtune tune --ops attention_fwd --trials 6 --total-time 240 --quiet > "$OUT/tune.log" 2>&1
echo "tune rc=$?"
tail -2 "$OUT/tune.log"
python -m flashtune bench --ops attention --no-overhead --budget 280 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
tail -45 "$OUT/bench.log"
