"""How good and how fast is the tuner? One GPU run, about 6-8 minutes on an H100.

    python benchmarks/tuner_eval.py --out benchmarks/results/

1. Exhaustive: for each problem, every candidate of a deterministic subsample (--exhaustive-cap,
   the heuristic defaults always included; the full candidate count is reported too) is
   measured (compile, correctness gate, timing). Its fastest is "the exhaustive best".
2. Search quality: Optuna TPE is run (several seeds) over exactly that candidate set, answered
   from the measured table (an oracle: the same times the exhaustive sweep saw, so the numbers
   compare like with like and cost no GPU time). Reported: TPE's best after --trials, the trials
   it needed to come within 2% of the exhaustive best (goal: <= 25% of the exhaustive count),
   and the same for random search as the baseline.
3. Wall time of the default softmax tune (8 shapes x 3 dtypes, --tune-trials per problem).
4. Re-tunes: --retunes fresh tunes of one problem (same seed, fresh caches); same winner, or
   winners whose interleaved re-times are within the noise band.

Writes tuner_eval_<date>.json and .md (device, date, versions) to --out. --deadline caps the
whole run: each phase gets a share and stops early (reported) when it runs out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_PROBLEMS = "softmax:float16:16384x1024,softmax:float16:4096x50257,softmax:float32:16x1048576"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="benchmarks/results/")
    p.add_argument("--problems", default=DEFAULT_PROBLEMS, help="comma list of OP:DTYPE:RxC")
    p.add_argument("--exhaustive-cap", type=int, default=96)
    p.add_argument("--trials", type=int, default=24, help="TPE budget in the replay")
    p.add_argument("--seeds", type=int, default=5, help="TPE / random seeds in the replay")
    p.add_argument("--batch", type=int, default=4, help="proposals per TPE round (as the CLI)")
    p.add_argument("--tune-trials", type=int, default=12, help="trials per problem, default tune")
    p.add_argument("--tune-dtypes", default="float16,bfloat16,float32")
    p.add_argument("--skip-default-tune", action="store_true")
    p.add_argument("--retune-problem", default=None, help="default: the first problem")
    p.add_argument("--retunes", type=int, default=3)
    p.add_argument("--retune-trials", type=int, default=16)
    p.add_argument("--rep-ms", type=int, default=25, help="do_bench time per trial")
    p.add_argument("--precompile-workers", type=int, default=max(0, min(8, (os.cpu_count() or 2) - 2)))
    p.add_argument("--deadline", type=float, default=450.0, help="seconds for the whole script")
    p.add_argument("--device", default="cuda:0",
                   help="cuda:N; 'cpu' only for a dry run of this script under TRITON_INTERPRET=1")
    return p.parse_args(argv)


class OracleRunner:
    """Answers measure/retime from a table of measured configs (no GPU work)."""

    def __init__(self, table):
        self.table = table

    def setup(self, task):
        pass

    def measure(self, config):
        from flashtune.tuner.space import canonical

        return self.table[canonical(config)]

    def retime(self, configs, rounds):
        return [self.measure(c) for c in configs]

    def close(self):
        pass


def within(curve, target):
    for i, best in enumerate(curve):
        if best is not None and best <= target:
            return i + 1
    return None


def exhaustive(tp, runner, precompiler, args, budget_s, device):
    from flashtune.gen.softmax_space import fitting_configs
    from flashtune.tuner.session import max_shared_bytes
    from flashtune.tuner.study import TuneOptions, tune_problem

    full = sum(1 for _ in fitting_configs(tp.op, tp.problem))
    opts = TuneOptions(mode="grid", n_trials=args.exhaustive_cap + 2, grid_limit=args.exhaustive_cap,
                       time_budget_s=budget_s, top_k=1, retime_rounds=1, batch=8)
    r = tune_problem(tp, runner, device=device, options=opts, precompiler=precompiler,
                     max_shared_bytes=max_shared_bytes(device))
    return full, r


def replay_search(tp, measured, args, mode, seed, device, seed_defaults):
    from flashtune.gen import validate_config
    from flashtune.tuner.space import canonical
    from flashtune.tuner.study import TuneOptions, tune_problem

    table = {canonical(c): m for c, m in measured}
    configs = [validate_config(tp.op, c) for c, _ in measured]
    opts = TuneOptions(mode=mode, n_trials=min(args.trials * 4, len(configs)), patience=None,
                       time_budget_s=None, seed=seed, batch=args.batch, top_k=1, retime_rounds=1,
                       seed_defaults=seed_defaults)
    r = tune_problem(tp, OracleRunner(table), device=device, options=opts, candidates=configs,
                     study_name=f"replay-{mode}-{seed}")
    return r.best_curve


def main(argv=None) -> int:
    args = parse_args(argv)
    import optuna
    import torch
    import triton

    from flashtune.cache import TuneDB
    from flashtune.tuner.precompile import Precompiler
    from flashtune.tuner.problems import default_problems, parse_dtypes, parse_problem
    from flashtune.tuner.session import SessionOptions, run_session
    from flashtune.tuner.space import canonical
    from flashtune.tuner.study import TuneOptions
    from flashtune.tuner.timing import TimingOptions
    from flashtune.tuner.worker import ProcessRunner, Task

    from flashtune.gen.softmax_space import default_config

    interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if (args.device == "cpu") != interpret or (not interpret and not torch.cuda.is_available()):
        print("tuner_eval.py needs a CUDA GPU and TRITON_INTERPRET unset "
              "(or --device cpu with TRITON_INTERPRET=1 for a dry run)", file=sys.stderr)
        return 1
    device = args.device
    from flashtune.cache import DeviceInfo

    device_info = DeviceInfo.current(device)
    sm_count = device_info.sm_count
    t_start = time.monotonic()
    left = lambda: args.deadline - (time.monotonic() - t_start)  # noqa: E731
    problems = [parse_problem(t) for t in args.problems.split(",") if t.strip()]
    timing = TimingOptions(rep_ms=args.rep_ms, retime_rep_ms=max(args.rep_ms, 20))
    runner = ProcessRunner(None, timing, trial_timeout_s=120)
    precompiler = (Precompiler(args.precompile_workers, device)
                   if args.precompile_workers > 0 and device.startswith("cuda") else None)
    report = {
        "device": device_info.name, "date": dt.datetime.now().isoformat(timespec="seconds"),
        "torch": torch.__version__, "triton": triton.__version__, "optuna": optuna.__version__,
        "args": vars(args), "problems": [], "default_tune": None, "retunes": None,
    }
    try:
        # 1 + 2: exhaustive sweep, then TPE and random replays over the same table.
        for tp in problems:
            budget = max(20.0, 0.45 * args.deadline / len(problems))
            full, grid = exhaustive(tp, runner, precompiler, args, budget, device)
            ok = [(c, m) for c, m in grid.measured if m.ok]
            entry = {"problem": tp.label(), "full_candidates": full, "measured": len(grid.measured),
                     "failed": len(grid.measured) - len(ok), "grid_wall_s": round(grid.wall_s, 1),
                     "grid_stopped_by": grid.stopped_by,
                     "mean_first_launch_s": _mean([m.first_launch_s for _, m in grid.measured]),
                     "failures": sorted({(m.error or "")[:80] for _, m in grid.measured if not m.ok})[:5]}
            if not ok:
                report["problems"].append(entry)
                continue
            best_c, best_m = min(ok, key=lambda cm: cm[1].median_ms)
            target = best_m.median_ms * 1.02
            table = {canonical(c): m for c, m in grid.measured}
            default = table.get(canonical(default_config(tp.op, tp.problem, sm_count)))
            entry.update(exhaustive_best_ms=best_m.median_ms, exhaustive_best=best_c,
                         default_ms=default.median_ms if default is not None and default.ok else None)
            # tpe: the product (defaults first); the unseeded runs show what the search adds.
            for name, mode, seeded in (("tpe", "tpe", True), ("tpe_unseeded", "tpe", False),
                                       ("random_unseeded", "random", False)):
                runs = []
                for seed in range(args.seeds):
                    curve = replay_search(tp, grid.measured, args, mode, seed, device, seeded)
                    at_budget = curve[min(args.trials, len(curve)) - 1]
                    runs.append({"seed": seed, "trials_to_2pct": within(curve, target),
                                 "best_after_budget_ms": at_budget,
                                 "gap_after_budget_pct": None if at_budget is None else
                                 round(100 * (at_budget / best_m.median_ms - 1), 2)})
                needed = [r["trials_to_2pct"] or len(grid.measured) + 1 for r in runs]
                entry[name] = {"runs": runs, "median_trials_to_2pct": statistics.median(needed),
                               "goal_trials": 0.25 * len(ok),
                               "meets_goal": statistics.median(needed) <= 0.25 * len(ok)}
            report["problems"].append(entry)
            print(json.dumps(entry, default=str)[:400], flush=True)

        # 3: the default softmax tune.
        if not args.skip_default_tune and left() > 60:
            tune_set = default_problems(("softmax",), parse_dtypes(args.tune_dtypes),
                                        interpret=device == "cpu")
            with tempfile.TemporaryDirectory() as tmp:
                db = TuneDB(f"sqlite:///{tmp}/default.sqlite")
                opts = SessionOptions(tune=TuneOptions(n_trials=args.tune_trials, batch=args.batch,
                                                       patience=None),
                                      timing=timing, progress=False,
                                      total_budget_s=max(30.0, left() - 90))
                res = run_session(tune_set, db, opts, runner=runner, device=device,
                                  precompiler=precompiler)
                db.close()
            report["default_tune"] = {
                "problems": len(tune_set), "winners": res.winners, "wall_s": round(res.wall_s, 1),
                "trials_per_problem": args.tune_trials,
                "trials_total": sum(len(p.measured) for p in res.problems),
                "per_problem": [{"problem": p.label, "wall_s": round(p.wall_s, 1),
                                 "trials": len(p.measured), "stopped_by": p.stopped_by,
                                 "winner_ms": p.winner_ms.median_ms if p.winner_ms else None,
                                 "default_ms": _default_ms(p),
                                 "winner": p.winner} for p in res.problems]}
            print(json.dumps({k: v for k, v in report["default_tune"].items() if k != "per_problem"}), flush=True)

        # 4: re-tunes of one problem.
        tp = parse_problem(args.retune_problem) if args.retune_problem else problems[0]
        winners = []
        for i in range(args.retunes):
            if left() < 20:
                break
            with tempfile.TemporaryDirectory() as tmp:
                db = TuneDB(f"sqlite:///{tmp}/retune.sqlite")
                opts = SessionOptions(tune=TuneOptions(n_trials=args.retune_trials, batch=args.batch,
                                                       time_budget_s=max(10.0, left() / (args.retunes - i) - 5)),
                                      timing=timing, progress=False)
                res = run_session([tp], db, opts, runner=runner, device=device, precompiler=precompiler)
                db.close()
            p = res.problems[0]
            winners.append((p.winner, p.winner_ms.median_ms if p.winner_ms else None))
        distinct = []
        for w, _ in winners:
            if w is not None and canonical(w) not in {canonical(d) for d in distinct}:
                distinct.append(w)
        cross = None
        if len(distinct) > 1:
            runner.setup(Task(tp.op, tp.problem, device, 0))
            times = [m.median_ms for m in runner.retime(distinct, 7) if m.ok]
            cross = {"winners_ms": times, "spread_pct": round(100 * (max(times) / min(times) - 1), 2)
                     if times else None}
        report["retunes"] = {
            "problem": tp.label(), "runs": [{"winner": w, "ms": ms} for w, ms in winners],
            "same_winner": len(distinct) == 1, "distinct_winners": len(distinct),
            "cross_retime": cross,
            "within_noise_band": len(distinct) == 1 or bool(cross and cross["spread_pct"] is not None
                                                             and cross["spread_pct"] <= 1.5)}
        print(json.dumps(report["retunes"], default=str), flush=True)
    finally:
        runner.close()
        if precompiler is not None:
            precompiler.close()
    report["wall_s"] = round(time.monotonic() - t_start, 1)
    report["worker_restarts"] = runner.restarts
    write(report, Path(args.out))
    return 0


def _mean(values):
    values = [v for v in values if v is not None]
    return round(statistics.mean(values), 3) if values else None


def _default_ms(p):
    # The heuristic default is enqueued first, so the first measured trial is the default.
    return p.measured[0][1].median_ms if p.measured and p.measured[0][1].ok else None


def write(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stamp = report["date"].replace(":", "").replace("-", "")
    (out / f"tuner_eval_{stamp}.json").write_text(json.dumps(report, indent=2, default=str))
    lines = [f"# Tuner evaluation - {report['device']}, {report['date']}", "",
             f"torch {report['torch']}, triton {report['triton']}, optuna {report['optuna']}; "
             f"script wall time {report['wall_s']} s; worker restarts {report['worker_restarts']}", "",
             "Trials to 2%: median over seeds of the trials until the best is within 2% of the "
             "exhaustive best (TPE starts from the heuristic defaults; the unseeded columns start "
             "from nothing). Gap: TPE's best after --trials vs the exhaustive best.", "",
             "| problem | candidates (measured / full) | exhaustive best ms | default ms | "
             "TPE trials to 2% | goal (25%) | TPE unseeded | random unseeded | TPE gap after budget % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in report["problems"]:
        if "tpe" not in e:
            lines.append(f"| {e['problem']} | {e['measured']} / {e['full_candidates']} | no passing config | | | | | | |")
            continue
        gaps = [r["gap_after_budget_pct"] for r in e["tpe"]["runs"] if r["gap_after_budget_pct"] is not None]
        lines.append(
            f"| {e['problem']} | {e['measured']} / {e['full_candidates']} | {e['exhaustive_best_ms']:.4f} | "
            f"{_fmt(e.get('default_ms'))} | {e['tpe']['median_trials_to_2pct']} | "
            f"{e['tpe']['goal_trials']:.0f} ({'met' if e['tpe']['meets_goal'] else 'missed'}) | "
            f"{e['tpe_unseeded']['median_trials_to_2pct']} | {e['random_unseeded']['median_trials_to_2pct']} | "
            f"{_fmt(statistics.median(gaps) if gaps else None, 2)} |")
    d = report.get("default_tune")
    if d:
        lines += ["", f"Default softmax tune: {d['problems']} problems, {d['trials_per_problem']} trials "
                      f"each ({d['trials_total']} measured), {d['winners']} winners, wall {d['wall_s']} s.", "",
                  "| problem | wall s | trials | default ms | winner ms | stopped by |", "|---|---|---|---|---|---|"]
        for p in d["per_problem"]:
            lines.append(f"| {p['problem']} | {p['wall_s']} | {p['trials']} | {_fmt(p['default_ms'])} | "
                         f"{_fmt(p['winner_ms'])} | {p['stopped_by']} |")
    r = report.get("retunes")
    if r:
        lines += ["", f"Re-tunes of {r['problem']}: {len(r['runs'])} runs, distinct winners "
                      f"{r['distinct_winners']}, same winner: {r['same_winner']}, within noise band: "
                      f"{r['within_noise_band']}" + (f" (cross re-time spread {r['cross_retime']['spread_pct']}%)"
                                                     if r.get("cross_retime") else "")]
    (out / f"tuner_eval_{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _fmt(v, digits=4):
    return "-" if v is None else f"{v:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
