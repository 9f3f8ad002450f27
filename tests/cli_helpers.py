"""Running the flashtune CLI inside a test."""

from __future__ import annotations

import warnings

from flashtune.cache import CacheWarning
from flashtune.cli import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``flashtune *argv``; cache warnings are not the subject."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def bench_result() -> dict:
    """A small valid `flashtune bench` result: two softmax rows (ours and a peer), two attention
    rows (one unavailable) and a tuning record."""
    from flashtune.bench.report import SCHEMA

    ok = {"op": "softmax", "shape": "4x128", "rows": 4, "cols": 128, "dtype": "float16",
          "mib": 0.001, "impl": "flashtune", "status": "ok", "ms": 1.0, "p20_ms": 1.0,
          "p80_ms": 1.0, "gbs": 2.0, "frac_copy": 0.5, "check": {"ok": True},
          "speedup": {"torch.softmax": 1.5}, "dispatch": {"how": "default", "config": {}}}
    peer = dict(ok, impl="torch.softmax", ms=1.5, gbs=1.3)
    del peer["speedup"], peer["dispatch"]
    att = {"op": "attention", "shape": "d16", "B": 1, "H": 2, "N": 64, "D": 16, "causal": True,
           "dtype": "float16", "impl": "flashtune", "status": "ok", "ms": 1.0, "tflops": 0.1}
    flex = dict(att, impl="flex", status="unavailable", error="no CUDA")
    del flex["ms"], flex["tflops"]
    return {"schema": SCHEMA, "meta": {"device": "cpu", "mode": "interpret", "wall_s": 3.0},
            "softmax": [ok, peer], "attention": [att, flex], "copy": {"gbs": 4.0},
            "overhead": None,
            "tuning": {"problems": [{"op": "softmax", "dtype": "float16",
                                     "bucket": {"rows_bucket": 4, "cols_bucket": 128},
                                     "winner_ms": 1.0, "trials": [
                                         {"n": 1, "status": "ok", "median_ms": 1.0, "best_ms": 1.0}]}]}}
