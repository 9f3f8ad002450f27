import os, sys, subprocess, importlib.util, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from flashtune.gen import softmax_space as S
from flashtune.gen.render import render
TD = os.path.dirname(triton.__file__)

def compile_online(raw, dtype, maxnreg=None, out="/tmp/o"):
    op = S.OPS["softmax"]
    cfg = op.space.validate(raw)
    v = render(op.template(cfg), "softmax", cfg, op.render_context())
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, dir="/tmp"); f.write(v.source); f.close()
    spec = importlib.util.spec_from_file_location("k" + v.hash, f.name)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    fn = [getattr(mod, n) for n in dir(mod) if n.startswith("_softmax") and hasattr(getattr(mod, n), "arg_names")][0]
    types = dict(x_ptr="*" + dtype, y_ptr="*" + dtype)
    consts = dict(BLOCK=cfg["block"], RESIDENT=cfg["resident"], VEC=16 // (4 if dtype == "fp32" else 2), Y_ALIGNED=True)
    sig, cst, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name] = "constexpr"; cst[(i,)] = consts[name]
        else:
            sig[name] = types.get(name, "i32")
            if name in types:
                attrs[(i,)] = [["tt.divisibility", 16]]
    opts = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if maxnreg: opts["maxnreg"] = maxnreg
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cst, attrs=attrs), target=GPUTarget("cuda", 90, 32), options=opts)
    open(out + ".cubin", "wb").write(k.asm["cubin"])
    res = subprocess.run([TD + "/backends/nvidia/bin/cuobjdump", "-res-usage", out + ".cubin"], capture_output=True, text=True).stdout
    line = [l for l in res.splitlines() if "REG:" in l][0]
    return line.strip(), k.n_spills if hasattr(k, "n_spills") else None

for dt, name in (("fp16", "float16"), ("bf16", "bfloat16"), ("fp32", "float32")):
    base = S.default_config("softmax", S.SoftmaxProblem(4096, 50257, name)).as_dict()
    for nreg in (None, 32, 40, 48):
        print(dt, {k: base[k] for k in ("block", "num_warps", "num_stages", "vector_stats", "lane_stats", "align")}, nreg, compile_online(base, dt, nreg), flush=True)
