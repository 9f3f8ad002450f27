#!/usr/bin/env bash
# Tune a few problems (8 trials each) into an empty database, show the winners, then run
# fuzz_api.py with NEAR=1: random shapes near the tuned ones, served by tuned winners (exact
# or nearest bucket) through the public API. Logs under $OUT.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export FLASHTUNE_DB="sqlite:///$OUT/tuned.sqlite"
python -m flashtune tune --trials 8 --quiet \
    --problem softmax:float16:65536x128 --problem softmax:bfloat16:16384x1024 \
    --problem log_softmax:float32:8192x4096 --problem softmax:float16:4096x16384 \
    --problem softmax:bfloat16:128x262144 --problem softmax:float16:16x1048576 \
    --problem softmax:bfloat16:4096x50257 --problem softmax_backward:float16:4096x16384 \
    --problem log_softmax_backward:bfloat16:65536x128 \
    --problem attention_fwd:float16:2x16x4096x128:causal --problem attention_fwd:bfloat16:8x32x1024x64 \
    --problem attention_fwd:float16:4x32x1000x128:causal > "$OUT/tune.log" 2>&1
echo "tune rc=$?"
python -m flashtune show > "$OUT/show.log" 2>&1
NEAR=1 python "$HERE/fuzz_api.py" "$1" "$2" "$3" > "$OUT/fuzz_stdout.txt" 2>&1
echo "fuzz rc=$?"
tail -3 "$OUT/tune.log"
tail -12 "$OUT/fuzz_api.log"
