"""Why a tuner trial reads slower than the same config's re-timing (session 32: 10-18%; this
session's H100 tune: 10.6 against 8.0 us for the default of 4096x1000 fp16).

One kernel (the default config of 4096x1000 fp16, the product's launch), timed with the tuner's
own bench_gpu (do_bench, warm-up 10 ms, 50 ms of repetitions) after different preludes:
  hot        right after another 50 ms do_bench of the same kernel (the re-timing's state)
  idle-0.3s  after 0.3 s with the GPU idle (a trial follows a compile and a CPU-side gate)
  gate       after the tuner's own correctness gate on this output (float64 compare)
  busy-cpu   with one busy-looping process per CPU (the precompile pool compiling)
Each condition 5 times, interleaved; medians printed. Then the same with warm-up 25/100 ms.
"""
import multiprocessing as mp
import os
import statistics
import time

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.reference import softmax_ref
from flashtune.tuner.gate import Gate
from flashtune.tuner.timing import bench_gpu


def spin(stop):
    while not stop.is_set():
        pass


def main():
    problem = SoftmaxProblem(4096, 1000, "float16")
    cfg = default_config("softmax", problem, sm_count=torch.cuda.get_device_properties(0).multi_processor_count)
    mod = load_variant("softmax", cfg)
    x = torch.randn(4096, 1000, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    gate = Gate(softmax_ref(x, -1), torch.softmax(x, -1), torch.float16)
    run = lambda: mod.launch(x, y)  # noqa: E731
    run(); torch.cuda.synchronize()
    print("device", torch.cuda.get_device_name(), "config", cfg.as_dict() if hasattr(cfg, "as_dict") else cfg)

    def prelude(kind):
        if kind == "hot":
            bench_gpu(run, 10, 50)
        elif kind == "idle-0.3s":
            torch.cuda.synchronize(); time.sleep(0.3)
        elif kind == "gate":
            y.fill_(float("nan")); run(); torch.cuda.synchronize()
            assert gate.check(y) is None

    for warm in (10, 25, 100):
        times = {k: [] for k in ("hot", "idle-0.3s", "gate", "busy-cpu")}
        for _ in range(5):
            for kind in times:
                if kind == "busy-cpu":
                    stop = mp.Event()
                    procs = [mp.Process(target=spin, args=(stop,)) for _ in range(os.cpu_count())]
                    for p in procs:
                        p.start()
                    time.sleep(0.2)
                    times[kind].append(bench_gpu(run, warm, 50)[0] * 1e3)
                    stop.set()
                    for p in procs:
                        p.join()
                else:
                    prelude(kind)
                    times[kind].append(bench_gpu(run, warm, 50)[0] * 1e3)
        print(f"warm-up {warm} ms: " + "  ".join(
            f"{k} {statistics.median(v):.2f} us [{min(v):.2f}-{max(v):.2f}]" for k, v in times.items()),
            flush=True)


if __name__ == "__main__":
    main()
