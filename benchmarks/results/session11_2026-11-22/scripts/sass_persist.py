import os, sys, subprocess, importlib.util, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from flashtune.gen import softmax_space as S
from flashtune.gen.render import render
TD = os.path.dirname(triton.__file__)

def compile_persistent(raw, dtype="fp16", out="/tmp/p"):
    op = S.OPS["softmax"]
    cfg = op.space.validate(raw)
    v = render(op.template(cfg), "softmax", cfg, op.render_context())
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, dir="/tmp"); f.write(v.source); f.close()
    spec = importlib.util.spec_from_file_location("k" + v.hash, f.name)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    fn = mod._softmax_split_persistent
    types = dict(x_ptr="*" + dtype, y_ptr="*" + dtype, slots="*i64", stale="*i64", tickets="*i32")
    consts = dict(BLOCK=cfg["block"], SPLITS=cfg["splits"], MAX_POLLS=65536)
    sig, cst, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name] = "constexpr"; cst[(i,)] = consts[name]
        else:
            sig[name] = types.get(name, "i32")
            if name in types or name in ("n_cols", "x_row_stride", "y_row_stride", "seg_len"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cst, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))
    open(out + ".cubin", "wb").write(k.asm["cubin"])
    open(out + ".ttgir", "w").write(k.asm["ttgir"])
    open(out + ".ptx", "w").write(k.asm["ptx"])
    res = subprocess.run([TD + "/backends/nvidia/bin/cuobjdump", "-res-usage", out + ".cubin"], capture_output=True, text=True).stdout
    sass = subprocess.run([TD + "/backends/nvidia/bin/cuobjdump", "-sass", out + ".cubin"], capture_output=True, text=True).stdout
    open(out + ".sass", "w").write(sass)
    return res.split("REG:")[1].split()[0], sass.count("BAR.SYNC"), sass.count("\n")

if __name__ == "__main__":
    base = dict(S.default_config("softmax", S.SoftmaxProblem(128, 262144, "float16")).as_dict())
    print(base)
    print(compile_persistent(base, out="/tmp/p_default"))
