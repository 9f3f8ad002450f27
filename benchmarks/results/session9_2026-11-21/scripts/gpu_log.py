"""log_softmax defaults: time and error (incl. fp32 logits around 1e6), old vs new templates."""
import sys
import torch, triton, triton.testing
import flashtune
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

TAG = sys.argv[1]
DT = {"float16": torch.float16, "float32": torch.float32}
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median") * 1e3
print(TAG, flashtune.__file__, flush=True)
for shape in ((4096, 50257), (128, 262144), (16384, 1024), (16, 1048576)):
    for dt in DT:
        torch.manual_seed(0)
        for offset in ((0.0, 1e6) if dt == "float32" else (0.0,)):
            x = torch.randn(*shape, device="cuda", dtype=DT[dt]) * 4 + offset; y = torch.empty_like(x)
            cfg = default_config("log_softmax", SoftmaxProblem(*shape, dt))
            mod = load_variant("log_softmax", cfg)
            mod.launch(x, y); torch.cuda.synchronize()
            ref = torch.log_softmax(x.double(), -1)
            err = float((y.double() - ref).abs().max())
            terr = float((torch.log_softmax(x, -1).double() - ref).abs().max())
            tt = bench(lambda: mod.launch(x, y))
            print(f"{TAG} {shape} {dt} offset {offset:g}: {tt:7.1f} us err {err:.1e} (torch {terr:.1e}) [{cfg['regime']}]", flush=True)
            del x, y, ref
