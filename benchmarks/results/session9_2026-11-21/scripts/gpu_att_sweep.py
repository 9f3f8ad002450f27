"""Attention configs at the shapes with the thinnest FlexAttention margins, next to Flex and cuDNN."""
import math, os, itertools
import torch, triton, triton.testing
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from flashtune.gen import load_variant, validate_config
from flashtune.bench.peers import make_flex

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "att_sweep.log"), "w")


def say(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e-3
flex = make_flex()
T128 = [(128, 128, 8, 3), (128, 128, 8, 2), (128, 128, 8, 4), (128, 64, 8, 3), (128, 64, 8, 4),
        (256, 64, 16, 3), (256, 64, 16, 4), (256, 64, 16, 5), (256, 128, 16, 2), (256, 128, 16, 3),
        (64, 128, 4, 3), (64, 64, 4, 4)]
T64 = [(128, 64, 4, 3), (128, 128, 4, 3), (128, 128, 8, 3), (128, 64, 4, 4), (256, 64, 8, 3),
       (256, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 3)]
CASES = [(8, 16, 4096, 128, torch.float16), (8, 16, 4096, 128, torch.bfloat16),
         (32, 16, 1024, 128, torch.float16), (8, 32, 4096, 64, torch.float16)]
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
for B, H, N, D, dt in CASES:
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt) for _ in range(3))
    flops = 4 * B * H * N * N * D
    tf = lambda t: flops / t / 1e12
    fx = flex(q, k, v, False)
    fx(); torch.cuda.synchronize()
    t_flex = bench(fx)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        t_cudnn = bench(lambda: F.scaled_dot_product_attention(q, k, v))
    ref = F.scaled_dot_product_attention(q, k, v)
    say(f"B{B} H{H} N{N} D{D} {str(dt)[6:]}: flex {tf(t_flex):.0f} cudnn {tf(t_cudnn):.0f}")
    rows = []
    for (bm, bn, w, st), pers in itertools.product(T128 if D == 128 else T64, (False, True)):
        name = f"{bm}x{bn} w{w} s{st} {'P' if pers else '-'}"
        try:
            cfg = validate_config("attention_fwd", dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=st,
                                                      exp2=True, pv_acc="fp32", persistent=pers, tma=False,
                                                      warp_specialize=False))
            mod = load_variant("attention_fwd", cfg)
            o = torch.empty_like(q)
            call = lambda: mod.launch(q, k, v, o, None, 1 / math.sqrt(D), False)
            call(); torch.cuda.synchronize()
            diff = float((o.float() - ref.float()).abs().max())
            t = bench(call)
            rows.append((t, f"{name}: {tf(t):.0f} TF  x flex {t_flex / t:.3f}  x cudnn {t_cudnn / t:.2f}  diff {diff:.1e}"))
        except Exception as e:
            say(f"  {name}: FAILED {type(e).__name__} {str(e)[:120]}")
    for t, line in sorted(rows)[:8]:
        say("  " + line)
    say(f"  flex again {tf(bench(fx)):.0f}")
    del q, k, v, ref
    torch.cuda.empty_cache()
