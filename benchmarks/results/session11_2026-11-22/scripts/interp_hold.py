import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS
for op in ("softmax", "log_softmax"):
  for dtype in (torch.float32, torch.float16):
    for programs in (1, 3, 40):
        cfg = OPS[op].space.complete(dict(regime="split", block=64, splits=4, num_warps=1, num_stages=1,
                                          fused=True, programs_per_sm=2, l2_hint=True, hold=True))
        module = load_variant(op, cfg)
        kernel = getattr(module, f"_{op}_split_persistent")
        words = torch.zeros(2, 5 * 4, dtype=torch.int64)
        tickets = torch.zeros(2, dtype=torch.int32)
        written = [0, 0]
        for launch, n_rows in enumerate((5, 3, 5)):
            half = launch % 2
            x = (torch.randn(n_rows, 250) * 3).to(dtype)
            x[1] = float("-inf"); x[0, :64] = float("-inf"); x[-1, 7] = float("nan")
            y = torch.full_like(x, 123.0)
            kernel[(programs,)](x, y, words[half], words[1 - half], tickets, 250, x.stride(0),
                                y.stride(0), 64, n_rows * 4, written[1 - half], programs,
                                BLOCK=cfg["block"], SPLITS=4, MAX_POLLS=2)
            written = [n_rows * 4, 0] if half == 0 else [0, n_rows * 4]
            ref = (torch.log_softmax if OPS[op].log else torch.softmax)(x.float(), -1).to(dtype)
            torch.testing.assert_close(y, ref, equal_nan=True)
            assert not words[1 - half].any(); assert tickets.tolist() == [0, 0]
        # the two-launch path through launch()
        x = (torch.randn(7, 250) * 3).to(dtype); y = torch.empty_like(x)
        module.launch(x, y)
        torch.testing.assert_close(y, (torch.log_softmax if OPS[op].log else torch.softmax)(x.float(), -1).to(dtype))
        print(op, dtype, programs, "ok")
