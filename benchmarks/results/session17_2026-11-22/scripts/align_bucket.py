"""Odd widths no longer take winners tuned on aligned widths (the unaligned_rows bucket field).

Run after `flashtune tune` of the ALIGNED problems below into FLASHTUNE_DB. For each pair, the
aligned problem's winner (what the dispatcher served the odd width before this change: same
rows and columns bucket) is timed on the odd width next to today's choice for the odd width
and torch. do_bench medians, 25 ms warm-up, 200 ms of repetitions."""
import torch

from flashtune.dispatch import choice
from flashtune.dispatch.plans import aten_backward
from flashtune.gen import load_variant
from flashtune.tuner.timing import bench_gpu

PAIRS = [  # (op, aligned shape tuned, odd shape served)
    ("softmax_backward", (4096, 65536), (4096, 50257)),
    ("softmax", (1024, 65536), (1024, 50001)),
]
DTYPE = torch.float16


def runner(op, config, x):
    mod = load_variant(op, config)
    if op == "softmax":
        y = torch.empty_like(x)
        return lambda: mod.launch(x, y), lambda: y
    y = torch.softmax(x, -1)
    dy = torch.randn_like(y)
    dx = torch.empty_like(y)
    return lambda: mod.launch(y, dy, dx), lambda: dx


def main():
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for op, tuned, odd in PAIRS:
        dtype = str(DTYPE)[6:]
        winner = choice(op, tuned, dtype, "cuda")
        now = choice(op, odd, dtype, "cuda")
        print(f"{op} {dtype}: tuned {tuned} -> {winner.how} {winner.config.as_dict()}")
        print(f"  {odd} now -> {now.how} bucket {now.bucket} {now.config.as_dict()}")
        x = torch.randn(*odd, device="cuda", dtype=torch.float32).to(DTYPE)
        if op == "softmax":
            ref = torch.softmax(x.double(), -1)
            t_torch = bench_gpu(lambda: torch.softmax(x, -1), 25, 200)[0]
        else:
            y = torch.softmax(x, -1)
            dy = torch.randn_like(y)
            back = aten_backward(False)
            t_torch = bench_gpu(lambda: back(dy, y, -1, y.dtype), 25, 200)[0]
            ref = None
        for name, cfg in (("aligned winner (before)", winner.config), ("choice now", now.config)):
            run, out = runner(op, cfg, x)
            run()
            torch.cuda.synchronize()
            if ref is not None:
                err = (out().double() - ref).abs().max().item()
                note = f" err {err:.1e}"
            else:
                note = ""
            t = bench_gpu(run, 25, 200)[0]
            print(f"  {odd} {name:24s} {t*1e3:8.1f} us  x torch {t_torch/t:5.2f}{note}", flush=True)
        print(f"  {odd} torch {t_torch*1e3:8.1f} us", flush=True)


if __name__ == "__main__":
    main()
