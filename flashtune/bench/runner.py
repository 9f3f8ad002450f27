"""``flashtune bench``: every case of the chosen set, in one process, then the report files.

Order: copy bandwidth, softmax cases, softmax backward cases (``backward``, opt-in), attention
cases (each phase within its share of the budget, see flashtune.bench.budget), host overhead,
tuning history; then the JSON, the Markdown and the plots in the output folder, and the short
summary table last.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .budget import Budget
from .report import JSON_NAME, MARKDOWN_NAME, SCHEMA, markdown, summary
from .shapes import case_set
from .timing import Timer, copy_bandwidth

OPS = ("softmax", "attention", "backward")
DEFAULT_OPS = ("softmax", "attention")
# Relative weights of the case phases, in run order; the chosen ones share CASES_SHARE of the
# budget in proportion (softmax + attention: softmax until 30%, attention until 85%).
PHASE_ORDER = ("softmax", "backward", "attention")
PHASE_WEIGHTS = {"softmax": 0.30, "backward": 0.20, "attention": 0.55}
CASES_SHARE = 0.85    # the rest: host overhead, tuning history and the report files


def phase_ends(ops: tuple[str, ...]) -> dict[str, float]:
    """The share of the budget at which each chosen op's phase ends."""
    chosen = [op for op in PHASE_ORDER if op in ops]
    total = sum(PHASE_WEIGHTS[op] for op in chosen)
    ends, acc = {}, 0.0
    for op in chosen:
        acc += PHASE_WEIGHTS[op]
        ends[op] = CASES_SHARE * acc / total
    return ends


@dataclass
class BenchOptions:
    out: Path
    mode: str = "full"  # "full" | "quick" | "interpret"
    budget_s: float | None = None
    ops: tuple[str, ...] = DEFAULT_OPS
    db: str | None = None
    overhead: bool = True
    log: Callable[[str], None] = field(default=lambda line: print(line, flush=True))

    def __post_init__(self) -> None:
        case_set(self.mode)  # ValueError for an unknown mode
        check_ops(self.ops)


def check_ops(ops: tuple[str, ...], what: str = "ops") -> None:
    """ValueError unless ``ops`` is a non-empty subset of OPS (``what`` names the argument)."""
    if not ops or any(op not in OPS for op in ops):
        raise ValueError(f"{what} must be a non-empty subset of {OPS}, got {ops!r}")


def check_gpu(interpret: bool) -> None:
    """ValueError unless a CUDA GPU is visible (not needed for the interpreter's smoke run)."""
    import torch

    if not interpret and not torch.cuda.is_available():
        raise ValueError("benchmarking needs a CUDA GPU; use --interpret for the CPU smoke run")


def git_state() -> tuple[str | None, bool | None]:
    """(commit, has uncommitted changes) of the checkout flashtune runs from, if it is one.

    The folder above the flashtune package must be the checkout's top level: an installed
    flashtune lives in site-packages, and a virtualenv inside some other git repository (a
    project's .venv) would otherwise record that repository's commit as flashtune's."""
    repo = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        lines = head.stdout.split("\n")
        if head.returncode != 0 or len(lines) < 2 or not _same_folder(lines[0], repo):
            return None, None
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True, timeout=10)
        return lines[1].strip(), bool(dirty.stdout.strip()) if dirty.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None, None


def _same_folder(a: str, b: Path) -> bool:
    """git prints the top level with links resolved: compare resolved paths."""
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


def _meta(options: BenchOptions, on_gpu: bool, timer: Timer) -> dict:
    import torch
    import triton

    import flashtune

    commit, dirty = git_state()
    meta = {"date": dt.datetime.now(dt.timezone.utc).isoformat(), "mode": options.mode,
            "quick": options.mode == "quick", "budget_s": options.budget_s,
            "torch": torch.__version__, "triton": triton.__version__,
            "flashtune": flashtune.__version__, "python": platform.python_version(),
            "git_commit": commit, "git_dirty": dirty}
    if on_gpu:
        props = torch.cuda.get_device_properties(0)
        meta.update(device=props.name, sm_count=props.multi_processor_count,
                    capability=f"{props.major}.{props.minor}",
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    timing=f"triton.testing.do_bench medians (CUDA events, L2 flushed; warm-up "
                           f"{timer.warmup_ms} ms, {timer.rep_ms} ms of repetitions; p20/p80 in "
                           "the JSON)")
    else:
        meta.update(device="cpu (Triton interpreter)", sm_count=None, capability="cpu",
                    timing=f"time.perf_counter medians of {timer.cpu_reps} calls after a warm-up "
                           "call; CPU tensors through Triton's interpreter, so the numbers say "
                           "nothing about GPU speed")
    return meta


