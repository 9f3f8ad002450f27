"""Compile ring_ws for sm_90a on a machine without a GPU; ptxas's report.
argv: P BR BC S WW num_warps [MODE [SPLIT]]"""
import os
import subprocess
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ring_ws import ring_ws  # noqa: E402

P, BR, BC, S, WW, W = map(int, sys.argv[1:7])
MODE = int(sys.argv[7]) if len(sys.argv) > 7 else 0
SPLIT = int(sys.argv[8]) if len(sys.argv) > 8 else 1
lay = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
desc = f"tensordesc<fp16[{BR},{BC}],{lay!r}>"
sig = {"x_desc": desc, "y_desc": desc, "words_ptr": "*i64", "n_rows": "i32", "parity": "i32",
       "spin_limit": "i32", **{k: "constexpr" for k in ("P", "BR", "BC", "S", "WW", "num_warps", "MODE", "SPLIT")}}
src = GluonASTSource(fn=ring_ws, signature=sig,
                     constexprs={"P": P, "BR": BR, "BC": BC, "S": S, "WW": WW, "num_warps": W, "MODE": MODE, "SPLIT": SPLIT},
                     attrs={(2,): [["tt.divisibility", 16]]})
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": W})
open("/tmp/ring_ws.ptx", "w").write(ck.asm["ptx"])
print("shared", ck.metadata.shared)
bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
out = subprocess.run([os.path.join(bindir, "ptxas-blackwell"), "-arch=sm_90a", "-v", "/tmp/ring_ws.ptx",
                      "-o", "/tmp/ring_ws.o"], capture_output=True, text=True)
print(out.returncode, " | ".join(l.strip() for l in out.stderr.splitlines()
                                 if "spill" in l or "Used" in l or "rror" in l))
