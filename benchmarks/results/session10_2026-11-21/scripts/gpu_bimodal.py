"""H200: is the persistent split's time bimodal across allocations of x and y?"""
import os, time
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "bimodal.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


bench = lambda fn: triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
for rows, cols in ((16, 1048576), (128, 262144)):
    for dtype in (torch.float16, torch.bfloat16):
        base = default_config("softmax", SoftmaxProblem(rows, cols, str(dtype)[6:]))
        mod = load_variant("softmax", base)
        two = load_variant("softmax", OPS["softmax"].space.validate(dict(base, fused=False, programs_per_sm=0)))
        say(f"== {rows}x{cols} {dtype}: {dict(base)}")
        keep = []
        for trial in range(10):
            pad = torch.empty(trial * (1 << 20) + 4096 * trial, dtype=torch.uint8, device="cuda")
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            pad2 = torch.empty((trial % 3) * (3 << 20), dtype=torch.uint8, device="cuda")
            y = torch.empty_like(x)
            keep.append((pad, pad2))
            ref = torch.softmax(x.float(), -1)
            mod.launch(x, y); torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max())
            tc = bench(lambda: y.copy_(x))
            t1 = [bench(lambda: mod.launch(x, y)) for _ in range(3)]
            t2 = bench(lambda: two.launch(x, y))
            # swap roles of the buffers: y as input
            y2 = torch.empty_like(x)
            t3 = bench(lambda: mod.launch(x, y2))
            say(f"  trial {trial}: x@{x.data_ptr() % (1 << 30):#x} y@{y.data_ptr() % (1 << 30):#x} copy {tc:5.1f}  "
                f"persistent {' '.join(f'{t:5.1f}' for t in t1)}  fresh y {t3:5.1f}  two-launch {t2:5.1f}  err {err:.0e}")
            del x, y, y2, ref
        del keep; torch.cuda.empty_cache()