def run_bench(options: BenchOptions) -> dict:
    """Run the benchmark, write the report files into ``options.out``; the result dict."""
    from .attention import run_attention
    from .backward import run_backward
    from .softmax import run_softmax

    log = options.log
    interpret = options.mode == "interpret"
    check_gpu(interpret)
    budget = Budget(options.budget_s)
    on_gpu = not interpret
    device = "cuda" if on_gpu else "cpu"
    timer = Timer(on_gpu=on_gpu)
    cases = case_set(options.mode)
    result = {"schema": SCHEMA, "meta": _meta(options, on_gpu, timer), "softmax": [],
              "backward": [], "attention": []}
    ends = phase_ends(options.ops)
    log(f"flashtune bench ({options.mode}) on {result['meta']['device']}, torch "
        f"{result['meta']['torch']}, triton {result['meta']['triton']}")
    try:
        result["copy"] = copy_bandwidth(timer, device)
        log(f"copy bandwidth {result['copy']['gbs']:.4g} GB/s")
        if "softmax" in options.ops:
            run_softmax(cases.softmax_shapes, cases.softmax_dtypes, timer, device,
                        result["copy"]["gbs"], budget.phase(ends["softmax"]), interpret, log,
                        out=result["softmax"])
        if "backward" in options.ops:
            run_backward(cases.softmax_shapes, cases.softmax_dtypes, timer, device,
                         result["copy"]["gbs"], budget.phase(ends["backward"]), interpret, log,
                         out=result["backward"])
        if "attention" in options.ops:
            run_attention(cases.attention_shapes, cases.attention_dtypes, timer, device,
                          budget.phase(ends["attention"]), interpret, log, out=result["attention"])
        result["overhead"] = _overhead(options, device, on_gpu, log)
        from .tuning import tuning_history

        result["tuning"] = tuning_history(options.db)
    except KeyboardInterrupt as stop:
        # Minutes of measurements are not thrown away: the cases finished so far are written
        # (marked interrupted), then the interrupt goes on, saying where they went. With no
        # case finished there is nothing to keep, and an earlier run's files in --out stay.
        if not (result["softmax"] or result["backward"] or result["attention"]):
            raise
        result["meta"].update(wall_s=budget.elapsed(), interrupted=True)
        log("interrupted: writing the cases finished so far")
        try:
            save_outputs(result, Path(options.out), log)
            stop.saved_in = Path(options.out)
        except OSError as err:  # still an interrupt (exit 130); say where the data went
            log(str(err))
        raise
    result["meta"]["wall_s"] = budget.elapsed()
    save_outputs(result, Path(options.out), log)
    log(summary(result))
    return result


def save_outputs(result: dict, out: Path, log: Callable[[str], None]) -> list[Path]:
    """write_outputs; if --out cannot take them (disk full, folder gone), the JSON goes to the
    temp folder instead and the OSError says where, so the measurements survive."""
    try:
        return write_outputs(result, out, log)
    except OSError as err:
        import tempfile

        try:
            fd, spare = tempfile.mkstemp(prefix="flashtune_bench-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(result, indent=1, default=str) + "\n")
        except OSError:
            raise err from None
        raise OSError(f"could not write the report into {out} ({err}); the measurements are "
                      f"saved in {spare}: flashtune report {spare} --out DIR renders them") from err


def _overhead(options: BenchOptions, device: str, on_gpu: bool, log) -> dict | None:
    if not options.overhead:
        return None
    from .overhead import measure_overhead

    iters, repeats = (5000, 5) if on_gpu else (10, 3)
    try:
        record = measure_overhead(device, iters=iters, repeats=repeats)
    except Exception as err:  # noqa: BLE001 - recorded, like any failing measurement
        return {"error": f"{type(err).__name__}: {err}"[:400]}
    log(record["summary"])
    return record


def write_outputs(result: dict, out: Path, log: Callable[[str], None]) -> list[Path]:
    """The JSON (bench only), the Markdown and the plots; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / JSON_NAME
    json_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    written = [json_path] + render(result, out, log)
    log("wrote " + ", ".join(str(p) for p in written))
    return written


def render(result: dict, out: Path, log: Callable[[str], None]) -> list[Path]:
    """The Markdown and the plots of ``result`` (what ``flashtune report`` redoes)."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        from .plots import PLOT_FILE, write_plots

        plots = write_plots(result, out)
        _remove_stale_plots(out, PLOT_FILE, {p.name for p in plots})
    except ImportError as err:
        # README installs flashtune from its source folder, not from a package index.
        log(f"no plots ({err}): pip install matplotlib (or, in flashtune's source folder, "
            "pip install \".[bench]\"), then `flashtune report` redraws them")
        plots = []
    md_path = out / MARKDOWN_NAME
    md_path.write_text(markdown(result, [p.name for p in plots]))
    return [md_path, *plots]


def _remove_stale_plots(out: Path, pattern, written: set[str]) -> None:
    """A plot of an earlier run into the same folder would sit next to a report without it."""
    for path in out.iterdir():
        if pattern.match(path.name) and path.name not in written and path.is_file():
            path.unlink(missing_ok=True)


def interpret_env() -> None:
    """Switch this process to Triton's interpreter before any kernel module is loaded."""
    os.environ["TRITON_INTERPRET"] = "1"
    from ..dispatch import reset

    reset()

