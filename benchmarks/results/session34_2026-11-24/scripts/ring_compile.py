"""Compile ring_softmax for sm_90a on a machine without a GPU and report ptxas's registers and
spills. argv: P BR BC S L MODE num_warps SWIZZLE TMA_STORE"""
import os
import subprocess
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ring_softmax import ring_softmax  # noqa: E402

P, BR, BC, S, L, MODE, W, SWZ, TS = map(int, sys.argv[1:10])
lay = gl.NVMMASharedLayout(swizzle_byte_width=SWZ, element_bitwidth=16, rank=2)
desc = f"tensordesc<fp16[{BR},{BC}],{lay!r}>"
sig = {"x_desc": desc, "y_desc": desc, "y_ptr": "*fp16", "words_ptr": "*i64",
       "n_rows": "i32", "parity": "i32", "spin_limit": "i32",
       **{k: "constexpr" for k in ("P", "BR", "BC", "S", "L", "MODE", "TMA_STORE", "num_warps")}}
src = GluonASTSource(fn=ring_softmax, signature=sig,
                     constexprs={"P": P, "BR": BR, "BC": BC, "S": S, "L": L, "MODE": MODE, "TMA_STORE": TS, "num_warps": W},
                     attrs={(i,): [["tt.divisibility", 16]] for i in (2, 3)})
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": W})
open("/tmp/ring.ptx", "w").write(ck.asm["ptx"])
print("shared", ck.metadata.shared)
bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
ptxas = os.path.join(bindir, "ptxas-blackwell")  # the plain ptxas here rejects this PTX
out = subprocess.run([ptxas, "-arch=sm_90a", "-v", "/tmp/ring.ptx", "-o", "/tmp/ring.o"],
                     capture_output=True, text=True)
print(out.returncode, " | ".join(l.strip() for l in out.stderr.splitlines()
                                 if "spill" in l or "Used" in l or "rror" in l))
