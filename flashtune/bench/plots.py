"""PNG plots of a bench result (matplotlib, Agg backend: no display needed).

- plot_softmax.png: GB/s vs columns, one panel per dtype, flashtune and peers, copy bandwidth line.
- plot_attention_<dtype>.png: TFLOP/s vs N, panels per head dim (rows) x causal (columns).
- plot_tuning.png: best time so far vs trial for a few tuned problems ("no tuning records" if none).
- plot_overhead.png: host us per call, flashtune vs torch vs a bare Triton launch (not drawn
  when the overhead was not measured: bench --no-overhead).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from .peers import ATTENTION_PEERS, FLASHTUNE, SOFTMAX_PEERS
from .report import group_cases, passed
from .shapes import ATTENTION_DTYPES, INTERPRET_ATTENTION_DTYPES, QUICK_ATTENTION_DTYPES

STYLE = {FLASHTUNE: dict(color="tab:red", marker="o", linewidth=2.2, zorder=5)}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs (or opens) a display
    import matplotlib.pyplot as plt

    return plt


def _ok(row):
    # A timed output that failed its check is no result: not drawn (the table marks it wrong).
    return passed(row)


def _series(cases, impl, xkey, ykey):
    """The impl's (x, y) points, sorted; points a log axis cannot show (a NaN, an infinity or
    a value <= 0, from a damaged result file) are left out, the table still lists them."""
    pts = sorted((c[impl][xkey], c[impl][ykey]) for c in cases if _ok(c.get(impl))
                 and _plottable(c[impl][xkey]) and _plottable(c[impl][ykey]))
    return [p[0] for p in pts], [p[1] for p in pts]


def _plottable(value) -> bool:
    return math.isfinite(value) and value > 0


def _empty(ax, text):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=12)
    ax.set_xticks([])
    ax.set_yticks([])


def _title(fig, result, what):
    meta = result["meta"]
    fig.suptitle(f"{what}: {meta.get('device', '?')} ({meta.get('mode', '?')}), "
                 f"{str(meta.get('date', ''))[:10]}", fontsize=11)


def plot_softmax(result, path: Path) -> Path:
    plt = _pyplot()
    cases = group_cases(result["softmax"])
    dtypes = list(dict.fromkeys(next(iter(c.values()))["dtype"] for c in cases)) or ["-"]
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.5 * len(dtypes), 4.5), squeeze=False)
    copy = result.get("copy", {}).get("gbs")
    for ax, dtype in zip(axes[0], dtypes):
        mine = [c for c in cases if next(iter(c.values()))["dtype"] == dtype]
        drawn = 0
        for impl in (FLASHTUNE, *SOFTMAX_PEERS):
            xs, ys = _series(mine, impl, "cols", "gbs")
            if xs:
                ax.plot(xs, ys, label=impl, **STYLE.get(impl, dict(marker=".", alpha=0.8)))
                drawn += 1
        if not drawn:
            _empty(ax, "no successful runs")
        if copy is not None and _plottable(copy):
            ax.axhline(copy, color="gray", linestyle="--", label=f"copy {copy:.3g} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("columns (rows vary: see table)")
        ax.set_ylabel("GB/s")
        ax.set_title(dtype)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # nothing drawn, no copy line: no legend
            ax.legend(fontsize=8)
    _title(fig, result, "softmax forward")
    return _save(fig, path)


def plot_attention(result, dtype: str, path: Path) -> Path:
    plt = _pyplot()
    cases = [c for c in group_cases(result["attention"]) if next(iter(c.values()))["dtype"] == dtype]
    dims = sorted({next(iter(c.values()))["D"] for c in cases}) or [0]
    fig, axes = plt.subplots(len(dims), 2, figsize=(11, 3.6 * len(dims)), squeeze=False)
    for i, d in enumerate(dims):
        for j, causal in enumerate((False, True)):
            ax = axes[i][j]
            mine = [c for c in cases if next(iter(c.values()))["D"] == d
                    and next(iter(c.values()))["causal"] == causal]
            drawn = 0
            for impl in (FLASHTUNE, *ATTENTION_PEERS):
                xs, ys = _series(mine, impl, "N", "tflops")
                if xs:
                    ax.plot(xs, ys, label=impl, **STYLE.get(impl, dict(marker=".", alpha=0.8)))
                    drawn += 1
            if not drawn:
                _empty(ax, "no successful runs" if mine else "no cases")
            else:
                ax.set_xscale("log", base=2)
                ax.legend(fontsize=8)
            ax.set_title(f"head dim {d}, {'causal' if causal else 'non-causal'}")
            ax.set_xlabel("N (sequence length)")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
    _title(fig, result, f"attention forward {dtype}")
    return _save(fig, path)


def plot_tuning(result, path: Path) -> Path:
    from .tuning import problem_label

    plt = _pyplot()
    tuning = result.get("tuning") or {}
    problems = tuning.get("problems") or []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = 0
    for p in problems:
        pts = [(t["n"], t["best_ms"]) for t in p["trials"] if t.get("best_ms") is not None]
        if pts:
            ax.step([n for n, _ in pts], [ms for _, ms in pts], where="post", marker=".",
                    label=problem_label(p))
            drawn += 1
    if drawn:
        ax.set_xlabel("trial (in order measured)")
        ax.set_ylabel("best median so far (ms)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no tuning records" + (f"\n({tuning['note']})" if tuning.get("note") else ""))
    _title(fig, result, "tuning history")
    return _save(fig, path)


def plot_overhead(result, path: Path) -> Path:
    plt = _pyplot()
    record = result.get("overhead") or {}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    items = record.get("results") or []
    if items:
        names = [r["name"] for r in items]
        host = [r["host_us"] for r in items]
        colors = ["tab:red" if n.startswith("flashtune.softmax") and "(" not in n else "tab:blue"
                  for n in names]
        ax.barh(names, host, color=colors)
        ax.axvline(record.get("budget_us", 10.0), color="gray", linestyle="--", label="budget")
        ax.invert_yaxis()
        ax.set_xlabel(f"host us per call (softmax {record['shape'][0]}x{record['shape'][1]} "
                      f"{record['dtype']})")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="x")
    else:
        _empty(ax, f"host overhead not measured\n({record.get('error', 'not collected')})")
    _title(fig, result, "host overhead")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return _save(fig, path, tight=False)


def _save(fig, path: Path, tight: bool = True) -> Path:
    import matplotlib.pyplot as plt

    if tight:
        fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# Every file name write_plots gives for a bench run's result (a render removes those of an
# earlier run it did not redraw). The attention plots are named by the dtypes a bench runs,
# not by any word: "attention_\w+" took a user's own plot_attention_h100_vs_h200.png in the
# --out folder for an earlier run's and deleted it.
_BENCH_DTYPES = "|".join(dict.fromkeys(ATTENTION_DTYPES + QUICK_ATTENTION_DTYPES
                                       + INTERPRET_ATTENTION_DTYPES))
PLOT_FILE = re.compile(rf"^plot_(softmax|tuning|overhead|attention_({_BENCH_DTYPES}))\.png$")


def write_plots(result, out_dir: Path) -> list[Path]:
    """Every plot of ``result`` in ``out_dir``; the paths written.

    Text is drawn as written: a result's names (a device, a dtype, a case) reach titles and
    labels, and matplotlib read "$...$" in them as math (an edited "$\\frac{1}$" stopped
    `flashtune report` with a parser error, after some plots were rewritten)."""
    _pyplot()
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        paths = [plot_softmax(result, out_dir / "plot_softmax.png")] if result["softmax"] else []
        dtypes = dict.fromkeys(r["dtype"] for r in result["attention"])
        paths += [plot_attention(result, d, out_dir / f"plot_attention_{d}.png") for d in dtypes]
        paths.append(plot_tuning(result, out_dir / "plot_tuning.png"))
        if result.get("overhead"):  # None: not run (--no-overhead); an error record is drawn
            paths.append(plot_overhead(result, out_dir / "plot_overhead.png"))
    return paths
