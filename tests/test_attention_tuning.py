"""The tuner on attention_fwd (Triton interpreter, tiny problems): the problem syntax and set,
the sampled-row gate, planted wrong variants, candidates, precompile specs and the CLI run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flashtune.cache import ProblemKey, TuneDB
from flashtune.gen.attention_space import AttentionProblem
from flashtune.tuner.adapter import OpAdapter
from flashtune.tuner.attention_adapter import AttentionAdapter
from flashtune.tuner.families import attention_smem_bytes, family
from flashtune.tuner.precompile import arg_specs
from flashtune.tuner.problems import TuneProblem, default_problems, parse_problem
from flashtune.tuner.session import SessionOptions, run_session
from flashtune.tuner.study import TuneOptions, candidate_list, tune_problem
from flashtune.tuner.timing import TimingOptions
from flashtune.tuner.worker import LocalRunner, Task

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter test")

ROOT = Path(__file__).resolve().parents[1]
FAST = TimingOptions(cpu_reps=1)
TINY = TuneProblem("attention_fwd", AttentionProblem(1, 2, 2, 64, 64, 16, True, "float16"))


class PlantedAttentionAdapter(AttentionAdapter):
    """Configs with the chosen BLOCK_M return a plausible but wrong output (1% off)."""

    def __init__(self, wrong_block_m=()):
        self.wrong_block_m = tuple(wrong_block_m)

    def launch(self, op, config, case):
        super().launch(op, config, case)
        if config["BLOCK_M"] in self.wrong_block_m:
            case.out.mul_(1.01)


def three_configs():
    """BLOCK_M 16, 32 and 64 at BLOCK_N 16, one warp, one stage (quick to interpret)."""
    configs = [c for c in candidate_list(TINY.op, TINY.problem)[0]
               if c["BLOCK_N"] == 16 and c["num_warps"] == 1 and c["num_stages"] == 1
               and c["exp2"] and c["pv_acc"] == "fp32" and not c["persistent"] and not c["tma"]]
    assert [c["BLOCK_M"] for c in configs] == [16, 32, 64]
    return configs


def test_problem_syntax_round_trips_and_rejects_bad_text():
    tp = parse_problem("attention_fwd:bfloat16:4x32x1000x128:causal")
    assert tp.problem == AttentionProblem(4, 32, 32, 1000, 1000, 128, True, "bfloat16")
    assert parse_problem(tp.label()) == tp
    assert parse_problem("attention_fwd:float16:2x16x4096x256").problem.causal is False
    assert tp.key() == ProblemKey.make("attention_fwd", "bfloat16", {
        "head_dim": 128, "nq_bucket": 1024, "nk_bucket": 1024, "bh_bucket": 128, "causal": True})
    for bad, words in [("attention_fwd:float16:4x32x1000", "BxHxNxD"),
                       ("attention_fwd:float16:4x32x1000x128:causl", "causal"),
                       ("attention_fwd:float32:1x2x64x16", "dtype"),
                       ("attention_fwd:float16:1x2x64x12", "head dim"),
                       ("attention_fwd:float16:0x2x64x16", ">= 1")]:
        with pytest.raises(ValueError, match=words):
            parse_problem(bad)


def test_default_attention_set_is_the_benchmark_set():
    problems = default_problems(("attention_fwd",))
    assert len(problems) == 30  # 7 shapes x causal/not + ragged causal, x fp16/bf16
    labels = {p.label() for p in problems}
    assert "attention_fwd:bfloat16:4x32x1000x128:causal" in labels
    assert "attention_fwd:float16:4x32x1000x128" not in labels  # ragged: causal only
    assert "attention_fwd:float16:2x16x4096x256" in labels
    assert "attention_fwd:float16:2x32x16384x64:causal" in labels
    mixed = default_problems(("softmax", "attention_fwd"), dtypes=("float32", "float16"))
    assert {p.dtype for p in mixed if p.op == "attention_fwd"} == {"float16"}


@cpu_only
def test_gate_checks_sampled_rows_and_the_whole_output():
    from flashtune.reference import attention_ref

    p = AttentionProblem(1, 2, 2, 256, 256, 16, True, "float16")
    case = AttentionAdapter().make_case("attention_fwd", p, "cpu", 0)
    q, k, v, out = case.args[:4]
    assert case.out is out
    good = attention_ref(q, k, v, True)[0].to(torch.float16)
    assert case.gate.check(good) is None
    assert "wrong result" in case.gate.check((good.float() * 1.01).half())
    hole = good.clone()
    hole[0, 0, 1] = float("nan")  # row 1 is not sampled (rows every 4 of 256)
    assert "NaN" in case.gate.check(hole)


def test_gate_checks_every_batch_and_head():
    """Defect: the gate compared sampled rows of the first and the last (b, h) pair only, so an
    output wrong in the other heads passed and could be stored as a winner: batch and head
    program ids swapped (B = H: (0, 0) and (B-1, H-1) are their own swap), a middle head wrong
    (a GQA kv-head mapping bug shows there). Every pair's sampled rows are checked, output and
    LSE."""
    from flashtune.reference import attention_ref

    p = AttentionProblem(3, 3, 3, 32, 32, 16, False, "float16")
    case = AttentionAdapter().make_case("attention_fwd", p, "cpu", 0)
    q, k, v = case.args[:3]
    ref, ref_lse = attention_ref(q, k, v, False)
    good = ref.to(torch.float16)
    assert case.gate.check(good) is None
    swapped = good.transpose(0, 1).contiguous()  # right at (0, 0) and (2, 2) only
    assert case.gate.check(swapped).startswith("wrong result")
    middle = good.clone()
    middle[1, 1] = good[1, 2]  # a middle head reads another head's values
    assert case.gate.check(middle).startswith("wrong result")
    out, lse = case.recheck.args[3], case.recheck.args[4]
    out.copy_(good)
    lse.copy_(ref_lse)
    assert case.recheck.check() is None
    lse[1, 1] = ref_lse[1, 2]
    assert case.recheck.check().startswith("wrong result")

    gqa = AttentionProblem(2, 4, 2, 32, 32, 16, True, "float16")  # head h reads kv head h // 2
    case = AttentionAdapter().make_case("attention_fwd", gqa, "cpu", 0)
    q, k, v = case.args[:3]
    good = attention_ref(q, k, v, True)[0].to(torch.float16)
    assert case.gate.check(good) is None
    wrong_kv = attention_ref(q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1), True)[0]
    middle = good.clone()
    middle[0, 1:3] = wrong_kv[0, 1:3].to(torch.float16)  # h % Hkv mapping: wrong in heads 1, 2
    assert case.gate.check(middle).startswith("wrong result")


@cpu_only
def test_planted_wrong_variant_is_a_failed_trial():
    runner = LocalRunner(PlantedAttentionAdapter(wrong_block_m=(32,)), FAST)
    opts = TuneOptions(mode="grid", n_trials=3, top_k=2, retime_rounds=1)
    result = tune_problem(TINY, runner, device="cpu", options=opts, candidates=three_configs())
    by_m = {c["BLOCK_M"]: m for c, m in result.measured}
    assert sorted(by_m) == [16, 32, 64]
    assert by_m[32].status == "failed" and by_m[32].error.startswith("wrong result")
    assert by_m[16].ok and by_m[64].ok
    assert result.winner is not None and result.winner["BLOCK_M"] in (16, 64)


class PlantedLseAdapter(AttentionAdapter):
    """Configs with the chosen BLOCK_M write a wrong LSE (0.1 off); their output is right."""

    def __init__(self, wrong_block_m=()):
        self.wrong_block_m = tuple(wrong_block_m)

    def launch(self, op, config, case):
        super().launch(op, config, case)
        lse = case.args[4]
        if lse is not None and config["BLOCK_M"] in self.wrong_block_m:
            lse.add_(0.1)


def test_gate_checks_the_lse_of_sampled_rows_and_the_whole_lse():
    """The runtime runs a tuned config with return_lse=True too (a kernel specialization of
    its own, STORE_LSE); the finalists' re-check launches it and checks out and LSE."""
    from flashtune.reference import attention_ref

    p = AttentionProblem(1, 2, 2, 256, 200, 16, True, "float16")  # Nq > Nk: rows see no key
    case = AttentionAdapter().make_case("attention_fwd", p, "cpu", 0)
    q, k, v = case.args[:3]
    recheck = case.recheck
    out, lse = recheck.args[3], recheck.args[4]
    assert recheck.args[5:] == case.args[5:] and lse.shape == (1, 2, 256)
    ref, ref_lse = attention_ref(q, k, v, True)
    out.copy_(ref)
    lse.copy_(ref_lse)
    assert torch.isneginf(lse).any()
    assert recheck.check() is None
    lse[0, 1, -1] += 0.01  # the last rows are sampled
    assert recheck.check().startswith("wrong result")
    lse.copy_(ref_lse)
    lse[0, 0, 201] = float("nan")  # rows every 4 of 256 are sampled: 201 is not
    assert "NaN" in recheck.check()
    lse.copy_(ref_lse)
    out[0, 0, -1] += 1.0  # the output of the LSE launch is checked too
    assert recheck.check().startswith("wrong result")


