"""fp32 softmax accuracy on a GPU, in ulps of the row's scale: max |out - float64| over
eps(fp32) * max |float64|, for every forward variant the GPU matrix checks (tests'
semantic_knobs per regime, exp2 on and off), on randn x 3 and x 10 rows, next to torch's own.

The thirty-fourth session saw 2.25 ulps (online max_pass exp2, H200) against torch's 0.25, and
the GPU tests allowed fp32 4 ulps. This session the templates' 1 / d became div.rn (it was
Triton's `/`, PTX div.full.f32, up to 2 ulps). Usage: [OPS=softmax,log_softmax TAG=name] python fp32_ulps.py (logs to $OUT/fp32_ulps_TAG.log)."""
import os
import sys
import zlib

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from softmax_cases import coop_block, make_config, semantic_knobs  # noqa: E402

from flashtune.gen import run_variant  # noqa: E402
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, problem_misfit  # noqa: E402

SHAPES = [(64, 1000), (4, 65536)]
DEVICE = os.environ.get("DEVICE", "cuda")  # cpu: a smoke run under TRITON_INTERPRET=1
if DEVICE == "cpu":
    SHAPES = [(7, 37)]


def ulps(out, ref):
    eps = torch.finfo(torch.float32).eps
    return ((out.double() - ref).abs().max() / (eps * ref.abs().max())).item()


def main():
    out_dir = os.environ.get("OUT", ".")
    log = open(os.path.join(out_dir, f"fp32_ulps_{os.environ.get('TAG', 'run')}.log"), "w")

    def say(s):
        print(s, flush=True)
        log.write(s + "\n")

    say(f"{torch.cuda.get_device_name() if DEVICE == 'cuda' else DEVICE} torch {torch.__version__}, "
        f"flashtune from {os.path.dirname(sys.modules['flashtune'].__file__)}")
    worst_ours, worst_torch = {}, {}
    for op in os.environ.get("OPS", "softmax,log_softmax").split(","):
        for regime in ("row", "online", "split", "coop"):
            for knobs in semantic_knobs(op, regime):
                for rows, cols in SHAPES:
                    raw = make_config(op, regime, knobs, cols, num_warps=4)
                    if regime == "coop":
                        raw["block"] = coop_block(cols, raw["splits"])
                    # at least 32 elements per warp in the tile, at most 4 warps
                    raw["num_warps"] = min(4, max(1, raw["block"] * raw["rows_per_program"] // 32))
                    try:
                        config = OPS[op].space.validate(raw)
                    except ValueError:
                        continue
                    if problem_misfit(config, SoftmaxProblem(rows, cols, "float32")):
                        continue
                    gen = torch.Generator().manual_seed(zlib.crc32(f"{op}{regime}{knobs}{cols}".encode()))
                    for scale in (3.0, 10.0):
                        x = (torch.randn(rows, cols, generator=gen) * scale).to(DEVICE)
                        y = torch.empty_like(x)
                        run_variant(op, config, x, y)
                        ref = (torch.log_softmax if op == "log_softmax" else torch.softmax)(x.double(), -1)
                        peer = (torch.log_softmax if op == "log_softmax" else torch.softmax)(x, -1)
                        form = ",".join(k for k in ("lane_stats", "vector_stats", "max_pass", "resident", "align")
                                        if config.get(k)) or "chunk"
                        key = (op, regime, "exp2" if config["exp2"] else "exp",
                               f"block {config['block']} {form}")
                        worst_ours[key] = max(worst_ours.get(key, 0.0), ulps(y, ref))
                        worst_torch[key] = max(worst_torch.get(key, 0.0), ulps(peer, ref))
    say("op | regime | exp | config | ours (max ulps) | torch")
    for key in sorted(worst_ours):
        say(" | ".join(key) + f" | {worst_ours[key]:.2f} | {worst_torch[key]:.2f}")


if __name__ == "__main__":
    main()
