"""Compile ring_groups / ring_groups_ws for sm_90a on a machine without a GPU; report ptxas's
registers and spills. argv: ws|one P G BR BC S L CR MODE num_warps"""
import os
import subprocess
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ring_groups import ring_groups, ring_groups_ws  # noqa: E402

kind = sys.argv[1]
P, G, BR, BC, S, L, CR, MODE, W = map(int, sys.argv[2:11])
lay = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
desc = f"tensordesc<fp16[{BR},{BC}],{lay!r}>"
sig = {"x_desc": desc, "y_desc": desc, "words_ptr": "*i64",
       "n_rows": "i32", "parity": "i32", "spin_limit": "i32"}
consts = {"P": P, "G": G, "BR": BR, "BC": BC, "S": S, "CR": CR, "MODE": MODE, "num_warps": W}
fn = ring_groups_ws
if kind == "one":
    consts["L"] = L
    fn = ring_groups
sig.update({k: "constexpr" for k in consts})
src = GluonASTSource(fn=fn, signature=sig, constexprs=consts,
                     attrs={(2,): [["tt.divisibility", 16]]})
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": W})
open("/tmp/ringg.ptx", "w").write(ck.asm["ptx"])
print("shared", ck.metadata.shared)
bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
ptxas = os.path.join(bindir, "ptxas-blackwell")
out = subprocess.run([ptxas, "-arch=sm_90a", "-v", "/tmp/ringg.ptx", "-o", "/tmp/ringg.o"],
                     capture_output=True, text=True)
print(out.returncode, " | ".join(l.strip() for l in out.stderr.splitlines()
                                 if "spill" in l or "Used" in l or "rror" in l))