@cpu_only
def test_planted_wrong_lse_is_refused_at_the_finalists_recheck():
    runner = LocalRunner(PlantedLseAdapter(wrong_block_m=(32,)), FAST)
    opts = TuneOptions(mode="grid", n_trials=3, top_k=3, retime_rounds=1)
    result = tune_problem(TINY, runner, device="cpu", options=opts, candidates=three_configs())
    finalists = {c["BLOCK_M"]: m for c, m in result.finalists}
    assert sorted(finalists) == [16, 32, 64]
    assert finalists[32].status == "failed" and finalists[32].error.startswith("wrong result")
    assert "LSE" in finalists[32].error
    assert finalists[16].ok and finalists[64].ok
    assert result.winner is not None and result.winner["BLOCK_M"] in (16, 64)


@cpu_only
def test_candidates_offer_interpreter_features_and_prune_shared_memory():
    kept, pruned = candidate_list(TINY.op, TINY.problem, None, "cpu")
    assert kept and not pruned
    assert any(c["tma"] for c in kept) or not family("attention_fwd").features("cpu")
    assert not any(c["warp_specialize"] for c in kept)
    limit = 16 * 1024
    small, dropped = candidate_list(TINY.op, TINY.problem, limit, "cpu")
    assert dropped and len(small) + len(dropped) == len(kept)
    assert all(attention_smem_bytes(c, 16) <= limit for c in small)
    assert all("shared memory" in why for _, why in dropped)


