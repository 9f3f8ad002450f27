"""Pieces of the bench harness: failing peers are recorded, the budget, the tuning history."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch

import flashtune.dispatch as dispatch
from flashtune.bench.budget import Budget
from flashtune.bench.cases import run_case
from flashtune.bench.checks import SoftmaxCheck
from flashtune.bench.peers import FLASHTUNE, Impl, Unavailable
from flashtune.bench.softmax import run_softmax
from flashtune.bench.timing import Timer
from flashtune.bench.tuning import tuning_history
from flashtune.cli import main

CPU = Timer(on_gpu=False, cpu_reps=2)


@pytest.fixture
def interpreter_env(monkeypatch):
    """The CLI's interpreter switch sets TRITON_INTERPRET: undo it and reset the dispatcher."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    yield
    monkeypatch.undo()
    dispatch.reset()


def _plain(fn):
    return lambda x: (lambda: fn(x), contextlib.nullcontext)


def _unavailable(x):
    raise Unavailable("not on this machine")


def test_failing_peers_are_recorded_not_raised():
    x = torch.randn(8, 32, dtype=torch.float32)
    impls = [Impl(FLASHTUNE, _plain(lambda t: torch.softmax(t, -1))),
             Impl("broken", _plain(lambda t: 1 / 0)),
             Impl("absent", _unavailable),
             Impl("wrong", _plain(lambda t: torch.softmax(t, -1) * 1.01)),
             Impl("late", _plain(lambda t: torch.softmax(t, -1))),
             Impl("good", _plain(lambda t: torch.softmax(t, -1)))]
    rows = run_case(impls, x, CPU, SoftmaxCheck(x), lambda ms: {"gbs": 1.0 / ms},
                    {"op": "softmax", "shape": "8x32", "dtype": "float32"},
                    {"late": "budget"})
    by = {r["impl"]: r for r in rows}
    assert by[FLASHTUNE]["status"] == "ok" and by[FLASHTUNE]["check"]["ok"]
    assert by["broken"]["status"] == "failed" and "ZeroDivisionError" in by["broken"]["error"]
    assert by["absent"]["status"] == "unavailable" and by["absent"]["error"] == "not on this machine"
    assert by["wrong"]["status"] == "ok" and not by["wrong"]["check"]["ok"]
    assert by["late"]["status"] == "skipped"
    # ratios only against timed peers whose output passed its check
    assert set(by[FLASHTUNE]["speedup"]) == {"good"}
    assert all(r["shape"] == "8x32" for r in rows)


def _wrong_case(ours_ok: bool, peer_ok: bool) -> list[dict]:
    """One softmax case as the bench writes it: flashtune and torch.softmax timed, with the
    verdicts given (rows as a result written before the fix holds them: speedup included)."""
    base = {"op": "softmax", "shape": "8x32", "rows": 8, "cols": 32, "dtype": "float32",
            "mib": 0.001}
    ours = dict(base, impl=FLASHTUNE, status="ok", ms=1.0, gbs=2.0, frac_copy=0.5,
                check={"ok": ours_ok, "detail": "planted"}, speedup={"torch.softmax": 3.0})
    peer = dict(base, impl="torch.softmax", status="ok", ms=3.0, gbs=0.7, frac_copy=0.2,
                check={"ok": peer_ok, "detail": "planted"})
    return [ours, peer]


@pytest.mark.parametrize("ours_ok, peer_ok", [(False, True), (True, False)])
def test_no_ratio_for_or_against_an_output_that_failed_its_check(ours_ok, peer_ok):
    """Defect: add_speedups gave flashtune a ratio against every timed peer, checked or not, so
    a wrong (e.g. too fast) flashtune kernel was reported as "x 3.00" faster than torch, and a
    peer with a wrong output (the online-1024 fp32 rows of the H200 runs) got a ratio too; the
    report and the summary printed those ratios. A ratio compares two correct outputs only."""
    from flashtune.bench.cases import add_speedups
    from flashtune.bench.report import markdown, summary

    rows = _wrong_case(ours_ok, peer_ok)
    for row in rows:
        row.pop("speedup", None)
    add_speedups(rows)
    assert not rows[0].get("speedup"), rows[0]
    # A result written before the fix still holds the ratio: the report does not show it.
    result = {"meta": {}, "softmax": _wrong_case(ours_ok, peer_ok), "backward": [],
              "attention": []}
    assert "3.00" not in summary(result), summary(result)
    table = [line for line in markdown(result, []).splitlines() if line.startswith("| 8x32")]
    assert len(table) == 1 and "3.00" not in table[0], table
    assert "(wrong!)" in table[0]


