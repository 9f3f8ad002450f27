"""``flashtune bench --interpret`` end to end, and ``flashtune report`` re-rendering its JSON.

One interpreter run per module (tiny shapes, CPU tensors): the JSON holds every shape x dtype x
implementation row, the Markdown every case, the plots are real PNG files, the tuning history
comes from the seeded database, and ``flashtune report`` rebuilds the same Markdown from the JSON.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json

import pytest
import torch

import flashtune.dispatch as dispatch
from flashtune.bench.backward import BACKWARD_OPS
from flashtune.bench.peers import ATTENTION_PEERS, BACKWARD_PEERS, FLASHTUNE, SOFTMAX_PEERS
from flashtune.bench.report import JSON_NAME, MARKDOWN_NAME, SCHEMA
from flashtune.bench.shapes import (INTERPRET_ATTENTION_DTYPES, INTERPRET_ATTENTION_SHAPES,
                                    INTERPRET_SOFTMAX_DTYPES, INTERPRET_SOFTMAX_SHAPES)
from flashtune.cache import DeviceInfo, ProblemKey, TuneDB
from flashtune.cli import main
from flashtune.gen import template_family_hash
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, problem_bucket

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter run (CPU only)")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ["plot_softmax.png", *(f"plot_attention_{d}.png" for d in INTERPRET_ATTENTION_DTYPES),
         "plot_tuning.png", "plot_overhead.png"]
TUNED = SoftmaxProblem(4, 128, "float16")
TUNED_MS = [0.30, 0.50, 0.20, 0.25]  # in measured order: best so far 0.30, 0.30, 0.20, 0.20


def _seed_tuning(url: str) -> None:
    """Trials of three row configs (one measured twice is replaced) and the winner."""
    space = OPS["softmax"].space
    configs = [space.complete(dict(regime="row", block=128, rows_per_program=r, splits=1,
                                   num_warps=w, num_stages=1))
               for r, w in ((1, 1), (2, 1), (4, 2), (1, 4))]
    device = DeviceInfo.current(torch.device("cpu"))
    key = ProblemKey.make("softmax", TUNED.dtype, problem_bucket(TUNED))
    family = template_family_hash("softmax")
    with TuneDB(url) as db:
        for config, ms in zip(configs, TUNED_MS):
            db.record_trial(device, family, key, config.as_dict(), median_ms=ms)
        db.record_trial(device, family, key, configs[0].as_dict(), error="OutOfResources: planted")
        db.upsert_winner(device, family, key, configs[2].as_dict(), median_ms=0.2, p20_ms=0.19,
                         p80_ms=0.21, trials=5)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    url = f"sqlite:///{root / 'tuned.sqlite'}"
    _seed_tuning(url)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLASHTUNE_DB", url)  # --db sets it too: restored on exit
        mp.setenv("TRITON_INTERPRET", "1")
        rc, out, err = _cli("bench", "--interpret", "--out", str(root / "out"), "--db", url,
                            "--ops", "softmax,attention,backward")
    dispatch.reset()  # the session's database again for later tests
    assert rc == 0, err
    result = json.loads((root / "out" / JSON_NAME).read_text())
    return root / "out", result, out


def test_json_has_meta_and_copy_bandwidth(bench_run):
    _, result, _ = bench_run
    assert result["schema"] == SCHEMA
    meta = result["meta"]
    for key in ("device", "date", "torch", "triton", "flashtune", "git_commit", "mode", "timing"):
        assert key in meta, key
    assert meta["mode"] == "interpret" and meta["flashtune"]
    assert result["copy"]["gbs"] > 0 and result["copy"]["bytes"] > 0


def test_every_softmax_row_present(bench_run):
    _, result, _ = bench_run
    impls = (FLASHTUNE, *SOFTMAX_PEERS)
    want = {(f"{r}x{c}", d, i) for (r, c), d, i in
            itertools.product(INTERPRET_SOFTMAX_SHAPES, INTERPRET_SOFTMAX_DTYPES, impls)}
    got = [(r["shape"], r["dtype"], r["impl"]) for r in result["softmax"]]
    assert sorted(got) == sorted(want)  # each exactly once
    by = {(r["shape"], r["dtype"], r["impl"]): r for r in result["softmax"]}
    for shape, dtype, impl in want:
        row = by[(shape, dtype, impl)]
        if impl == "torch.compile":  # not compiled in the CPU smoke run: recorded, not crashed
            assert row["status"] == "unavailable" and row["error"]
            continue
        assert row["status"] == "ok", row
        assert row["check"]["ok"], row["check"]
        assert row["ms"] > 0 and row["gbs"] > 0 and row["frac_copy"] > 0
    ours = by[("4x128", "float16", FLASHTUNE)]
    assert set(ours["speedup"]) == {"torch.softmax", "online-1024"}
    assert ours["dispatch"]["how"] == "exact"  # the seeded winner was used


def test_every_backward_row_present(bench_run):
    """Both backward ops, every shape and dtype: flashtune's backward and torch's, both timed and
    both right against the float64 backward (the rule's backward form)."""
    _, result, _ = bench_run
    impls = (FLASHTUNE, *BACKWARD_PEERS)
    want = {(op, f"{r}x{c}", d, i) for op, (r, c), d, i in
            itertools.product(BACKWARD_OPS, INTERPRET_SOFTMAX_SHAPES, INTERPRET_SOFTMAX_DTYPES,
                              impls)}
    got = [(r["op"], r["shape"], r["dtype"], r["impl"]) for r in result["backward"]]
    assert sorted(got) == sorted(want)  # each exactly once
    for row in result["backward"]:
        assert row["status"] == "ok", row
        assert row["check"]["ok"], row["check"]
        assert row["check"]["peer"] == "torch backward"
        assert row["ms"] > 0 and row["gbs"] > 0 and row["frac_copy"] > 0
        if row["impl"] == FLASHTUNE:
            assert set(row["speedup"]) == {"torch"}
            assert row["dispatch"]["how"] == "default"  # nothing tuned for the backward ops


def test_every_attention_row_present(bench_run):
    _, result, _ = bench_run
    impls = (FLASHTUNE, *ATTENTION_PEERS)
    want = {(s.name, c, d, i) for s in INTERPRET_ATTENTION_SHAPES for c in s.causal
            for d in INTERPRET_ATTENTION_DTYPES for i in impls}
    got = [(r["shape"], r["causal"], r["dtype"], r["impl"]) for r in result["attention"]]
    assert sorted(got) == sorted(want)
    for row in result["attention"]:
        if row["impl"] == FLASHTUNE:
            assert row["status"] == "ok" and row["check"]["ok"] and row["tflops"] > 0, row
        elif row["impl"] == "flex":
            assert row["status"] == "unavailable"
        else:  # SDPA backends: CPU builds have some of them
            assert row["status"] in ("ok", "unavailable"), row


def test_markdown_lists_every_case_and_the_notes(bench_run):
    out_dir, result, stdout = bench_run
    md = (out_dir / MARKDOWN_NAME).read_text()
    for (r, c), d in itertools.product(INTERPRET_SOFTMAX_SHAPES, INTERPRET_SOFTMAX_DTYPES):
        assert f"| {r}x{c} | {d} |" in md
    for s in INTERPRET_ATTENTION_SHAPES:
        for c in s.causal:
            assert f"| {s.batch},{s.heads},{s.n},{s.head_dim} | float16 | {int(c)} |" in md
    for op, (r, c), d in itertools.product(BACKWARD_OPS, INTERPRET_SOFTMAX_SHAPES,
                                           INTERPRET_SOFTMAX_DTYPES):
        assert f"| {op} | {r}x{c} | {d} |" in md
    assert "## Softmax backward" in md
    for peer in SOFTMAX_PEERS + BACKWARD_PEERS + ATTENTION_PEERS:
        assert f"x {peer}" in md
    assert "**flex** unavailable" in md and "**torch.compile** unavailable" in md
    assert "softmax float16 4x128" in md  # the tuning history table
    for plot in PLOTS:
        assert f"({plot})" in md
    # the short table comes last on the console
    assert stdout.rstrip().splitlines()[-1].lstrip().startswith(INTERPRET_ATTENTION_SHAPES[-1].name)


def test_plots_are_png_files(bench_run):
    out_dir, _, _ = bench_run
    for name in PLOTS:
        data = (out_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        assert len(data) > 1024, name


def test_tuning_history_in_measured_order(bench_run):
    _, result, _ = bench_run
    problems = result["tuning"]["problems"]
    assert len(problems) == 1
    trials = problems[0]["trials"]
    # Re-measuring a config replaces its trial (and its measured_at): the failed re-run is last.
    assert [t["median_ms"] for t in trials] == TUNED_MS[1:] + [None]
    assert [t["best_ms"] for t in trials] == [0.5, 0.2, 0.2, 0.2]
    assert trials[-1]["status"] == "failed"


def test_report_rerenders_from_json(bench_run, tmp_path):
    out_dir, _, _ = bench_run
    rc, stdout, err = _cli("report", str(out_dir / JSON_NAME), "--out", str(tmp_path))
    assert rc == 0, err
    assert (tmp_path / MARKDOWN_NAME).read_text() == (out_dir / MARKDOWN_NAME).read_text()
    for name in PLOTS:
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    assert "softmax (GB/s" in stdout and "backward (GB/s" in stdout


def test_report_reads_results_from_before_the_backward_cases(bench_run, tmp_path):
    """A JSON written before the backward section existed (no "backward" key) still renders."""
    out_dir, result, _ = bench_run
    old = {k: v for k, v in result.items() if k != "backward"}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    rc, stdout, err = _cli("report", str(path), "--out", str(tmp_path / "md"))
    assert rc == 0, err
    md = (tmp_path / "md" / MARKDOWN_NAME).read_text()
    assert "## Softmax forward" in md and "## Softmax backward" not in md
    assert "backward (GB/s" not in stdout


def test_report_rejects_a_damaged_backward_row(bench_run, tmp_path):
    out_dir, result, _ = bench_run
    bad = json.loads(json.dumps(result))
    del bad["backward"][0]["gbs"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    rc, _, err = _cli("report", str(path))
    assert rc == 2 and "backward row 0" in err and "'gbs'" in err


def test_report_reads_a_result_saved_with_a_utf8_bom(bench_run, tmp_path):
    # Defect: a result re-saved by a Windows editor (UTF-8 with a byte order mark) was refused
    # with "not JSON (Unexpected UTF-8 BOM ...)"; `flashtune import` reads such files.
    out_dir, _, _ = bench_run
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + (out_dir / JSON_NAME).read_bytes())
    rc, _, err = _cli("report", str(path), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    assert (tmp_path / "out" / MARKDOWN_NAME).read_text() == (out_dir / MARKDOWN_NAME).read_text()


def test_report_rejects_other_json(tmp_path):
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"rows": []}))
    rc, _, err = _cli("report", str(bad))
    assert rc == 2 and "other.json" in err and "not a flashtune bench result" in err
    bad.write_text("{not json")
    rc, _, err = _cli("report", str(bad))
    assert rc == 2 and "not JSON" in err


