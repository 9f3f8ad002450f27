"""Debug one stream config on the GPU: per-row totals against float64, outputs per row."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
import stream_proto as sp  # noqa: E402

dev = torch.device("cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count
R, C = 16, 1 << 20
for dt in (torch.float32, torch.float16):
    for pps, warps, G, depth in [(2, 8, 2, 1), (4, 4, 2, 1), (2, 4, 1, 2)]:
        ws = sp.Workspace(dev)
        torch.manual_seed(0)
        x = torch.randn(R, C, device=dev, dtype=dt)
        y = torch.full_like(x, float("nan"))
        S = sms * pps // G
        block = triton.next_power_of_2(triton.cdiv(triton.cdiv(C, S), 16) * 16)
        sp.stream_softmax(x, y, ws, pps, warps, G, depth, block, sms)
        torch.cuda.synchronize()
        h = 1 - ws.half
        w = ws.tot[h][:R].cpu()
        m = ((w >> 32) & 0xFFFFFFFF).to(torch.int32).view(torch.float32)
        d = (w & 0xFFFFFFFF).to(torch.int32).view(torch.float32)
        xd = x.double()
        mr = xd.max(-1).values.cpu()
        dr = torch.exp(xd - xd.max(-1, keepdim=True).values).sum(-1).cpu()
        ref = torch.softmax(xd, -1)
        err_rows = (y.double() - ref).abs().amax(-1).cpu()
        nan_rows = torch.isnan(y).sum(-1).cpu()
        print(f"{dt} pps={pps} w={warps} G={G} D={depth} S={S} block={block} cnt={ws.cnt[h][:R].tolist()}")
        print("  m rel err", ((m.double() - mr).abs()).max().item(), " d rel err",
              ((d.double() - dr).abs() / dr).max().item())
        print("  row err", [f"{e:.1e}" for e in err_rows.tolist()])
        print("  nan per row", nan_rows.tolist())
        ratio = (y.double() / ref)
        print("  y/ref per row median", [f"{v:.3f}" for v in ratio.median(-1).values.cpu().tolist()])
