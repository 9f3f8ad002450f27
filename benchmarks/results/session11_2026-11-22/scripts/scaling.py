"""Fixed vs proportional cost of the long-row kernels: rows x 1048576 for rows 4..64 (fp16),
default config (persistent split), copy; and the two-launch split."""
import os, sys, statistics
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "scaling.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
for cols in (1048576, 262144):
    for dtype in ("float16",):
        rows_set = (4, 8, 16, 32, 64) if cols == 1048576 else (32, 64, 128, 256)
        for rows in rows_set:
            x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype)); y = torch.empty_like(x)
            base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dtype)))
            two = dict(base, fused=False, programs_per_sm=0)
            res = {"copy": [], "default": [], "two-launch": [], "noflush-default": [], "noflush-copy": []}
            mods = {k: load_variant("softmax", OPS["softmax"].space.validate(v)) for k, v in (("default", base), ("two-launch", two))}
            for m in mods.values():
                m.launch(x, y)
            torch.cuda.synchronize()
            for r in range(3):
                res["copy"].append(bench(lambda: y.copy_(x)))
                for k, m in mods.items():
                    res[k].append(bench(lambda: m.launch(x, y)))
            # no L2 flush: CUDA events over 50 back-to-back launches
            for k, fn in (("noflush-default", lambda: mods["default"].launch(x, y)), ("noflush-copy", lambda: y.copy_(x))):
                for _ in range(5): fn()
                s, e = torch.cuda.Event(True), torch.cuda.Event(True)
                s.record()
                for _ in range(50): fn()
                e.record(); torch.cuda.synchronize()
                res[k].append(s.elapsed_time(e) * 1e3 / 50)
            mib = 2 * x.numel() * x.element_size() / 2**20
            say(f"{rows}x{cols} {dtype} ({mib:.0f} MiB moved) cfg p{base['programs_per_sm']} b{base['block']} s{base['splits']}: " +
                "  ".join(f"{k} {statistics.median(v):.1f}" for k, v in res.items()))
            del x, y; torch.cuda.empty_cache()
