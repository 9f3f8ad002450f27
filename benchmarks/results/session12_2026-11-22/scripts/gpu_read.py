"""Read-only streams on the H200: what load form reaches the read floor (bytes in flight)?
plain loads (one chunk per turn), unrolled (U independent chunks per turn), Triton-pipelined
(tl.range num_stages: cp.async), and TMA descriptor loads pipelined the same way."""
import os, sys, statistics, itertools
import torch, triton, triton.testing
import triton.language as tl
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "read.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
def _alloc(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")
triton.set_allocator(_alloc)

@triton.jit
def read_unroll(x_ptr, out_ptr, n, BLOCK: tl.constexpr, P: tl.constexpr, U: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    cols = tl.arange(0, BLOCK)
    for start in range(pid * BLOCK * U, n, P * BLOCK * U):
        if U == 1:
            acc += tl.load(x_ptr + start + cols).to(tl.float32)
        else:
            a = tl.load(x_ptr + start + cols)
            b = tl.load(x_ptr + start + BLOCK + cols)
            acc += a.to(tl.float32) + b.to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, 0))

@triton.jit
def read_stages(x_ptr, out_ptr, n, BLOCK: tl.constexpr, P: tl.constexpr, S: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    cols = tl.arange(0, BLOCK)
    for start in tl.range(pid * BLOCK, n, P * BLOCK, num_stages=S):
        acc += tl.load(x_ptr + start + cols).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, 0))

@triton.jit
def read_tma(x_ptr, out_ptr, n, BLOCK: tl.constexpr, P: tl.constexpr, S: tl.constexpr):
    pid = tl.program_id(0)
    R: tl.constexpr = BLOCK // 256
    desc = tl.make_tensor_descriptor(x_ptr, shape=[n // 256, 256], strides=[256, 1], block_shape=[R, 256])
    acc = tl.zeros([R, 256], tl.float32)
    for r in tl.range(pid * R, n // 256, P * R, num_stages=S):
        acc += desc.load([r, 0]).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(tl.sum(acc, 1), 0))

rows_out = []
for rows, cols, dt in [(16, 1048576, "float16"), (128, 262144, "float16"), (16, 1048576, "float32")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt))
    n = x.numel(); nbytes = n * x.element_size()
    out = torch.empty(8192, device="cuda")
    ref = x.float().sum().item()
    res = []
    def run(name, fn, P):
        try:
            fn(); torch.cuda.synchronize()
            got = out[:P].sum().item()
            if abs(got - ref) > 1e-2 * (abs(ref) + 1e3):
                say(f"  {name}: WRONG {got} vs {ref}"); return
            t = bench(fn); res.append((t, name))
        except Exception as e:
            say(f"  {name}: {type(e).__name__}: {str(e)[:100]}")
    for P, B, W in itertools.product((264, 528, 1056), (2048, 4096, 8192), (4, 8)):
        run(f"plain P{P} B{B} w{W}", lambda: read_unroll[(P,)](x, out, n, BLOCK=B, P=P, U=1, num_warps=W), P)
        run(f"unroll2 P{P} B{B} w{W}", lambda: read_unroll[(P,)](x, out, n, BLOCK=B, P=P, U=2, num_warps=W), P)
        for S in (3, 4):
            run(f"stages{S} P{P} B{B} w{W}", lambda: read_stages[(P,)](x, out, n, BLOCK=B, P=P, S=S, num_warps=W), P)
            run(f"tma{S} P{P} B{B} w{W}", lambda: read_tma[(P,)](x, out, n, BLOCK=B, P=P, S=S, num_warps=W), P)
    res.sort()
    say(f"== {rows}x{cols} {dt}: read-only {nbytes >> 20} MiB; best 15:")
    for t, name in res[:15]:
        say(f"  {name:24s} {t:6.1f} us  {nbytes / (t * 1e-6) / 1e9 / COPY:.0%} of the copy's rate")
    for kind in ("plain", "unroll2", "stages3", "stages4", "tma3", "tma4"):
        best = min((r for r in res if r[1].startswith(kind + " ")), default=None)
        if best: say(f"  best {kind:8s} {best[0]:6.1f} us ({best[1]})")
