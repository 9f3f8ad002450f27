"""``flashtune report RESULT.json [--out DIR]``: re-render a bench result (no GPU needed).

Reads the JSON written by ``flashtune bench`` and writes flashtune_bench.md and the plot_*.png
files again (into --out, default the JSON's folder), then prints the short summary table.
A result without measurements (no case in it) is said to have nothing to report; nothing is
written.
"""

from __future__ import annotations

import argparse

from .options import check_out_folder, file_arg, folder_path


def register(sub) -> None:
    p = sub.add_parser("report", help="re-render the report of a `flashtune bench` JSON",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", type=file_arg, help="the flashtune_bench.json of a bench run")
    p.add_argument("--out", type=folder_path, default=None, help="output folder (default: the JSON's)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..bench.report import load_result, summary
    from ..bench.runner import render

    result = load_result(args.result)
    if not (result["softmax"] or result["backward"] or result["attention"]):
        # No case in it (a bench never writes such a result, but an edited one may): an empty
        # summary and a report of nothing whose notes said every implementation passed, said
        # plainly instead, as `show` and `clear` say there is nothing; no file is written, so
        # an earlier report in --out stays.
        print(f"{args.result}: no measurements (no softmax, backward or attention case); "
              "nothing to report")
        return 0
    out = args.out if args.out is not None else args.result.parent
    check_out_folder(out)  # "--out X is not a writable folder (...)", not a bare errno line
    _check_not_overwritten(args.result, out)
    # load_result has checked everything the renderers read: an error past it is our bug, and
    # keeps its traceback.
    written = render(result, out, print)
    print("wrote " + ", ".join(str(p) for p in written))
    print(summary(result))
    return 0


def _check_not_overwritten(source, out) -> None:
    """ValueError when the report would write over the result it reads: a result saved as
    flashtune_bench.md (or as a plot's name) in the output folder was replaced by the
    Markdown, and the measurements with it."""
    import re

    from ..bench.runner import MARKDOWN_NAME

    plot = re.compile(r"plot_.*\.png")  # what the renderer writes and clears (plots.PLOT_FILE)
    real = source.resolve()
    found = out.iterdir() if out.is_dir() else ()
    targets = [out / MARKDOWN_NAME] + [p for p in found if plot.fullmatch(p.name)]
    own_name = real.parent == out.resolve() and plot.fullmatch(real.name)
    if own_name or any(t.resolve() == real for t in targets):  # a link there counts too
        raise ValueError(f"{source}: the report would write over it (it writes {MARKDOWN_NAME} "
                         "and plot_*.png into --out); give --out another folder, or rename the "
                         "result")
