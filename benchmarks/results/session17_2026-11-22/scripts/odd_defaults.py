"""Data for two default changes on rows of odd width (H100, this session).

C: narrow rows of odd width (grain 1: element-wise loads) in the row regime: tile sizes
   (elements per program) x warps, next to the default and torch.softmax.
D: few rows of odd width, long: the split default against the online regime with the aligned
   walk (the many-rows default's config), next to torch.softmax; where the split wins again.

do_bench medians (L2 flushed), 25 ms warm-up, 100 ms of repetitions."""
import itertools
import sys

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DT = {"float16": torch.float16, "float32": torch.float32}


def t(fn):
    return bench_gpu(fn, 25, 100)[0] * 1e3


def run(cfg, x):
    mod = load_variant("softmax", OPS["softmax"].space.validate(cfg))
    y = torch.empty_like(x)
    mod.launch(x, y)
    torch.cuda.synchronize()
    err = (y.double() - torch.softmax(x.double(), -1)).abs().max().item()
    return t(lambda: mod.launch(x, y)), err


def part_c():
    print("== C: narrow rows of odd width, row regime (us)", flush=True)
    for c, dname in itertools.product((17, 33, 63, 127, 255, 511, 1023), DT):
        r = max(1000, min(200000, (1 << 25) // c))
        x = torch.randn(r, c, device="cuda").to(DT[dname])
        base = default_config("softmax", SoftmaxProblem(r, c, dname)).as_dict()
        block = base["block"]
        line = [f"{r}x{c} {dname} torch {t(lambda: torch.softmax(x, -1)):.1f}"]
        ms, _ = run(base, x)
        line.append(f"default r{base['rows_per_program']}w{base['num_warps']} {ms:.1f}")
        for tile, warps in itertools.product((256, 512, 1024, 2048), (1, 2, 4)):
            rows = tile // block
            if rows < 1 or tile < 32 * warps or block * rows > 65536 or rows > 64:
                continue
            ms, err = run(dict(base, rows_per_program=rows, num_warps=warps), x)
            line.append(f"r{rows}w{warps} {ms:.1f}{'' if err < 1e-2 else ' WRONG'}")
        print(" | ".join(line), flush=True)


def part_d():
    print("== D: few rows of odd width, split default vs online + aligned walk (us)", flush=True)
    for (r, c), dname in itertools.product(
            [(4, 131073), (16, 131073), (64, 131073), (16, 262145), (64, 262145),
             (4, 524289), (16, 524289), (16, 1048577), (120, 65537), (120, 262145)], DT):
        x = torch.randn(r, c, device="cuda").to(DT[dname])
        base = default_config("softmax", SoftmaxProblem(r, c, dname)).as_dict()
        many = default_config("softmax", SoftmaxProblem(4096, c, dname)).as_dict()
        line = [f"{r}x{c} {dname} torch {t(lambda: torch.softmax(x, -1)):.1f}"]
        ms, _ = run(base, x)
        line.append(f"default({base['regime']} s{base['splits']}) {ms:.1f}")
        ms, err = run(many, x)
        line.append(f"online(many-rows default b{many['block']} w{many['num_warps']}) {ms:.1f}"
                    f"{'' if err < 1e-2 else ' WRONG'}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    parts = sys.argv[1:] or ["c", "d"]
    if "c" in parts:
        part_c()
    if "d" in parts:
        part_d()
