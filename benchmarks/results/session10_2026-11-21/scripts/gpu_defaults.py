"""Old (HEAD) vs new default configs on the softmax benchmark set, with torch.softmax."""
import os, sys, json, subprocess, itertools
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "defaults_old_vs_new.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


here = os.path.dirname(os.path.abspath(__file__))
old = json.loads(subprocess.run([sys.executable, os.path.join(here, "old_defaults.py")], capture_output=True, text=True,
                                env=dict(os.environ, PYTHONPATH=os.path.join(here, "old"))).stdout)
bench = lambda fn: triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median") * 1e3
DT = dict(float16=torch.float16, bfloat16=torch.bfloat16, float32=torch.float32)
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big)); COPY = 2 * big.numel() / (t * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
say("| shape | dtype | torch us | old default us (% copy) | new default us (% copy) | new/old | new config |")
say("|---|---|---|---|---|---|---|")
for key, old_raw in old.items():
    shape, dtype = key.split()
    rows, cols = map(int, shape.split("x"))
    new = default_config("softmax", SoftmaxProblem(rows, cols, dtype))
    x = torch.randn(rows, cols, device="cuda", dtype=DT[dtype]); y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    terr = float((torch.softmax(x, -1).double() - ref).abs().max())
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    mods = [load_variant("softmax", OPS["softmax"].space.complete(old_raw)), load_variant("softmax", new)]
    errs = []
    for m in mods:
        y.zero_(); m.launch(x, y); torch.cuda.synchronize(); errs.append(float((y.double() - ref).abs().max()))
    ts = [[], []]
    for _ in range(2):
        for i, m in enumerate(mods):
            ts[i].append(bench(lambda: m.launch(x, y)))
    tt = bench(lambda: torch.softmax(x, -1))
    to, tn = (sum(v) / 2 for v in ts)
    flag = "" if max(errs) <= 1.1 * terr + 1e-6 else f" ACCURACY {errs} vs torch {terr:.1e}"
    tag = "same" if dict(new.as_dict()) == dict(OPS['softmax'].space.complete(old_raw).as_dict()) else (
        f"{new['regime']} b{new['block']} w{new['num_warps']}" + (" vec" if new["vector_stats"] else ""))
    say(f"| {shape} | {dtype} | {tt:.1f} | {to:.1f} ({frac(to):.0%}) | {tn:.1f} ({frac(tn):.0%}) | {tn / to:.3f} | {tag}{flag} |")
    del x, y, ref; torch.cuda.empty_cache()
