import sys, subprocess, triton
sys.path.insert(0, "/work/proto")
from smem_hold import hold_softmax, hold_softmax_v2
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.backends.compiler import GPUTarget
NSMEM, RREG, BR, BC, W, SYNC, K, MODE = map(int, sys.argv[1:9])
lay = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
desc = f"tensordesc<fp16[{BR},{BC}],{lay!r}>"
sig = {"x_desc": desc, "y_desc": desc, "x_ptr": "*fp16", "y_ptr": "*fp16", "stats_ptr": "*fp32", "count_ptr": "*i32",
       "target": "i32", "spin_limit": "i32", "CTAS_PER_ROW": "constexpr", "NSMEM": "constexpr", "RREG": "constexpr",
       "BR": "constexpr", "BC": "constexpr", "SYNC": "constexpr", "num_warps": "constexpr", **({"MODE": "constexpr"} if K == 2 else {})}
src = GluonASTSource(fn=hold_softmax_v2 if K == 2 else hold_softmax, signature=sig, constexprs={"CTAS_PER_ROW": 8, "NSMEM": NSMEM, "RREG": RREG, "BR": BR, "BC": BC, "SYNC": SYNC, "num_warps": W, **({"MODE": MODE} if K == 2 else {})},
                     attrs={(i,): [["tt.divisibility", 16]] for i in (2, 3, 4, 5)})
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": W})
open("/tmp/hold.ptx", "w").write(ck.asm["ptx"])
print("shared", ck.metadata.shared)
out = subprocess.run(["/work/venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/ptxas-blackwell", "-arch=sm_90a", "-v", "/tmp/hold.ptx", "-o", "/tmp/hold.o"], capture_output=True, text=True)
print(out.returncode, " | ".join(l.strip() for l in out.stderr.splitlines() if "spill" in l or "Used" in l or "rror" in l))