def test_budget_phases_run_then_lean_then_skip():
    now = [0.0]
    budget = Budget(100.0, clock=lambda: now[0])
    phase = budget.phase(0.5)  # window 0..50 s
    assert phase.state() == "run"
    now[0] = 36.0
    assert phase.state() == "lean"
    now[0] = 50.0
    assert phase.state() == "skip"
    assert Budget(None).phase(0.5).state() == "run"
    with pytest.raises(ValueError, match="budget"):
        Budget(0)


def test_cases_past_the_budget_are_skipped_rows():
    now = [0.0]
    budget = Budget(10.0, clock=lambda: now[0])
    phase = budget.phase(0.3)
    now[0] = 5.0
    lines = []
    rows = run_softmax([(4, 128)], ["float16", "float32"], CPU, "cpu", 1.0, phase, True, lines.append)
    assert len(rows) == 8 and {r["status"] for r in rows} == {"skipped"}
    assert not lines  # nothing ran


def test_tuning_history_without_database(tmp_path):
    path = tmp_path / "none.sqlite"
    history = tuning_history(f"sqlite:///{path}")
    assert history["problems"] == [] and "no winner database" in history["note"]
    assert not path.exists()  # reading never creates a database


def test_tuning_history_does_not_call_a_link_loop_a_missing_database(tmp_path):
    # Defect: "no winner database at ..." where a symbolic link loop sits at the path (or a
    # folder on it may not be searched): the note says what is wrong instead.
    path = tmp_path / "loop.sqlite"
    path.symlink_to(path)
    history = tuning_history(f"sqlite:///{path}")
    assert history["problems"] == [] and "symbolic link loop" in history["note"], history
    assert "no winner database" not in history["note"], history


def test_tuning_history_leaves_out_winners_of_other_families(tmp_path):
    """A winner of another family hash (tuned by another flashtune version: other templates
    or tunables) is not served, so the history does not show it, whatever its trial count."""
    from flashtune.cache import DeviceInfo, ProblemKey, TuneDB
    from flashtune.gen import template_family_hash

    url = f"sqlite:///{tmp_path / 'w.sqlite'}"
    device = DeviceInfo.current()
    config = {"regime": "row", "block": 128, "rows_per_program": 1, "splits": 1,
              "num_warps": 1, "num_stages": 1, "lane_stats": False, "l2_hint": False,
              "exp2": True, "vector_stats": False, "max_pass": False, "resident": 0,
              "align": False, "fused": False, "programs_per_sm": 0, "paired_loads": False}
    with TuneDB(url) as db:
        for family, rows, trials in (("0" * 16, 8, 50), (template_family_hash("softmax"), 16, 3)):
            key = ProblemKey.make("softmax", "float32", {"rows_bucket": rows, "cols_bucket": 128})
            db.record_trial(device, family, key, config, median_ms=0.5)
            db.upsert_winner(device, family, key, config, median_ms=0.5, p20_ms=0.4,
                             p80_ms=0.6, trials=trials)
    problems = tuning_history(url)["problems"]
    assert [p["bucket"]["rows_bucket"] for p in problems] == [16]