def test_report_says_a_result_of_another_schema_version_is_one(bench_run, tmp_path):
    # Defect: a result written by another flashtune version (schema "flashtune-bench/2") was
    # called "not a flashtune bench result", which sends the user looking for the wrong file.
    _, result, _ = bench_run
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(dict(result, schema="flashtune-bench/2")))
    rc, _, err = _cli("report", str(path))
    assert rc == 2 and "not a flashtune bench result" not in err, err
    assert "'flashtune-bench/2'" in err and f"{SCHEMA!r}" in err and "version" in err, err


def _tamper(row_path, value):
    """A function setting result[row_path...] = value (a path of keys and indexes)."""
    def apply(result):
        target = result
        for key in row_path[:-1]:
            target = target[key]
        target[row_path[-1]] = value
    return apply


@pytest.mark.parametrize("change, needle", [
    (_tamper(["softmax", 0, "gbs"], 10**400), "'gbs' must be int/float, got a huge integer"),
    (_tamper(["meta", "wall_s"], 10**400), "'wall_s' must be int/float or absent"),
    (_tamper(["softmax", 0, "cols"], 0), "'cols' must be >= 1"),
    (_tamper(["attention", 0, "N"], -5), "'N' must be >= 1"),
    # the plots put sizes on log axes: an int no float holds was an OverflowError traceback
    (_tamper(["softmax", 0, "cols"], 10**400), "'cols' must be >= 1 and at most 1e308"),
    (_tamper(["attention", 0, "N"], 10**400), "'N' must be >= 1 and at most 1e308"),
    (_tamper(["softmax", 0, "error"], ["a"]), "'error' must be str or absent"),
    (_tamper(["softmax", 0, "causal"], [1]), "'causal' must be bool or absent"),
    (_tamper(["softmax", 0, "check", "detail"], {"a": 1}), "'detail' must be str or absent"),
    (_tamper(["softmax", 0, "check", "ok"], "no"), "'ok' must be bool"),
    (_tamper(["softmax", 0, "check"], {"detail": "x"}), "check: missing key 'ok'"),
    (_tamper(["softmax", 0, "dispatch"], {"how": "exact", "config": ["regime"]}),
     "'config' must be dict or absent"),
    (_tamper(["softmax", 0, "dispatch"], {"how": 5}), "'how' must be str or absent"),
    (_tamper(["tuning", "problems", 0, "bucket"], {"rows_bucket": 8}),
     "needs both rows_bucket and cols_bucket"),
    # read by the plots but not checked: a TypeError line ("'>' not supported between ...")
    # or an OverflowError traceback
    (_tamper(["overhead", "budget_us"], None), "'budget_us' must be int/float or absent"),
    (_tamper(["overhead", "budget_us"], 10**400), "'budget_us' must be int/float or absent"),
    (_tamper(["tuning", "problems", 0, "trials", 0, "n"], 10**400), "'n' must be int, got a huge"),
])
def test_report_names_a_tampered_value_instead_of_a_traceback(bench_run, tmp_path, change, needle):
    # Defects: these passed the checks and then failed inside the renderers (OverflowError,
    # AttributeError, KeyError tracebacks, or a one-line "unhashable type: 'list'").
    _, result, _ = bench_run
    bad = json.loads(json.dumps(result))
    change(bad)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    rc, _, err = _cli("report", str(path), "--out", str(tmp_path / "out"))
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "bad.json" in lines[0] and needle in lines[0], err
    assert len(lines[0]) < 400
    assert not (tmp_path / "out").exists()


