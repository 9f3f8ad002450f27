"""Register use of softmax variants compiled for sm_90 here (no GPU needed)."""
import sys, subprocess, itertools, os
os.environ.pop("TRITON_INTERPRET", None)
import triton
TRITON_DIR = os.path.dirname(triton.__file__)
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from flashtune.gen import softmax_space as S
from flashtune.gen.render import render
import importlib.util, tempfile

def compile_cfg(raw, dtype="fp16", div16=True):
    op = S.OPS["softmax"]
    cfg = op.space.complete(raw)
    v = render(op.template(cfg), "softmax", cfg, op.render_context())
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, dir="/tmp"); f.write(v.source); f.close()
    spec = importlib.util.spec_from_file_location("k" + v.hash, f.name)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    fn = getattr(mod, "_softmax_" + cfg["regime"])
    consts = dict(BLOCK=cfg["block"], RESIDENT=cfg["resident"], VEC=16 // (2 if dtype != "fp32" else 4), Y_ALIGNED=True)
    sig = {}; cst = {}
    for name in fn.arg_names:
        if name in consts:
            sig[name] = "constexpr"; cst[(fn.arg_names.index(name),)] = consts[name]
        elif name.endswith("_ptr"):
            sig[name] = "*" + dtype
        else:
            sig[name] = "i32"
    attrs = {}
    for name in fn.arg_names:
        if name.endswith("_ptr") or (name in ("n_cols", "x_row_stride", "y_row_stride") and div16):
            attrs[(fn.arg_names.index(name),)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cst, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))
    return k.n_regs if hasattr(k, "n_regs") else None, k

for raw in [dict(regime="online", block=8192, num_warps=16, lane_stats=True, l2_hint=True, num_stages=2),
            dict(regime="online", block=4096, num_warps=8, lane_stats=True, l2_hint=True, num_stages=2),
            dict(regime="online", block=4096, num_warps=16, lane_stats=True, l2_hint=True, num_stages=2),
            dict(regime="online", block=16384, num_warps=16, lane_stats=False, l2_hint=True, num_stages=2),
            dict(regime="online", block=8192, num_warps=8, lane_stats=False, l2_hint=True, num_stages=2),
            dict(regime="online", block=8192, num_warps=16, lane_stats=True, l2_hint=True, num_stages=2, align=True),
            dict(regime="online", block=8192, num_warps=8, lane_stats=False, l2_hint=True, num_stages=2, align=True),
            ]:
    out = []
    for pf in (False, True):
        k = compile_cfg(dict(raw, prefetch=pf), div16=not raw.get("align", False))[1]
        open("/tmp/r.cubin", "wb").write(k.asm["cubin"])
        res = subprocess.run([TRITON_DIR + "/backends/nvidia/bin/cuobjdump", "-res-usage", "/tmp/r.cubin"], capture_output=True, text=True).stdout
        out.append(res.split("REG:")[1].split()[0])
    print(raw, "regs no-pf / pf:", out)

if len(sys.argv) > 1:
    for st in (1, 2, 3):
        r, k = compile_cfg(dict(regime="online", block=8192, num_warps=16, lane_stats=True, l2_hint=True, num_stages=st))
        print(st, "async_copy" in k.asm["ttgir"], k.metadata.shared, __import__("hashlib").md5(k.asm["cubin"]).hexdigest())
