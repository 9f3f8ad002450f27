import os, sys
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import poll
DT = {"float16": torch.float16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median") * 1e3
print(torch.cuda.get_device_name())
for shape, dt, cfgs in [((16, 1048576), "float16", [(128, 8192, 8), (64, 16384, 16), (128, 8192, 16)]),
                        ((128, 262144), "float16", [(32, 8192, 8), (32, 8192, 16), (16, 16384, 16), (16, 16384, 32)]),
                        ((128, 262144), "float32", [(32, 8192, 8), (32, 8192, 16), (64, 4096, 8)])]:
    x = torch.randn(*shape, device="cuda", dtype=DT[dt]); y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    tc = bench(lambda: y.copy_(x))
    print(shape, dt, f"copy {tc:.1f}", flush=True)
    for s, b, w in cfgs:
        res = []
        for pps in (2, 4, 8):
            for pf in (False, True):
                y.zero_(); poll.launch(x, y, s, b, w, SMS * pps, prefetch=pf)
                err = float((y.double() - ref).abs().max())
                tp = bench(lambda: poll.launch(x, y, s, b, w, SMS * pps, prefetch=pf))
                res.append(f"p{pps}{'PF' if pf else ''} {tp:.1f}" + ("" if err < 1e-2 else " BAD"))
        print(f"   s{s} b{b} w{w}: " + "  ".join(res), flush=True)
