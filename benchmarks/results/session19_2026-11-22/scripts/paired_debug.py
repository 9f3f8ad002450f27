"""Where the paired kernel's normal and give-up (MAX_POLLS 0) outputs differ (test_one_launch_
give_up_path_is_bit_identical_gpu[paired split]): fp32 inputs (relative error meaningful),
rows with an empty last segment (50257 columns, 8 segments of 8192) and without (65536)."""
import torch

from flashtune.gen import row_sync
from flashtune.gen.softmax_ops import softmax_forward
from flashtune.gen.softmax_space import OPS

torch.manual_seed(0)


def cfg(block, splits, warps, paired, programs=2):
    return OPS["softmax"].space.complete(dict(
        regime="split", block=block, splits=splits, num_warps=warps, num_stages=1, fused=True,
        programs_per_sm=programs, l2_hint=True, paired_loads=paired))


for name, config, cols in (("paired", cfg(8192, 8, 16, True, 8), 50257),
                           ("paired", cfg(8192, 8, 16, True, 8), 65536),
                           ("paired w4", cfg(8192, 8, 4, True, 4), 50257),
                           ("plain, empty segment", cfg(8192, 8, 8, False), 50257)):
    for dtype in (torch.float32, torch.float16):
        x = (torch.randn(300, cols, device="cuda") * 4).to(dtype)
        ref = torch.softmax(x.double(), -1)
        outs = {}
        for polls in (row_sync.MAX_POLLS, 0):
            saved = row_sync.MAX_POLLS
            row_sync.MAX_POLLS = polls
            outs[polls] = softmax_forward(x, -1, config=config)
            torch.cuda.synchronize()
            row_sync.MAX_POLLS = saved
        line = f"{name:22s} b{config['block']} s{config['splits']} w{config['num_warps']} {cols} {str(dtype)[6:]}:"
        for polls, out in outs.items():
            o = out.double()
            bad = ~torch.isfinite(o)
            err = ((o - ref).abs() / ref).nan_to_num(nan=1e30, posinf=1e30).max().item() if dtype == torch.float32 \
                else (o - ref).abs().nan_to_num(nan=1e30, posinf=1e30).max().item()
            where = ""
            if bad.any():
                idx = bad.nonzero()
                where = f" non-finite {bad.sum().item()} rows {sorted(set(idx[:, 0].tolist()))[:6]} segs {sorted(set((idx[:, 1] // 8192).tolist()))}"
            line += f"  polls {polls}: err {err:.2e}{where}"
        print(line, " bitwise", torch.equal(outs[0], outs[row_sync.MAX_POLLS]), flush=True)