def test_interpreter_env_selects_the_smoke_run(tmp_path, interpreter_env):
    """TRITON_INTERPRET=1 without --interpret: the same CPU run (here softmax only)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["bench", "--out", str(tmp_path), "--ops", "softmax", "--no-overhead"])
    assert rc == 0
    result = json.loads((tmp_path / "flashtune_bench.json").read_text())
    assert result["meta"]["mode"] == "interpret" and result["attention"] == []
    assert result["overhead"] is None
    assert "Host overhead" not in (tmp_path / "flashtune_bench.md").read_text()


class _ReaderGone(io.StringIO):
    """stdout of `flashtune bench | head -1`: the reader leaves after the first line."""

    def write(self, text: str) -> int:
        if self.getvalue():
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


def test_a_reader_that_goes_away_does_not_cost_the_measurements(tmp_path, interpreter_env):
    """Defect: `flashtune bench | head` died with the BrokenPipeError of its second progress
    line (exit 141) and wrote nothing: on a GPU, minutes of measurements lost to a pager.
    The progress lines are only a view of the run (tune writes its own to stderr): the run
    goes on, writes its files, and still exits 141, the status of a reader gone."""
    with contextlib.redirect_stdout(_ReaderGone()):
        rc = main(["bench", "--interpret", "--out", str(tmp_path), "--ops", "softmax",
                   "--no-overhead"])
    assert rc == 141
    result = json.loads((tmp_path / "flashtune_bench.json").read_text())
    assert {r["shape"] for r in result["softmax"]} == {"4x128", "3x1000"}
    assert (tmp_path / "flashtune_bench.md").exists()


def test_bench_without_out_says_the_full_path_it_wrote_to(tmp_path, interpreter_env,
                                                           monkeypatch, capsys):
    """Defect (audit): without --out the files go to benchmarks/results of the current folder,
    and the run said only "wrote benchmarks/results/flashtune_bench.json, ...": from a
    script or a notebook a user could not tell which folder that was."""
    monkeypatch.chdir(tmp_path)
    rc = main(["bench", "--interpret", "--ops", "softmax", "--no-overhead"])
    out = capsys.readouterr().out
    assert rc == 0
    folder = Path.cwd() / "benchmarks" / "results"
    assert (folder / "flashtune_bench.json").is_file()
    [wrote] = [line for line in out.splitlines() if line.startswith("wrote ")]
    assert wrote.startswith(f"wrote {folder / 'flashtune_bench.json'}, "), wrote


def test_bad_arguments_are_errors(tmp_path, interpreter_env):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["bench", "--interpret", "--out", str(tmp_path), "--ops", "matmul"]) == 2
    assert "ops must be" in err.getvalue()
    with contextlib.redirect_stderr(err):
        assert main(["bench", "--interpret", "--out", str(tmp_path), "--budget", "-1"]) == 2
    assert "--budget" in err.getvalue()


@pytest.mark.gpu
def test_quick_gpu_run_within_budget(tmp_path):
    """On a GPU: the --quick set finishes within its budget and writes every file."""
    import time

    t0 = time.monotonic()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["bench", "--quick", "--budget", "150", "--out", str(tmp_path)])
    assert rc == 0
    assert time.monotonic() - t0 < 150 + 60  # one case may overrun its phase's end
    result = json.loads((tmp_path / "flashtune_bench.json").read_text())
    ours = [r for r in result["softmax"] + result["attention"] if r["impl"] == FLASHTUNE]
    assert ours and all(r["status"] in ("ok", "skipped") for r in ours)
    assert all(r["check"]["ok"] for r in ours if r["status"] == "ok")
    for name in ("flashtune_bench.md", "plot_softmax.png", "plot_attention_float16.png"):
        assert (tmp_path / name).stat().st_size > 1024


def test_phase_ends_split_the_case_share_in_run_order():
    """Softmax + attention keep their old windows (30% and 85%); backward takes its weight
    between them; one op alone gets the whole case share."""
    from flashtune.bench.runner import CASES_SHARE, phase_ends

    assert phase_ends(("softmax", "attention")) == pytest.approx({"softmax": 0.30, "attention": 0.85})
    assert phase_ends(("backward",)) == pytest.approx({"backward": CASES_SHARE})
    ends = phase_ends(("attention", "backward", "softmax"))  # the order given does not matter
    assert list(ends) == ["softmax", "backward", "attention"]
    assert 0 < ends["softmax"] < ends["backward"] < ends["attention"] == pytest.approx(CASES_SHARE)


def test_unknown_bench_op_is_an_error(tmp_path):
    from flashtune.bench.runner import BenchOptions

    with pytest.raises(ValueError, match="ops must be"):
        BenchOptions(out=tmp_path, ops=("softmax", "backwards"))



def test_no_gpu_is_said_before_out_is_made(tmp_path, monkeypatch, capsys):
    """Defect: `flashtune bench` without a GPU (and without --interpret) made --out (by default
    ./benchmarks/results in the current folder) and only then said it needs a GPU."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "benchmarks" / "results"
    assert main(["bench", "--out", str(out), "--no-overhead"]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU" in err and "--interpret" in err and "Traceback" not in err
    # the command is named once, by the CLI's prefix (it said "flashtune bench: error:
    # flashtune bench needs a CUDA GPU")
    assert err.count("flashtune bench") == 1, err
    assert not (tmp_path / "benchmarks").exists()


def test_attention_rows_say_how_the_dispatcher_picked(tmp_path, monkeypatch):
    """Defect: the attention rows' "flashtune config" always read "chooser: ..." (the hook
    flashtune.attention passes is the dispatcher's), so a report could not tell a tuned winner
    from the heuristic default; the softmax rows say "exact", "nearest" or "default"."""
    from dispatch_helpers import DEVICE, seed_attention

    from flashtune.attention_op import set_config_chooser
    from flashtune.bench.attention import _config_info
    from flashtune.gen.attention_space import AttentionProblem

    path = tmp_path / "tuned.sqlite"
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{path}")
    dispatch.reset()
    try:
        q, k, v = (torch.randn(1, 2, 40, 16, dtype=torch.float16, device=DEVICE) for _ in range(3))
        assert _config_info(q, k, v, True)["how"] == "default"
        winner = dict(BLOCK_M=16, BLOCK_N=16, num_warps=1, num_stages=1, exp2=False,
                      pv_acc="fp32", persistent=True, tma=False, warp_specialize=False)
        seed_attention(path, AttentionProblem(1, 2, 2, 40, 40, 16, True, "float16"), winner)
        dispatch.reset()
        info = _config_info(q, k, v, True)
        assert info["how"] == "exact" and info["config"]["BLOCK_M"] == 16, info
        # A chooser installed by the user is still named as such.
        set_config_chooser(lambda op, problem, device: winner)
        try:
            assert _config_info(q, k, v, True)["how"] == "chooser"
        finally:
            set_config_chooser(None)
    finally:
        monkeypatch.undo()
        dispatch.reset()


def test_softmax_rows_under_flashtune_disable_say_torch_ran(monkeypatch):
    """Defect: with FLASHTUNE_DISABLE=1 flashtune.softmax calls torch.softmax, yet the report's
    "flashtune config" column named a Triton config ("default: row block=128 ...")."""
    from flashtune.bench.report import _dispatch
    from flashtune.bench.softmax import dispatch_info

    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
    dispatch.reset()
    try:
        info = dispatch_info("softmax", 4, 128, "float16", "cpu")
        assert "config" not in info and "FLASHTUNE_DISABLE" in info["how"], info
        assert _dispatch({"dispatch": info}) == info["how"]
    finally:
        monkeypatch.undo()
        dispatch.reset()
    assert dispatch_info("softmax", 4, 128, "float16", "cpu")["config"]["regime"] == "row"


def test_backward_and_overhead_under_flashtune_disable_say_torch_ran(monkeypatch, device):
    """Defect: with FLASHTUNE_DISABLE=1 the backward rows' "flashtune config" column named a
    Triton config ("default: row block=128 ...") and the host-overhead record said
    "dispatcher: default config" and "flashtune.softmax cache hit: ... us/call (budget ...:
    PASS)", though flashtune.softmax (and its backward) ran torch's. (The launch rows of the
    overhead record still run a flashtune kernel: that is their point.)"""
    from flashtune.bench.overhead import measure_overhead, overhead_markdown
    from flashtune.bench.report import _dispatch
    from flashtune.bench.softmax import dispatch_info

    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
    dispatch.reset()
    try:
        for op in ("softmax_backward", "log_softmax_backward"):
            info = dispatch_info(op, 4, 128, "float16", "cpu")
            assert "config" not in info and "FLASHTUNE_DISABLE" in info["how"], info
            assert _dispatch({"dispatch": info}) == info["how"]
        # the session's device: the record's bare launches run a kernel (CPU tensors only
        # under the interpreter)
        record = measure_overhead(device, iters=2, repeats=1)
        assert "FLASHTUNE_DISABLE" in record["choice"] and record["disabled"], record
        assert "cache hit" not in record["summary"] and "torch" in record["summary"], record
        text = "\n".join(overhead_markdown(record))
        assert "default config" not in text and "FLASHTUNE_DISABLE" in text, text
    finally:
        monkeypatch.undo()
        dispatch.reset()
    assert dispatch_info("softmax_backward", 4, 128, "float16", "cpu")["config"]["regime"] == "row"


def test_plots_leave_out_outputs_that_failed_their_check():
    """Defect: the plots drew every timed row, so a wrong (and maybe fast) kernel's GB/s or
    TFLOP/s was plotted next to the peers' with nothing saying it was wrong; the table marks
    it "(wrong!)" and the plots now leave it out."""
    from flashtune.bench.plots import _series
    from flashtune.bench.report import group_cases

    cases = group_cases(_wrong_case(ours_ok=False, peer_ok=True))
    assert _series(cases, FLASHTUNE, "cols", "gbs") == ([], [])
    assert _series(cases, "torch.softmax", "cols", "gbs") == ([32], [0.7])
    cases = group_cases(_wrong_case(ours_ok=True, peer_ok=False))
    assert _series(cases, FLASHTUNE, "cols", "gbs") == ([32], [2.0])
    assert _series(cases, "torch.softmax", "cols", "gbs") == ([], [])


def test_no_overhead_plot_where_the_overhead_was_not_measured(tmp_path):
    """Defect: `bench --no-overhead` (result["overhead"] None) still drew plot_overhead.png,
    an empty "not collected" panel, and the report linked it; the Markdown has no overhead
    section then. A plot of an earlier run into the same folder is removed too."""
    from flashtune.bench.report import SCHEMA
    from flashtune.bench.runner import render

    (tmp_path / "plot_overhead.png").write_bytes(b"an earlier run's")
    result = {"schema": SCHEMA, "meta": {"device": "cpu", "mode": "interpret"}, "softmax": [],
              "backward": [], "attention": [], "overhead": None, "tuning": None}
    written = render(result, tmp_path, lambda line: None)
    assert [p.name for p in written] == ["flashtune_bench.md", "plot_tuning.png"]
    assert not (tmp_path / "plot_overhead.png").exists()
    assert "plot_overhead" not in (tmp_path / "flashtune_bench.md").read_text()


def test_a_render_removes_only_plots_a_bench_run_could_have_drawn(tmp_path):
    """Defect: the stale-plot sweep took any plot_attention_<word>.png for an earlier run's,
    so a user's own plot_attention_h100_vs_h200.png in the --out folder (the default
    benchmarks/results, say) was deleted by `flashtune bench` or `flashtune report`. Only the
    names a bench run draws (its attention dtypes) are an earlier run's to remove."""
    from flashtune.bench.report import SCHEMA
    from flashtune.bench.runner import render

    mine = ["plot_attention_h100_vs_h200.png", "plot_attention_mine.png"]
    for name in mine + ["plot_attention_bfloat16.png"]:
        (tmp_path / name).write_bytes(b"x")
    result = {"schema": SCHEMA, "meta": {"device": "cpu", "mode": "interpret"}, "softmax": [],
              "backward": [], "attention": [], "overhead": None, "tuning": None}
    render(result, tmp_path, lambda line: None)
    assert all((tmp_path / name).read_bytes() == b"x" for name in mine)
    assert not (tmp_path / "plot_attention_bfloat16.png").exists()  # an earlier run's


def test_the_output_of_the_timed_path_is_checked_too():
    """Defect: only the first call's output was checked, then the following calls were timed;
    flashtune's dispatcher launches through Triton the first time and through its fast launch
    path (flashtune.dispatch.fast_launch) from the second call on, so a wrong fast path would
    have been timed and reported as a correct kernel. A call made after the timing is checked
    as well."""
    x = torch.randn(8, 32, dtype=torch.float32)
    calls = [0]

    def right_once(t):
        calls[0] += 1
        return torch.softmax(t, -1) * (1.0 if calls[0] == 1 else 1.01)

    impls = [Impl(FLASHTUNE, _plain(right_once)),
             Impl("torch.softmax", _plain(lambda t: torch.softmax(t, -1)))]
    rows = run_case(impls, x, CPU, SoftmaxCheck(x), lambda ms: {"gbs": 1.0 / ms},
                    {"op": "softmax", "shape": "8x32", "dtype": "float32"}, {})
    ours = rows[0]
    assert ours["status"] == "ok" and not ours["check"]["ok"], ours["check"]
    assert "after" in ours["check"]["detail"]
    assert not ours.get("speedup")
    assert rows[1]["check"]["ok"]


def test_attention_tflops_counts_the_pairs_a_bottom_right_causal_mask_leaves():
    """x 0.5 of Nq * Nk is the convention for Nq = Nk only: with the bottom-right mask flashtune
    runs, a decode step (Nq = 1) sees every key, and Nq = 2 Nk leaves a triangle of Nk^2 / 2."""
    from flashtune.bench.attention import tflops

    # Nq = Nk: the usual numbers, unchanged (4 B H N^2 D, x 0.5 causal)
    assert tflops(2, 3, 128, 64, False, 1.0) == pytest.approx(4 * 2 * 3 * 128 * 128 * 64 / 1e9)
    assert tflops(2, 3, 128, 64, True, 1.0) == pytest.approx(0.5 * tflops(2, 3, 128, 64, False, 1.0))
    assert tflops(1, 1, 128, 64, True, 1.0, n_k=128) == tflops(1, 1, 128, 64, True, 1.0)
    full = tflops(1, 1, 1, 64, False, 1.0, n_k=4096)
    assert tflops(1, 1, 1, 64, True, 1.0, n_k=4096) == pytest.approx(full, rel=1e-3)
    # Nq = 2 Nk: the first Nk queries see no key, the last Nk a triangle
    assert tflops(1, 1, 256, 64, True, 1.0, n_k=128) == pytest.approx(
        4 * 128 * 128 / 2 * 64 / 1e9)
    # Nq = Nk / 2: each query sees the Nk / 2 keys before the diagonal plus the triangle
    assert tflops(1, 1, 128, 64, True, 1.0, n_k=256) == pytest.approx(
        4 * (128 * 256 - 128 * 128 / 2) * 64 / 1e9)


def test_an_output_in_another_dtype_fails_its_check():
    """check_accuracy compared values only: a float32 result for float16 input passed (its
    error is below the float16 bound), so a kernel writing the wrong dtype would be reported
    as correct."""
    from flashtune.reference import check_accuracy, softmax_ref

    x16 = torch.randn(8, 64).to(torch.float16)
    assert SoftmaxCheck(x16)(torch.softmax(x16, -1))["ok"]
    assert not SoftmaxCheck(x16)(torch.softmax(x16.float(), -1))["ok"]
    acc = check_accuracy(torch.softmax(x16.float(), -1), softmax_ref(x16, -1), torch.softmax(x16, -1))
    assert not acc.ok and "dtype" in acc.reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter-only: CPU tensors, no GPU")
def test_the_overhead_bare_launch_says_no_numpy_warnings_under_the_interpreter():
    """Defect (audit): `flashtune bench --interpret` printed numpy's "RuntimeWarning: invalid
    value encountered in subtract" (-inf - -inf in masked lanes): the host-overhead record's
    bare ``kernel[grid](...)`` launch ran outside the interpreted launcher, which switches
    numpy's floating-point warnings off around each launch (gen.loader)."""
    import warnings

    from flashtune.bench.overhead import measure_overhead

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = measure_overhead("cpu", iters=2, repeats=1)
    assert any(r["name"].startswith("bare") for r in record["results"]), record
    said = [str(w.message) for w in caught if "encountered in" in str(w.message)]
    assert not said, said


def test_attention_check_covers_every_batch_and_head():
    """Defect: the attention check compared sampled rows of the first and the last (b, h) pair
    only, so an output wrong in every other head passed and was timed, ratioed and reported as
    a win: a kernel that swaps the batch and head program ids (B = H, as in the 32 x 32 x 1024
    benchmark shape: (0, 0) and (B-1, H-1) are their own swap), or one whose schedule leaves a
    middle head wrong. Every (b, h) pair is checked on the sampled rows."""
    from flashtune.bench.checks import AttentionCheck
    from flashtune.bench.peers import sdpa_reference

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 3, 40, 16, generator=gen) for _ in range(3))
    peer = sdpa_reference(q, k, v, True)
    check = AttentionCheck(q, k, v, True, peer)
    assert check(peer)["ok"]
    swapped = peer.transpose(0, 1).contiguous()  # b and h swapped: right at (0, 0) and (2, 2)
    assert not check(swapped)["ok"], check(swapped)
    middle = peer.clone()
    middle[1, 1] = 0.0  # one middle head never written
    assert not check(middle)["ok"], check(middle)


