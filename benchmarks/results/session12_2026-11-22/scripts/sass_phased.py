import os, sys, subprocess
sys.path.insert(0, os.path.dirname(__file__))
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import phased
TD = os.path.dirname(triton.__file__)
fn = phased.phased_kernel
for dtype, block, warps, stages in [("fp16", 4096, 8, 1), ("fp16", 4096, 8, 3), ("fp16", 8192, 8, 1), ("fp32", 4096, 8, 1), ("fp16", 2048, 4, 3)]:
    types = dict(x_ptr="*" + dtype, y_ptr="*" + dtype, slots="*i64", stale="*i64")
    consts = dict(BLOCK=block, PARTS=256, STAGES=stages, MAX_POLLS=65536)
    sig, cst, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name] = "constexpr"; cst[(i,)] = consts[name]
        else:
            sig[name] = types.get(name, "i32")
            if name in types or name in ("n_cols", "xs", "ys"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cst, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=warps, num_stages=3))
    out = f"/tmp/ph_{dtype}_{block}_{warps}_{stages}"
    open(out + ".cubin", "wb").write(k.asm["cubin"]); open(out + ".ttgir", "w").write(k.asm["ttgir"])
    res = subprocess.run([TD + "/backends/nvidia/bin/cuobjdump", "-res-usage", out + ".cubin"], capture_output=True, text=True).stdout
    sass = subprocess.run([TD + "/backends/nvidia/bin/cuobjdump", "-sass", out + ".cubin"], capture_output=True, text=True).stdout
    print(dtype, block, warps, stages, "REG", res.split("REG:")[1].split()[0], "SHARED", res.split("SHARED:")[1].split()[0],
          "LDGSTS", sass.count("LDGSTS"), "LDG", sass.count("LDG.E"), "BAR", sass.count("BAR.SYNC"))
