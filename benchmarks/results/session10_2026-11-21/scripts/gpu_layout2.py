"""H200: 16x1048576 persistent split at placements of x and y; 4 vs 2 programs per SM."""
import os
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "layout2.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


bench = lambda fn: triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median") * 1e3
MiB = 1 << 20
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
pool = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
PLACES = ((0, 32), (0, 64), (0, 96), (0, 128), (0, 48), (0, 40), (0, 33), (64, -32), (64, -64), (8, 100), (2, 34), (0, 256))
for rows, cols in ((16, 1048576),):
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        base = default_config("softmax", SoftmaxProblem(rows, cols, str(dtype)[6:]))
        variants = {"default": base}
        ppsm = base["programs_per_sm"]
        if ppsm == 4:
            variants["p2"] = OPS["softmax"].space.validate(dict(base.as_dict(), programs_per_sm=2))
        variants["p4 s32" if ppsm == 4 else "p2 s32"] = OPS["softmax"].space.validate(dict(base.as_dict(), splits=32))
        variants["two-launch s64"] = OPS["softmax"].space.validate(dict(base.as_dict(), fused=False, programs_per_sm=0))
        mods = {k: load_variant("softmax", v) for k, v in variants.items()}
        n = rows * cols * dtype.itemsize
        res = {k: [] for k in mods}
        for xo, d in PLACES:
            xo_b = xo * MiB; yo_b = xo_b + d * MiB
            x = pool[xo_b:xo_b + n].view(dtype).view(rows, cols)
            y = pool[yo_b:yo_b + n].view(dtype).view(rows, cols)
            x.copy_(torch.randn(rows, cols, device="cuda", dtype=dtype))
            for k, m in mods.items():
                res[k] += [bench(lambda: m.launch(x, y)) for _ in range(2)]
        for k, ts in res.items():
            ts_s = sorted(ts)
            say(f"{rows}x{cols} {str(dtype)[6:]} {k:16s}: median {ts_s[len(ts) // 2]:.1f}  min {ts_s[0]:.1f}  max {ts_s[-1]:.1f}  "
                f"slow(>1.15 min) {sum(t > 1.15 * ts_s[0] for t in ts)}/{len(ts)}  mean {sum(ts) / len(ts):.1f}")