def test_report_renders_values_a_log_axis_cannot_show(bench_run, tmp_path):
    # Defect: every GB/s NaN stopped the report with matplotlib's "Data cannot be log-scaled".
    _, result, _ = bench_run
    odd = json.loads(json.dumps(result))
    for row in odd["softmax"]:
        if row["status"] == "ok":
            row["gbs"] = float("nan")
    odd["copy"]["gbs"] = float("inf")
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(odd))
    rc, _, err = _cli("report", str(path), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    assert (tmp_path / "out" / "plot_softmax.png").read_bytes().startswith(PNG_MAGIC)


def test_report_shows_a_missing_size_as_a_dash(bench_run, tmp_path):
    # Defect (audit): "mib": null passed the checks (an optional number) and then stopped the
    # renderer: "unsupported format string passed to NoneType.__format__".
    _, result, _ = bench_run
    odd = json.loads(json.dumps(result))
    for row in odd["softmax"]:
        row["mib"] = None
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(odd))
    rc, _, err = _cli("report", str(path), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    first = odd["softmax"][0]
    assert f"| {first['shape']} | {first['dtype']} | - |" in (tmp_path / "out" / MARKDOWN_NAME).read_text()


@pytest.mark.parametrize("text, needle", [("[" * 100_000 + "]" * 100_000, "nested too deeply"),
                                          ("1" * 5000, "not JSON")])
def test_report_refuses_json_python_cannot_hold(tmp_path, text, needle):
    path = tmp_path / "deep.json"
    path.write_text(text)
    rc, _, err = _cli("report", str(path))
    assert rc == 2 and needle in err and "Traceback" not in err


def test_report_into_a_used_folder_leaves_no_plot_of_the_earlier_run(bench_run, tmp_path):
    # Defect: a softmax-only result rendered into a folder of a full run kept the old
    # plot_attention_*.png next to a report without attention.
    out_dir, result, _ = bench_run
    target = tmp_path / "out"
    rc, _, err = _cli("report", str(out_dir / JSON_NAME), "--out", str(target))
    assert rc == 0 and (target / "plot_attention_float16.png").exists(), err
    (target / "notes.txt").write_text("mine")
    softmax_only = dict(json.loads(json.dumps(result)), attention=[])
    path = tmp_path / "softmax_only.json"
    path.write_text(json.dumps(softmax_only))
    rc, _, err = _cli("report", str(path), "--out", str(target))
    assert rc == 0, err
    assert not list(target.glob("plot_attention_*.png"))
    assert (target / "plot_softmax.png").exists() and (target / "notes.txt").read_text() == "mine"


def test_report_without_matplotlib_says_how_to_get_it(bench_run, tmp_path, monkeypatch):
    # Defect (README audit): the notice said `pip install 'flashtune[bench]'`, a package index
    # name; README installs flashtune from its source folder (`pip install ".[bench]"`).
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    _, result, _ = bench_run
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result))
    monkeypatch.delitem(__import__("sys").modules, "flashtune.bench.plots", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    rc, out, err = _cli("report", str(path), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    assert 'pip install matplotlib' in out + err and "flashtune[bench]" not in out + err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [MARKDOWN_NAME]


def test_bench_interpret_without_triton_interpret_set(tmp_path):
    """Defect: `flashtune bench --interpret` with TRITON_INTERPRET unset (what its --help
    offers: "--interpret (or TRITON_INTERPRET=1)") failed every flashtune and online-1024 case
    ("Cannot call @triton.jit'd outside of the scope of a kernel") and exited 0: the command
    imported Triton (asking whether the interpreter was on) before it set TRITON_INTERPRET, and
    Triton decides at each @triton.jit, its own tl functions included, whether it interprets."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parent.parent
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(FLASHTUNE_CACHE_DIR=str(tmp_path / "cache"),
               FLASHTUNE_DB=f"sqlite:///{tmp_path / 'tuned.sqlite'}",
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "flashtune", "bench", "--interpret", "--out",
                          str(tmp_path / "out"), "--ops", "softmax", "--no-overhead"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads((tmp_path / "out" / JSON_NAME).read_text())
    ours = [r for r in result["softmax"] if r["impl"] == FLASHTUNE]
    assert ours and all(r["status"] == "ok" for r in ours), [r.get("error") for r in ours]


@pytest.mark.parametrize("field", ["device", "dtype"])
def test_report_draws_dollar_signs_as_written(bench_run, tmp_path, field):
    """Defect: names from the result reach the plots' titles and labels, and matplotlib read
    "$...$" in them as math: an edited "$\\frac{1}$" stopped the report with a parser error
    naming nothing, after some plots had been rewritten."""
    _, result, _ = bench_run
    odd = json.loads(json.dumps(result))
    if field == "device":
        odd["meta"]["device"] = "$\\frac{1}$ cost $5 and $6"
    else:
        for row in odd["softmax"]:
            row["dtype"] = "$\\frac{1}$"
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(odd))
    rc, _, err = _cli("report", str(path), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    assert (tmp_path / "out" / "plot_softmax.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("how", ["named", "linked"])
def test_report_does_not_write_over_the_result_it_reads(bench_run, tmp_path, how):
    """Defect: a result saved as flashtune_bench.md in the output folder was replaced by the
    Markdown (exit 0); the next report said "not JSON"."""
    out_dir, _, _ = bench_run
    kept = (out_dir / JSON_NAME).read_text()
    if how == "named":
        source = tmp_path / MARKDOWN_NAME
        source.write_text(kept)
    else:
        source = tmp_path / "result.json"
        source.write_text(kept)
        (tmp_path / MARKDOWN_NAME).symlink_to(source)
    rc, _, err = _cli("report", str(source), "--out", str(tmp_path))
    assert rc == 2 and "the report would write over it" in err, err
    assert source.read_text() == kept


def test_report_counts_a_row_without_a_check_apart(bench_run, tmp_path):
    """Defect: a timed row without a check showed unmarked in the tables and not in the notes,
    while the correctness line counted it as failing ("47 of 48 timed outputs pass")."""
    _, result, _ = bench_run
    odd = json.loads(json.dumps(result))
    row = next(r for r in odd["softmax"] if r["status"] == "ok")
    del row["check"]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(odd))
    rc, _, err = _cli("report", str(path), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    text = (tmp_path / "out" / MARKDOWN_NAME).read_text()
    timed = sum(1 for r in odd["softmax"] + odd["backward"] + odd["attention"] if r["status"] == "ok")
    assert f"of {timed - 1} checked outputs pass (1 timed without a check)" in text
    assert f"**{row['impl']}** timed without a check in 1 case(s)" in text
