"""Row-regime configs on the narrowest rows (up to 16 columns) and on fp32 rows of 100 columns:
the two kinds the shape sweep still found at or below torch.softmax (H100, this session).
do_bench medians (L2 flushed), 25 ms warm-up, 100 ms of repetitions; us."""
import itertools

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def t(fn):
    return bench_gpu(fn, 25, 100)[0] * 1e3


def run(cfg, x):
    mod = load_variant("softmax", OPS["softmax"].space.validate(cfg))
    y = torch.empty_like(x)
    mod.launch(x, y)
    torch.cuda.synchronize()
    err = (y.double() - torch.softmax(x.double(), -1)).abs().max().item()
    return t(lambda: mod.launch(x, y)), err


def main():
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    cases = [((r, c), d) for (r, c), d in itertools.product(
        [(200000, 5), (200000, 3), (200000, 9), (200000, 16), (1000000, 5)], ("float16", "float32"))]
    cases += [((r, 100), "float32") for r in (200000, 50000)] + [((200000, 128), "float32")]
    for (r, c), dname in cases:
        x = torch.randn(r, c, device="cuda").to(DT[dname])
        base = default_config("softmax", SoftmaxProblem(r, c, dname)).as_dict()
        line = [f"{r}x{c} {dname} torch {t(lambda: torch.softmax(x, -1)):.1f}"]
        ms, _ = run(base, x)
        line.append(f"default r{base['rows_per_program']}w{base['num_warps']} {ms:.1f}")
        for rows, warps in itertools.product((4, 8, 16, 32, 64), (1, 2, 4, 8)):
            if base["block"] * rows < 32 * warps or base["block"] * rows > 8192:
                continue
            ms, err = run(dict(base, rows_per_program=rows, num_warps=warps), x)
            line.append(f"r{rows}w{warps} {ms:.1f}{'' if err < 1e-2 else ' WRONG'}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
