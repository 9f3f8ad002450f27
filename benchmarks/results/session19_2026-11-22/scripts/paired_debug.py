"""Where the paired kernel's normal and give-up (MAX_POLLS 0) outputs differ (test_one_launch_
give_up_path_is_bit_identical_gpu[paired split]), against float64 by relative error."""
import sys
import torch

sys.path.insert(0, "tests")
import test_softmax_gpu as t  # noqa: E402
from flashtune.gen import row_sync  # noqa: E402
from flashtune.gen.softmax_ops import softmax_forward  # noqa: E402

torch.manual_seed(0)
for regime, splits, cols in (("paired split", 8, 50257), ("persistent split", 8, 50257),
                             ("paired split", 8, 65536), ("paired split", 16, 50257)):
    config = t._one_launch(regime, splits, cols)
    x = (torch.randn(300, cols, device="cuda") * 4).half()
    ref = torch.softmax(x.double(), -1)
    outs = {}
    for polls in (row_sync.MAX_POLLS, 0):
        saved = row_sync.MAX_POLLS
        row_sync.MAX_POLLS = polls
        outs[polls] = softmax_forward(x, -1, config=config)
        torch.cuda.synchronize()
        row_sync.MAX_POLLS = saved
    for polls, out in outs.items():
        rel = ((out.double() - ref).abs() / ref.clamp_min(1e-30)).nan_to_num(posinf=1e30)
        bad = (rel > 0.05).nonzero()
        rows = sorted(set(bad[:, 0].tolist()))
        print(f"{regime} s{config['splits']} b{config['block']} w{config['num_warps']} cols {cols} polls {polls}: "
              f"max rel {rel.max().item():.3e}, {len(bad)} bad elements in rows {rows[:10]}"
              f"{' cols ' + str(sorted(set((bad[:, 1] // config['block']).tolist()))[:10]) if len(bad) else ''}")
    same = torch.equal(outs[0], outs[row_sync.MAX_POLLS])
    print("   normal == forced bitwise:", same)