@cpu_only
def test_precompile_specs_match_the_worker_tensors():
    task = Task(TINY.op, TINY.problem, "cpu", 0)
    case = OpAdapter().make_case(task.op, task.problem, task.device, task.seed)
    specs = arg_specs(task)
    assert len(specs) == len(case.args)
    for spec, arg in zip(specs, case.args):
        if isinstance(arg, torch.Tensor):
            assert spec == ("t", tuple(arg.shape), arg.stride(), str(arg.dtype).split(".")[1])
        else:
            assert spec == ("v", arg)


@cpu_only
def test_session_tunes_attention_and_softmax_with_family_options(tmp_path):
    db = TuneDB(f"sqlite:///{tmp_path / 's.sqlite'}")
    problems = [TINY, parse_problem("softmax:float16:4x1000")]
    base = TuneOptions(n_trials=3, top_k=1, retime_rounds=1)
    opts = SessionOptions(tune=base, timing=FAST, isolate=False, progress=False,
                          family_tune={"attention": TuneOptions(n_trials=2, top_k=1, retime_rounds=1)})
    result = run_session(problems, db, opts, device="cpu")
    assert result.winners == 2
    assert [len(r.measured) for r in result.problems] == [2, 3]
    w = next(w for w in db.winners() if w.key.op == "attention_fwd")
    assert w.key == TINY.key() and w.trials == 2
    db.close()


def _env(tmp_path):
    env = dict(os.environ)
    env.update(FLASHTUNE_DB=f"sqlite:///{tmp_path / 'x.sqlite'}",
               FLASHTUNE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    env.pop("TRITON_INTERPRET", None)  # --interpret must set it by itself
    return env


@cpu_only
def test_cli_interpret_attention_writes_winner_rows(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "flashtune", "tune", "--interpret", "--quiet",
                           "--ops", "attention_fwd", "--trials", "3"],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "3/3 problems tuned" in proc.stdout and " s; " in proc.stdout
    with TuneDB(f"sqlite:///{tmp_path / 'x.sqlite'}") as db:
        winners = db.winners()
        assert len(winners) == 3 and {w.key.op for w in winners} == {"attention_fwd"}
        buckets = {tuple(sorted(w.key.bucket)) for w in winners}
        assert buckets == {tuple(sorted(p.key().bucket)) for p in
                           default_problems(("attention_fwd",), ("float16",), interpret=True)}
        assert all(w.trials == 3 and w.device.name == "triton-interpreter" for w in winners)
        assert all(len(db.trials(w.device, w.family_hash, w.key)) == 3 for w in winners)


def test_cli_rejects_bad_attention_problem(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "flashtune", "tune", "--interpret",
                           "--problem", "attention_fwd:float16:1x2x64"],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "BxHxNxD" in proc.stderr


@pytest.mark.gpu
def test_gpu_tunes_one_attention_problem_with_precompile(tmp_path):
    """On a GPU: the worker process, parallel precompile (shape-only stand-ins) and the gate."""
    from flashtune.tuner.precompile import Precompiler
    from flashtune.tuner.worker import ProcessRunner

    tp = parse_problem("attention_fwd:float16:4x32x1000x128:causal")
    db = TuneDB(f"sqlite:///{tmp_path / 'g.sqlite'}")
    opts = SessionOptions(tune=TuneOptions(n_trials=6, batch=6, top_k=2, retime_rounds=2),
                          timing=TimingOptions(rep_ms=20), progress=False, precompile_workers=4)
    result = run_session([tp], db, opts, device="cuda:0")
    r = result.problems[0]
    assert result.winners == 1, r.error
    assert len(r.measured) == 6, r.measured
    assert db.winner(result.device, db.winners()[0].family_hash, tp.key()) is not None
    db.close()
