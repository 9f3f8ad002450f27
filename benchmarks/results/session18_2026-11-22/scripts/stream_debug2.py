"""Where the stream prototype's wrong outputs are (one config, 16x1048576 fp32)."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import stream_proto as sp  # noqa: E402

dev = torch.device("cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count
R, C = 16, 1 << 20
pps, warps, G, depth = 2, 8, 2, 1
ws = sp.Workspace(dev)
torch.manual_seed(0)
x = torch.randn(R, C, device=dev, dtype=torch.float32)
y = torch.full_like(x, float("nan"))
S = sms * pps // G
block = triton.next_power_of_2(triton.cdiv(triton.cdiv(C, S), 16) * 16)
seg = triton.cdiv(triton.cdiv(C, S), 16) * 16
sp.stream_softmax(x, y, ws, pps, warps, G, depth, block, sms)
torch.cuda.synchronize()
ref = torch.softmax(x.double(), -1)
for r in (2, 3, 5):
    err = (y.double() - ref).abs()[r]
    bad = (err > 1e-9).nonzero().flatten().cpu()
    print(f"row {r}: {bad.numel()} bad of {C}; first cols {bad[:12].tolist()}")
    segs = torch.unique(bad // seg)
    print(f"  segments with bad: {segs.numel()} of {S}: {segs[:20].tolist()}")
    lanes = torch.unique(bad % seg)
    print(f"  lanes with bad: {lanes.numel()}: {lanes[:20].tolist()}")
    c = bad[:4].tolist()
    print("  y", y[r, c].tolist(), "ref", ref[r, c].tolist())
    for rr in range(R):
        alt = torch.softmax(x[rr].double(), -1)
        if torch.allclose(y[r, c].double(), alt[c], rtol=1e-4, atol=0):
            print("  bad values match the softmax of row", rr)
    # y from the right row's data but another row's total?
    for rr in range(R):
        m_rr = x[rr].double().max()
        d_rr = torch.exp(x[rr].double() - m_rr).sum()
        alt = torch.exp(x[r, c].double() - m_rr) / d_rr
        if torch.allclose(y[r, c].double(), alt, rtol=1e-4, atol=0):
            print("  bad values = row's data with the total of row", rr)
