"""Registers and programs that fit per SM: the product's paired kernel (through launch())
against the prototype's, same configs; and their times on 128 x 262144 fp16 / fp32."""
import os
import sys

import torch
import triton
import triton.testing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fused_proto as fp  # noqa: E402
from flashtune.gen import load_variant, row_sync  # noqa: E402
from flashtune.gen.softmax_space import OPS  # noqa: E402

fp.WS = fp.Workspace(1 << 16)
SEEN = []
_note = row_sync.note_resident


def note(kernel, x, compiled):
    SEEN.append((compiled.n_regs, compiled.metadata.shared))
    _note(kernel, x, compiled)


row_sync.note_resident = note
for dt, block, warps, pps in ((torch.float16, 8192, 4, 4), (torch.float32, 4096, 4, 8),
                              (torch.float16, 4096, 4, 8)):
    x = torch.randn(128, 262144, device="cuda", dtype=dt)
    y = torch.empty_like(x)
    cfg = OPS["softmax"].space.complete(dict(
        regime="split", block=block, splits=262144 // block, num_warps=warps, num_stages=1,
        fused=True, programs_per_sm=pps, l2_hint=True, paired_loads=True))
    mod = load_variant("softmax", cfg)
    row_sync._RESIDENT.clear()
    mod.launch(x, y)
    torch.cuda.synchronize()
    fit = dict(row_sync._RESIDENT)
    fp.launch(x, y, block, warps, pps, 1, 1)
    torch.cuda.synchronize()
    proto_regs = fp.REGS
    t_prod = triton.testing.do_bench(lambda: mod.launch(x, y), return_mode="median") * 1e3
    t_proto = triton.testing.do_bench(lambda: fp.launch(x, y, block, warps, pps, 1, 1),
                                      return_mode="median") * 1e3
    print(f"{dt} b{block} w{warps} p{pps}: product (regs, shared) {SEEN[0]} fit {list(fit.values())} {t_prod:.1f} us; "
          f"prototype regs {proto_regs} {t_proto:.1f} us", flush=True)
    fp.REGS.clear()
    SEEN.clear()