def test_fraction_of_copy_of_a_wrong_output_is_marked():
    """Defect: the "% copy" column (the goal's metric: >= 90% of copy) showed a wrong
    flashtune output's fraction unmarked ("50%"), next to its GB/s marked "(wrong!)"; a reader
    of the goal column saw a wrong kernel's speed as a result."""
    from flashtune.bench.report import markdown

    for ours_ok, cell in ((True, "| 50% |"), (False, "| 50% (wrong!) |")):
        result = {"meta": {}, "softmax": _wrong_case(ours_ok, True), "backward": [],
                  "attention": []}
        table = [line for line in markdown(result, []).splitlines() if line.startswith("| 8x32")]
        assert len(table) == 1 and cell in table[0], table


def test_git_commit_is_flashtunes_own_checkout_only(tmp_path, monkeypatch):
    """Defect: git_state asked git about the folder above the flashtune package, so a
    `pip install .` into a virtualenv inside some git repository (a project's .venv) recorded
    that repository's commit and dirty state as flashtune's in every result. Only a checkout
    whose top level is that folder (flashtune run from its source) names a commit."""
    import subprocess

    from flashtune.bench import runner

    outer = tmp_path / "project"
    site = outer / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@x", "-C", str(outer)]
    subprocess.run([*git, "init", "-q"], check=True)
    (outer / "a.txt").write_text("a")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "project"], check=True)
    # flashtune installed into the project's virtualenv
    monkeypatch.setattr(runner, "__file__", str(site / "flashtune" / "bench" / "runner.py"))
    assert runner.git_state() == (None, None)
    # flashtune run from its own checkout (here: the project's top level)
    monkeypatch.setattr(runner, "__file__", str(outer / "flashtune" / "bench" / "runner.py"))
    commit, dirty = runner.git_state()
    assert commit and len(commit) == 40 and dirty is False


def test_quick_set_keeps_the_softmax_shape_furthest_from_its_goal():
    """Defect: --quick ran 16384x1024, 1024x65536 and 4096x50257 only, leaving out 16x1048576,
    the one softmax shape of the goals still short of it (about 65% of copy on the H100 against
    the 80% must-show, README "Where we lose"); a quick run's softmax range ("81-93% of copy",
    session 30) then read as if every shape were past 80%. The quick set keeps it."""
    from flashtune.bench.shapes import case_set

    quick = case_set("quick")
    assert (16, 1048576) in quick.softmax_shapes
    assert "float16" in quick.softmax_dtypes
