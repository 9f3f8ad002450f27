"""``flashtune bench``: flashtune's public ops vs their peers on this GPU, with a report.

Runs the benchmark shape sets (those of `flashtune tune`'s default set: softmax 65536x128 ...
4096x50257 in float16, bfloat16 and float32; attention D=64 and 128 at N=1024, 4096, 16384,
D=256 at N=4096 and the ragged 4x32x1000x128 causal, in float16 and bfloat16) through
flashtune.softmax / flashtune.attention (the tuned winners of the cache, via the dispatcher)
and every peer (torch.softmax, torch.compile, the online BLOCK-1024 kernel; SDPA with each
backend forced, compiled FlexAttention) in one process: copy bandwidth first, then do_bench
medians, each output checked against the peer's and float64. Writes flashtune_bench.json,
flashtune_bench.md and plot_*.png into --out (default: benchmarks/results in the current
folder; the run prints their full paths), and prints a short table last. A peer that fails
or is unavailable is recorded as such.

--ops backward adds the softmax and log_softmax backward on the softmax shapes: flashtune's
eager backward (what its autograd runs) against torch's aten backward, GB/s = 3 x bytes(x) /
time, each dx checked against float64.

--interpret (or TRITON_INTERPRET=1): tiny shapes on CPU tensors through Triton's interpreter,
perf_counter timings (a smoke run of the harness; the numbers mean nothing).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from .options import (add_db_option, ascii_float, check_out_folder, check_readable_db,
                      folder_path)

DEFAULT_GPU_BUDGET_S = 500.0  # with start-up and the report: one 10-minute GPU job


def _seconds(text: str) -> float:
    return ascii_float(text, "a number of seconds")  # > 0: checked in run()


def budget_seconds(given: float | None, interpret: bool) -> float | None:
    """The run's budget in seconds, None for no limit.

    ``inf`` means no limit, as ``tune --total-time inf`` does (it was refused here alone)."""
    if given is None:
        return None if interpret else DEFAULT_GPU_BUDGET_S
    if not given > 0:  # NaN included
        raise ValueError(f"--budget must be > 0 seconds (inf: no limit), got {given}")
    return None if math.isinf(given) else given


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmark flashtune against its peers, write a report",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=folder_path, default=Path("benchmarks/results"),
                   help="output folder (default: benchmarks/results in the current folder; "
                        "the run prints the full path)")
    p.add_argument("--budget", type=_seconds, default=None, metavar="SECONDS",
                   help=f"wall-clock budget of the run (default {DEFAULT_GPU_BUDGET_S:.0f} on a "
                        "GPU, none under --interpret; inf: no limit); late cases drop compiled peers, then are skipped")
    p.add_argument("--quick", action="store_true", help="a subset of the shape sets")
    p.add_argument("--interpret", action="store_true",
                   help="CPU smoke run under Triton's interpreter (tiny shapes)")
    p.add_argument("--ops", default="softmax,attention",
                   help="comma list of softmax, attention and backward (softmax and log_softmax "
                        "backward against torch's; default: softmax,attention)")
    add_db_option(p, "; used by the dispatcher and for the tuning history")
    p.add_argument("--no-overhead", action="store_true", help="skip the host-overhead measurement")
    p.set_defaults(run=run)


def run(args) -> int:
    import os

    from ..gen.loader import interpreter_mode

    if args.interpret:
        # Before Triton is imported (interpreter_mode imports it): Triton decides at each
        # @triton.jit, its own tl functions included, whether it interprets; set later, the
        # interpreted kernels called compiled tl functions and every flashtune case failed.
        os.environ["TRITON_INTERPRET"] = "1"
    interpret = args.interpret or interpreter_mode()
    budget = budget_seconds(args.budget, interpret)
    ops = tuple(op.strip() for op in args.ops.split(",") if op.strip())
    from ..bench.runner import check_gpu, check_ops

    check_ops(ops, "--ops")  # before --out is made or anything timed (--db: checked by main)
    check_gpu(interpret)  # before --out is made: a failed run leaves nothing
    check_readable_db(args.db)  # (args.db None: $FLASHTUNE_DB or the cache folder's)
    check_out_folder(args.out)
    # The folder in full in what the run says ("wrote ...", an interrupt's note): by default it
    # is benchmarks/results of the current folder, which a script or a notebook does not show.
    out = args.out.absolute()
    if args.db is not None:
        os.environ["FLASHTUNE_DB"] = args.db  # the dispatcher's winners come from it too
    from ..bench.runner import BenchOptions, interpret_env, run_bench

    if interpret:
        interpret_env()
    elif args.db is not None:
        from ..dispatch import reset

        reset()
    mode = "interpret" if interpret else ("quick" if args.quick else "full")
    progress = _Progress()
    try:
        run_bench(BenchOptions(out=out, mode=mode, budget_s=budget, ops=ops, db=args.db,
                               overhead=not args.no_overhead, log=progress))
    except KeyboardInterrupt as stop:
        saved = getattr(stop, "saved_in", None)
        print("flashtune bench: interrupted; " + (
            f"the cases finished so far are written in {saved}" if saved is not None else
            f"nothing written to {out}"), file=sys.stderr)
        return 130
    return 141 if progress.reader_gone else 0


class _Progress:
    """The run's progress lines on stdout. A reader that goes away (`flashtune bench | head`)
    must not stop the run: the BrokenPipeError of the next line ended it, and minutes of
    measurements were lost with no file written. Later lines are dropped; the run finishes,
    writes its files and exits 141 (a reader gone), as `flashtune show | head` does."""

    def __init__(self) -> None:
        self.reader_gone = False

    def __call__(self, line: str) -> None:
        if self.reader_gone:
            return
        try:
            print(line, flush=True)
        except BrokenPipeError:
            from . import _silence_stdout

            self.reader_gone = True
            _silence_stdout()  # else Python's flush at exit reports the broken pipe again

