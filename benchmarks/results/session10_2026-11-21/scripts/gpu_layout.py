"""H200: does the persistent split's time depend on where y lies relative to x?"""
import os
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "layout.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


bench = lambda fn: triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median") * 1e3
MiB = 1 << 20
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
pool = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
for rows, cols in ((16, 1048576), (128, 262144)):
    for dtype in (torch.bfloat16, torch.float16):
        mod = load_variant("softmax", default_config("softmax", SoftmaxProblem(rows, cols, str(dtype)[6:])))
        n = rows * cols * 2
        line = []
        for xo, d in ((0, 32), (0, 64), (0, 96), (0, 128), (0, 48), (0, 40), (0, 33), (64, -32), (64, -64), (8, 100), (2, 34), (0, 256)):
            xo_b = xo * MiB if d >= 0 else xo * MiB
            yo_b = xo_b + d * MiB
            x = pool[xo_b:xo_b + n].view(dtype).view(rows, cols)
            y = pool[yo_b:yo_b + n].view(dtype).view(rows, cols)
            x.copy_(torch.randn(rows, cols, device="cuda", dtype=dtype))
            ts = [bench(lambda: mod.launch(x, y)) for _ in range(2)]
            line.append(f"d{d:+d}: {min(ts):.1f}/{max(ts):.1f}")
        say(f"{rows}x{cols} {dtype}: " + "  ".join(line))
# The bench's way: flashtune.softmax allocating y each call, seeded randn, after other shapes.
import flashtune
g = torch.Generator(device="cuda").manual_seed(0)
for rows, cols in ((128, 262144), (16, 1048576)) * 2:
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(rows, cols, device="cuda", dtype=dtype, generator=g)
        flashtune.softmax(x, -1)
        ts = [bench(lambda: flashtune.softmax(x, -1)) for _ in range(3)]
        say(f"public op {rows}x{cols} {dtype}: " + " ".join(f"{t:.1f}" for t in ts))
        del x
