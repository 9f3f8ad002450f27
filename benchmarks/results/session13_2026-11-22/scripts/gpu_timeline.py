"""Timeline of the persistent split (16x1048576 and 128x262144): %globaltimer stamps per
program after each read+publish, wait and write. Prints, per 1 us bin, how many programs are
reading, waiting and writing, and the totals. Workspace zeroed before each launch."""
import os, sys, statistics
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton
import numpy as np
import timeline_kernel as tk
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "timeline.log"), "a")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name())
SMS = torch.cuda.get_device_properties(0).multi_processor_count
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for rows, cols, dt, splits, block, pps, warps, lag in [
        (16, 1048576, "float16", 64, 8192, 4, 8, 1), (16, 1048576, "float16", 64, 8192, 4, 8, 0),
        (16, 1048576, "float16", 32, 16384, 2, 8, 1),
        (128, 262144, "float16", 32, 8192, 4, 8, 1), (16, 1048576, "float32", 64, 16384, 2, 8, 1)]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    seg_len = triton.cdiv(triton.cdiv(cols, splits), block) * block
    n_items = rows * splits; P = min(n_items, pps * SMS)
    slots = torch.zeros(n_items, dtype=torch.int64, device="cuda"); stale = torch.zeros_like(slots)
    tickets = torch.zeros(2, dtype=torch.int32, device="cuda")
    stamps = torch.zeros(P, 64, dtype=torch.int64, device="cuda")
    spans = []
    for rep in range(6):
        slots.zero_(); tickets.zero_(); stamps.zero_(); flush.zero_()
        tk.timeline_kernel[(P,)](x, y, slots, stale, tickets, stamps, cols, x.stride(0), y.stride(0), seg_len, n_items,
                                 0, P, BLOCK=block, SPLITS=splits, MAX_POLLS=1 << 20, LAG=lag, num_warps=warps, num_stages=1)
        torch.cuda.synchronize()
        s = stamps.cpu().numpy()
        spans.append((s[:, 1:63:2] // 1).max())
    err = float((y.double() - torch.softmax(x.double(), -1)).abs().max())
    t0 = s[:, 0].min()
    ev = []  # (program, kind, t_begin, t_end)
    end_all = 0
    for p in range(P):
        k = s[p, 63]; prev_t = s[p, 0]
        for j in range(1, k, 2):
            kind = s[p, j] // 1000000; t = s[p, j + 1]
            ev.append((p, kind, prev_t - t0, t - t0)); prev_t = t
        end_all = max(end_all, prev_t - t0)
    ev = np.array(ev, dtype=np.int64)
    span = end_all / 1e3
    starts = (s[:, 0] - t0) / 1e3
    say(f"== {rows}x{cols} {dt} splits {splits} block {block} pps {pps} warps {warps} lag {lag}: span {span:.2f} us "
        f"(programs start over {starts.max():.2f} us), err {err:.1e}, timer step {np.diff(np.unique(s[:, 1:63:2][s[:, 1:63:2] > 0]))[:200].min() if True else 0} ns")
    names = {1: "read", 2: "wait", 3: "write"}
    tot = {n: float((ev[ev[:, 1] == k, 3] - ev[ev[:, 1] == k, 2]).sum()) / 1e3 for k, n in names.items()}
    say("  program-us in each phase: " + ", ".join(f"{n} {v:.0f}" for n, v in tot.items()) + f" (of {P} x {span:.1f} = {P * span:.0f})")
    nb = int(np.ceil(span))
    say("  us   reading waiting writing  (programs)")
    for b in range(nb):
        lo, hi = b * 1000, (b + 1) * 1000
        cnt = {}
        for k, n in names.items():
            e = ev[ev[:, 1] == k]
            ov = np.clip(np.minimum(e[:, 3], hi) - np.maximum(e[:, 2], lo), 0, None).sum() / 1000
            cnt[n] = ov
        say(f"  {b:3d} {cnt['read']:7.0f} {cnt['wait']:7.0f} {cnt['write']:7.0f}")
