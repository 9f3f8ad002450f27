"""Floors for a two-pass softmax of 16x1048576 and 128x262144: read-only and write-only
streams of the same bytes (torch's reduction and fill kernels, and a Triton read-reduce
kernel), next to the copy and our default."""
import os, sys, statistics
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton, triton.testing
import triton.language as tl
import flashtune
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "floor.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name())
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2

@triton.jit
def read_reduce(x_ptr, out_ptr, n, BLOCK: tl.constexpr, P: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid * BLOCK, n, P * BLOCK):
        acc += tl.load(x_ptr + start + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, 0))

@triton.jit
def write_only(y_ptr, n, BLOCK: tl.constexpr, P: tl.constexpr):
    pid = tl.program_id(0)
    for start in range(pid * BLOCK, n, P * BLOCK):
        tl.store(y_ptr + start + tl.arange(0, BLOCK), tl.full([BLOCK], 1.0, y_ptr.dtype.element_ty))

for rows, cols, dt in [(16, 1048576, "float16"), (128, 262144, "float16"), (16, 1048576, "float32")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    one = lambda us: f"{us:6.1f} us ({nbytes / (us * 1e-6) / 1e9 / COPY:.0%} of copy rate, one pass)"
    two = lambda us: f"{us:6.1f} us ({2 * nbytes / (us * 1e-6) / 1e9 / COPY:.0%})"
    out = torch.empty(4096, device="cuda")
    say(f"== {rows}x{cols} {dt} ({nbytes >> 20} MiB)")
    say("  copy                 ", two(bench(lambda: y.copy_(x))))
    say("  flashtune.softmax    ", two(bench(lambda: flashtune.softmax(x))))
    say("  torch x.sum(-1)      ", one(bench(lambda: x.sum(-1))))
    say("  torch x.amax(-1)     ", one(bench(lambda: x.amax(-1))))
    say("  torch y.fill_(1)     ", one(bench(lambda: y.fill_(1.0))))
    for P in (264, 528, 1056):
        for B in (2048, 8192):
            n = x.numel()
            say(f"  triton read P{P} B{B} ", one(bench(lambda: read_reduce[(P,)](x, out, n, BLOCK=B, P=P, num_warps=8))),
                f" | write ", one(bench(lambda: write_only[(P,)](y, n, BLOCK=B, P=P, num_warps=8))))
