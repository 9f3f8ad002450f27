import sys
sys.path.insert(0, "scratch")
from sass_persist import compile_persistent
from flashtune.gen import softmax_space as S
import subprocess
base = dict(S.default_config("softmax", S.SoftmaxProblem(128, 262144, "float16")).as_dict())
for dt in ("fp16", "fp32"):
  for block, w in ((4096, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16), (16384, 32)):
    raw = dict(base, block=block, num_warps=w, hold=True, splits=64 if block == 4096 else 32)
    r = compile_persistent(raw, dtype=dt, out=f"/tmp/h_{dt}_{block}_{w}")
    print(dt, block, w, "regs, bars, lines", r, flush=True)
