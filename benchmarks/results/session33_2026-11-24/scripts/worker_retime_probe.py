"""Session 33: the tuner's own LocalRunner, one problem (4096x1000 fp16): the default's trial
(measure), then re-timings (retime) alone and with other finalists, then the trial again.
Does the re-timing read faster than the trial in the same process, and why?"""

import torch

from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.tuner.worker import LocalRunner, Task

problem = SoftmaxProblem(4096, 1000, "float16")
sms = torch.cuda.get_device_properties(0).multi_processor_count
default = default_config("softmax", problem, sm_count=sms).as_dict()
other = dict(default, rows_per_program=16, exp2=False)
other2 = dict(default, num_warps=16, rows_per_program=1)
runner = LocalRunner()
runner.setup(Task("softmax", problem, "cuda:0", 0))
us = lambda ms: f"{ms * 1e3:.2f}"  # noqa: E731


def trial(label, cfg=default):
    m = runner.measure(cfg)
    print(f"{label:34s} trial  {us(m.median_ms)} us (p20 {us(m.p20_ms)}, p80 {us(m.p80_ms)})", flush=True)


def retime(label, cfgs, rounds=5):
    ms = runner.retime(cfgs, rounds)
    print(f"{label:34s} retime " + "  ".join(f"{us(m.median_ms)}" for m in ms) + " us", flush=True)


trial("fresh")
trial("again")
retime("alone", [default])
retime("with two others", [default, other, other2])
trial("after the re-timings")
retime("alone, 1 round", [default], 1)
from flashtune.gen import validate_config  # noqa: E402
from flashtune.tuner.timing import bench_gpu  # noqa: E402

run = runner._launcher(validate_config("softmax", default))
for rep in (40, 50, 100):
    vals = [bench_gpu(run, 10, rep)[0] for _ in range(5)]
    print(f"bench_gpu rep={rep:3d} x5: " + " ".join(us(v) for v in vals), flush=True)
