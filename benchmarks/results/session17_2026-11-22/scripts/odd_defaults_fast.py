"""Part D of odd_defaults.py again, each launch through flashtune's fast launch path (what
flashtune.softmax runs): the first run timed the generated launch() through Triton's normal
path, whose host cost (tens of us for the split's row-sync workspace) exceeded the split's
GPU time on the smaller shapes. Split default against the online regime with the aligned walk,
next to torch.softmax. do_bench medians (L2 flushed), 25 ms warm-up, 100 ms; us."""
import itertools

import torch

from flashtune.dispatch.fast_launch import accelerate
from flashtune.gen import load_variant, softmax_space
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DT = {"float16": torch.float16, "float32": torch.float32}


def t(fn):
    return bench_gpu(fn, 25, 100)[0] * 1e3


def run(cfg, x):
    launch = accelerate(load_variant("softmax", OPS["softmax"].space.validate(cfg)).launch)
    y = torch.empty_like(x)
    launch(x, y)
    torch.cuda.synchronize()
    err = (y.double() - torch.softmax(x.double(), -1)).abs().max().item()
    return t(lambda: launch(x, y)), err


def main():
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    shapes = [(33, 65537), (100, 65537), (120, 65537), (64, 100003), (100, 40001), (32, 131073),
              (64, 131073), (16, 131073), (32, 262145), (64, 262145), (120, 262145),
              (32, 524287), (64, 524287), (100, 1000001)]
    for (r, c), dname in itertools.product(shapes, DT):
        x = torch.randn(r, c, device="cuda").to(DT[dname])
        # The split default as before the change (the rule that now picks online switched off).
        rule = softmax_space._online_beats_split_on_odd_rows
        softmax_space._online_beats_split_on_odd_rows = lambda *a: False
        try:
            split = default_config("softmax", SoftmaxProblem(r, c, dname)).as_dict()
        finally:
            softmax_space._online_beats_split_on_odd_rows = rule
        online = default_config("softmax", SoftmaxProblem(4096, c, dname)).as_dict()
        line = [f"{r}x{c} {dname} torch {t(lambda: torch.softmax(x, -1)):.1f}"]
        for name, cfg in (("split", split), ("online", online)):
            ms, err = run(cfg, x)
            line.append(f"{name}({cfg['regime']} s{cfg['splits']} b{cfg['block']}) {ms:.1f}"
                        f"{'' if err < 1e-2 else ' WRONG'}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
