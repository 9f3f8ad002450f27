"""Adversarial checks of ``flashtune tune`` and ``flashtune bench``/``report``: nothing lost.

Ctrl-C or SIGTERM in the middle of a multi-problem tune keeps the finished winners and the
measured trials, exits promptly with a summary (no traceback) and leaves no worker behind; a
problem whose every candidate fails does not stop the others; two tuners share one SQLite
file; a damaged bench JSON is named, not a KeyError; bench measurements survive an interrupt
and an output folder that cannot take them.

The candidate list is cut to five small configs, so each trial is cheap; everything else is
the real pipeline.
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from flashtune.cache import TuneDB
from flashtune.cli import main
from flashtune.tuner.families import SoftmaxFamily
from flashtune.tuner.problems import parse_problem
from flashtune.tuner.session import SessionOptions, run_session
from flashtune.tuner.study import TuneOptions
from flashtune.tuner.worker import Measurement, ProcessRunner

from cli_helpers import bench_result

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter tests")

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ["softmax:float32:8x100", "softmax:float16:8x100", "softmax:bfloat16:8x100"]

# Run in a child: five candidates per problem, a marker file once the 2nd problem has measured a
# trial (so the test signals mid-problem, not at a guessed time; the child then waits for the
# signal, so the trials kept do not depend on timing), then the real CLI.
DRIVER = r"""
import signal
import sys
import time
from pathlib import Path

# Ctrl-C as a terminal's foreground process gets it. A shell starts background jobs (a CI
# script run with `&`, nohup) with SIGINT ignored, the child inherits that, and Python then
# installs no KeyboardInterrupt handler: the signal would be lost and the test would hang.
signal.signal(signal.SIGINT, signal.default_int_handler)
from flashtune.gen.softmax_space import OPS
from flashtune.tuner import families, session

def five(op, problem, device, max_shared_bytes):
    space = OPS[op].space
    return [space.complete(dict(regime="row", block=128, rows_per_program=4, num_warps=w,
                                exp2=True)) for w in (1, 2, 4, 8, 16)], []

families.SoftmaxFamily.candidates = staticmethod(five)
marker, seen = Path(sys.argv[1]), [0]
record = session._Recorder.trial

def trial(self, config, m):
    record(self, config, m)
    seen[0] += 1
    if seen[0] == int(sys.argv[2]):
        marker.write_text("mid-problem")
        time.sleep(60)  # wait here for the test's signal: no trial races past it

session._Recorder.trial = trial
from flashtune.cli import main
sys.exit(main(sys.argv[3:]))
"""


def five_candidates(op, problem, device, max_shared_bytes):
    from flashtune.gen.softmax_space import OPS

    space = OPS[op].space
    return [space.complete(dict(regime="row", block=128, rows_per_program=4, num_warps=w,
                                exp2=True)) for w in (1, 2, 4, 8, 16)], []


def _group_alive(pgid: int) -> list[str]:
    """Processes of the group that are still running (zombies are dead: reaping is init's job)."""
    ps = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-g", str(pgid)], capture_output=True,
                        text=True)
    return [line for line in ps.stdout.splitlines() if line.split()[1][0] != "Z"]


def _tune_until_mid_problem(tmp_path, trials_before_signal: int):
    db = tmp_path / "t.sqlite"
    marker = tmp_path / "marker"
    env = dict(os.environ, FLASHTUNE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TRITON_INTERPRET", None)  # --interpret sets it
    args = ["tune", "--interpret", "--db", f"sqlite:///{db}", "--trials", "3", "--top-k", "1",
            "--mode", "grid", "--trial-timeout", "inf"]  # inf: no limit (was an OverflowError)
    for text in PROBLEMS:
        args += ["--problem", text]
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(marker), str(trials_before_signal),
                             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"tune ended before the 2nd problem: {proc.communicate()}")
        time.sleep(0.05)
    return proc, db


@pytest.mark.parametrize("sig, to_group, code, name, times", [
    (signal.SIGINT, True, 130, "Ctrl-C", 1),      # a terminal's Ctrl-C reaches the worker too
    (signal.SIGTERM, False, 143, "SIGTERM", 1),   # kill PID: the parent must stop its worker
    # Defect: a second signal while the run stopped landed in its cleanup: the summary of what
    # was kept was lost (and SIGTERM's status: 130), three Ctrl-C gave a traceback.
    (signal.SIGINT, True, 130, "Ctrl-C", 3),
    (signal.SIGTERM, False, 143, "SIGTERM", 2),
])
def test_interrupt_keeps_finished_winners_and_trials_and_leaves_no_worker(tmp_path, sig, to_group,
                                                                          code, name, times):
    proc, db_path = _tune_until_mid_problem(tmp_path, trials_before_signal=4)
    t0 = time.monotonic()
    for i in range(times):
        if i:
            time.sleep(0.05)
        if proc.poll() is None:
            (os.killpg if to_group else os.kill)(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == code, err
    assert took < 15, f"exit took {took:.1f} s"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert f"interrupted ({name})" in err
    assert "1 of the 1 finished problem(s) have their winner stored" in err
    assert re.search(r"softmax:float16:8x100: [12] measured trial\(s\) kept, no winner", err)
    assert "not started: softmax:bfloat16:8x100" in err
    time.sleep(0.5)
    assert _group_alive(proc.pid) == [], "a worker process outlived the tune"

    db = TuneDB(f"sqlite:///{db_path}")
    try:
        winners = db.winners()
        assert [(w.key.dtype, w.trials) for w in winners] == [("float32", 3)]
        w = winners[0]
        from flashtune.cache import ProblemKey
        from flashtune.gen.softmax_space import SoftmaxProblem, problem_bucket

        # 8x100 in fp16 has rows of grain 4 (100 columns are not whole 16-byte vectors) while in
        # fp32 it does not: the two problems' buckets differ.
        half = ProblemKey.make("softmax", "float16",
                               problem_bucket(SoftmaxProblem(8, 100, "float16")))
        kept = db.trials(w.device, w.family_hash, half)
        assert len(kept) >= 1 and all(t.status == "ok" for t in kept)  # none marked failed
    finally:
        db.close()


HANGING_PARENT = r"""
import sys
from flashtune.gen.softmax_space import OPS, SoftmaxProblem
from flashtune.tuner.precompile import Precompiler
from flashtune.tuner.worker import ProcessRunner, Task
from tuner_planted import HangingAdapter, hang

if sys.argv[2] == "pool":  # a compile process of --precompile-workers
    Precompiler(1, "cpu")._ensure_pool().apply_async(hang, (sys.argv[1],)).get()
runner = ProcessRunner(HangingAdapter(sys.argv[1]), trial_timeout_s=600)
runner.setup(Task("softmax", SoftmaxProblem(8, 100, "float32"), "cpu"))
print(runner.measure(OPS["softmax"].space.complete(dict(regime="row", block=128,
                                                        rows_per_program=4, num_warps=1))))
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("child", ["worker", "pool"])
def test_a_child_in_a_hung_trial_or_compile_does_not_outlive_a_killed_tune(tmp_path, child):
    # kill -9 of a tune that looks stuck (the OOM killer, a scheduler's hard stop): its worker,
    # in a trial that never ends, was left running for ever (on a GPU, holding the device).
    pid_file = tmp_path / "worker.pid"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    parent = subprocess.Popen([sys.executable, "-c", HANGING_PARENT, str(pid_file), child], env=env)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()):
            assert parent.poll() is None and time.monotonic() < deadline, "no trial started"
            time.sleep(0.05)
        worker = int(pid_file.read_text())
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = _running(worker)
        if alive:
            os.kill(worker, signal.SIGKILL)
        assert not alive, f"the {child} process outlived its killed parent"
    finally:
        parent.kill()


def _fast_candidates(monkeypatch):
    monkeypatch.setattr(SoftmaxFamily, "candidates", staticmethod(five_candidates))


def test_problem_whose_every_candidate_fails_is_named_and_the_others_still_win(
        tmp_path, monkeypatch, capsys):
    from flashtune.tuner.adapter import SoftmaxAdapter

    _fast_candidates(monkeypatch)
    real = SoftmaxAdapter.launch

    def launch(self, op, config, case):
        if case.out.dtype == torch.float16:
            raise RuntimeError("planted: every float16 variant fails")
        real(self, op, config, case)

    monkeypatch.setattr(SoftmaxAdapter, "launch", launch)
    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    args = ["tune", "--interpret", "--no-isolate", "--quiet", "--db", url, "--trials", "3",
            "--top-k", "1"]
    for text in PROBLEMS:
        args += ["--problem", text]
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 1
    assert "2/3 problems tuned" in out
    assert "no winner for softmax:float16:8x100: no candidate passed" in err
    with TuneDB(url) as db:
        assert sorted(w.key.dtype for w in db.winners()) == ["bfloat16", "float32"]
        w = db.winners()[0]
        from flashtune.cache import ProblemKey
        from flashtune.gen.softmax_space import SoftmaxProblem, problem_bucket

        # 8x100 in fp16 has rows of grain 4 (100 columns are not whole 16-byte vectors) while in
        # fp32 it does not: the two problems' buckets differ.
        half = ProblemKey.make("softmax", "float16",
                               problem_bucket(SoftmaxProblem(8, 100, "float16")))
        failed = db.trials(w.device, w.family_hash, half)
        assert len(failed) == 3 and all("planted" in t.error for t in failed)


def test_a_problem_whose_every_trial_failed_says_why(tmp_path, monkeypatch, capsys):
    # Was: "no winner for ...: no candidate passed (every measured config failed)" and nothing
    # more, whatever the cause (every trial past --trial-timeout, a Triton that compiles no
    # variant): the reason was only in the database's trial rows.
    from flashtune.tuner.adapter import SoftmaxAdapter

    _fast_candidates(monkeypatch)

    def launch(self, op, config, case):
        raise RuntimeError(f"planted: cannot launch\nwith num_warps={config['num_warps']}")

    monkeypatch.setattr(SoftmaxAdapter, "launch", launch)
    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    rc = main(["tune", "--interpret", "--no-isolate", "--quiet", "--db", url, "--trials", "3",
               "--problem", PROBLEMS[0]])
    out, err = capsys.readouterr()
    assert rc == 1
    assert (f"no winner for {PROBLEMS[0]}: no candidate passed (3 of 3 measured configs "
            "failed: launch error: RuntimeError: planted: cannot launch)") in err, err


def test_a_tune_weighs_the_stored_winner_on_its_shape_and_stores_its_own_pick(
        tmp_path, monkeypatch, capsys):
    # Was: the stored winner of an earlier run stayed when its median was faster ("the stored
    # winner of an earlier run is faster (1e-06 ms) and stays"), a median that may come from
    # another shape of the bucket. Now the stored config is measured on this shape among the
    # candidates, and this run's pick (which beat it here) is stored.
    from flashtune.cache import DeviceInfo
    from flashtune.gen import template_family_hash
    from flashtune.tuner.space import canonical

    _fast_candidates(monkeypatch)
    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    tp = parse_problem(PROBLEMS[0])
    earlier, _ = five_candidates(tp.op, tp.problem, "cpu", None)
    device, family = DeviceInfo.current("cpu"), template_family_hash(tp.op)
    with TuneDB(url) as db:
        assert db.upsert_winner(device, family, tp.key(), earlier[-1], median_ms=1e-6,
                                p20_ms=1e-6, p80_ms=1e-6, trials=1)
    rc = main(["tune", "--interpret", "--no-isolate", "--db", url, "--trials", "2", "--top-k",
               "1", "--problem", PROBLEMS[0]])
    out, err = capsys.readouterr()
    assert rc == 0
    assert "1/1 problems tuned" in out and "1 winner(s) stored" in out
    assert "stays" not in out + err
    with TuneDB(url) as db:
        [winner] = db.winners()
        measured = {canonical(t.config) for t in db.trials(device, family, tp.key())}
    assert canonical(earlier[-1]) in measured  # weighed on this shape
    assert winner.median_ms > 1e-6 and canonical(winner.config) in measured


class TableRunner:
    """Answers from a table: the session's database writes without kernels."""

    def setup(self, task):
        self.dtype = task.problem.dtype

    def measure(self, config):
        time.sleep(0.001)
        t = 1.0 + config["num_warps"] / 100
        return Measurement("ok", t, t, t)

    def retime(self, configs, rounds):
        return [self.measure(c) for c in configs]


@pytest.mark.parametrize("where", ["storing the winner", "between problems"])
def test_interrupt_summary_is_right_at_the_edges_of_a_problem(tmp_path, monkeypatch, where):
    """Ctrl-C while problem 0's winner is written, or just after problem 0 is done: the
    summary lists each problem once, and problem 1 as not started."""
    from flashtune.tuner import session
    from flashtune.tuner.session import TuneInterrupted

    _fast_candidates(monkeypatch)
    problems = [parse_problem(f"softmax:float32:8x{c}") for c in (100, 300, 700)]
    labels = [tp.label() for tp in problems]

    def interrupt(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(session._Recorder if where == "storing the winner" else session,
                        "winner" if where == "storing the winner" else "_summary", interrupt)
    opts = SessionOptions(tune=TuneOptions(mode="grid", n_trials=3, top_k=1, retime_rounds=1),
                          progress=False)
    with TuneDB(f"sqlite:///{tmp_path / 't.sqlite'}") as db, \
            pytest.raises(TuneInterrupted) as caught:
        run_session(problems, db, opts, runner=TableRunner(), device="cpu")
    done = caught.value.result.problems
    assert [r.label for r in done] == labels[:1]
    assert caught.value.not_started == labels[1:]
    if where == "storing the winner":
        assert caught.value.interrupted == labels[0] and "being stored" in done[0].error
    else:
        assert caught.value.interrupted is None and done[0].winner is not None


def test_two_tuners_on_one_sqlite_file_both_finish_and_no_winner_is_lost(tmp_path, monkeypatch):
    _fast_candidates(monkeypatch)
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    problems = [parse_problem(f"softmax:{dt}:8x{c}") for dt in ("float32", "float16")
                for c in (100, 300, 700)]
    opts = SessionOptions(tune=TuneOptions(mode="grid", n_trials=5, top_k=2, retime_rounds=1),
                          progress=False)
    errors, results = [], []

    def one(seed):
        try:
            with TuneDB(url) as db:
                results.append(run_session(problems, db, opts, runner=TableRunner(), device="cpu"))
        except BaseException as err:  # noqa: BLE001 - reported by the assert below
            errors.append(err)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert [r.winners for r in results] == [6, 6]
    with TuneDB(url) as db:
        winners = db.winners()
        assert len(winners) == 6 and all(w.config["num_warps"] == 1 for w in winners)
        assert all(len(db.trials(w.device, w.family_hash, w.key)) == 5 for w in winners)


def test_endless_waits_do_not_overflow_and_nan_timeouts_are_refused():
    from flashtune.tuner.worker import MAX_WAIT_S, wait_limit

    assert wait_limit(float("inf")) is None and wait_limit(1e300) is None
    assert wait_limit(MAX_WAIT_S) is None and wait_limit(2.5) == 2.5
    with pytest.raises(ValueError):
        ProcessRunner(trial_timeout_s=float("nan"))


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_bad_budgets_are_refused_before_any_work(tmp_path, value, capsys):
    for argv in (["tune", "--interpret", "--time-budget", value],
                 ["tune", "--interpret", "--total-time", value]):
        with pytest.raises(SystemExit) as stop:
            main(argv + ["--db", f"sqlite:///{tmp_path / 'x.sqlite'}"])
        assert stop.value.code == 2
    assert main(["bench", "--interpret", "--budget", value, "--out", str(tmp_path / "b")]) == 2
    assert "--budget must be > 0" in capsys.readouterr().err


# -- report: a damaged JSON is named, not a traceback -----------------------------------------

def _report(tmp_path, data, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    rc = main(["report", str(path), "--out", str(tmp_path / "out")])
    return rc, capsys.readouterr()


def test_report_renders_the_reference_result(tmp_path, capsys):
    rc, captured = _report(tmp_path, bench_result(), capsys)
    assert rc == 0, captured.err
    assert (tmp_path / "out" / "flashtune_bench.md").exists()


def test_report_of_a_result_without_measurements_says_there_is_nothing_to_report(tmp_path,
                                                                                  capsys):
    # Defect (audit): a result with no case in it (no softmax, backward or attention row)
    # printed an empty summary, and wrote a report of nothing whose notes said "every
    # implementation ran and passed its check in every case".
    data = dict(bench_result(), softmax=[], backward=[], attention=[])
    rc, captured = _report(tmp_path, data, capsys)
    assert rc == 0, captured.err
    lines = [line for line in captured.out.splitlines() if line.strip()]
    assert len(lines) == 1 and "r.json" in lines[0] and "nothing to report" in lines[0], lines
    assert not (tmp_path / "out").exists()  # nothing written (an earlier report there stays)


@pytest.mark.parametrize("damage, words", [
    (lambda d: d["softmax"][0].pop("gbs"), "softmax row 0 (flashtune 4x128 float16): missing key 'gbs'"),
    (lambda d: d["softmax"][1].pop("impl"), "softmax row 1: missing key 'impl'"),
    (lambda d: d["attention"][0].pop("causal"), "attention row 0: missing key 'causal'"),
    (lambda d: d["attention"][0].pop("D"), "attention row 0: missing key 'D'"),
    (lambda d: d["softmax"].__setitem__(0, "row"), "softmax row 0: must be an object"),
    (lambda d: d["softmax"][0].__setitem__("speedup", None), "'speedup' must be dict"),
    (lambda d: d["softmax"][0].__setitem__("gbs", "fast"), "'gbs' must be int/float"),
    (lambda d: d.__setitem__("copy", None), "'copy' must be dict"),
    (lambda d: d["meta"].__setitem__("wall_s", "3 s"), "'wall_s' must be int/float"),
    (lambda d: d["tuning"]["problems"][0].pop("trials"), "tuning problem 0: missing key 'trials'"),
    (lambda d: d.__setitem__("overhead", {"results": []}), "overhead: missing key 'shape'"),
])
def test_report_names_the_damaged_part_of_the_json(tmp_path, capsys, damage, words):
    data = copy.deepcopy(bench_result())
    damage(data)
    rc, captured = _report(tmp_path, data, capsys)
    assert rc == 2
    assert "r.json" in captured.err and words in captured.err, captured.err


def test_report_on_a_binary_file_names_it(tmp_path, capsys):
    path = tmp_path / "junk.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["report", str(path)]) == 2
    assert "junk.json: not JSON" in capsys.readouterr().err


# -- bench: measurements survive -----------------------------------------------------------

def test_bench_results_survive_an_output_folder_that_fails_at_the_end(tmp_path):
    from flashtune.bench.runner import save_outputs

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError) as err:
        save_outputs(bench_result(), blocker / "out", lambda line: None)
    text = str(err.value)
    assert "could not write the report" in text and "flashtune report" in text
    spare = Path(text.split("saved in ")[1].split(":")[0])
    try:
        assert json.loads(spare.read_text())["softmax"] == bench_result()["softmax"]
    finally:
        spare.unlink()


def test_bench_interrupted_mid_run_writes_the_cases_finished(tmp_path, monkeypatch):
    import flashtune.dispatch as dispatch
    from flashtune.bench.report import load_result
    from flashtune.bench.runner import BenchOptions, run_bench

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{tmp_path / 'none.sqlite'}")
    fired = []

    def log(line):
        if line.startswith("softmax ") and not fired:  # the first case is done: Ctrl-C
            fired.append(line)
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt) as stop:
            run_bench(BenchOptions(out=tmp_path / "out", mode="interpret", ops=("softmax",),
                                   overhead=False, log=log))
    finally:
        dispatch.reset()
    assert stop.value.saved_in == tmp_path / "out"
    result = load_result(tmp_path / "out" / "flashtune_bench.json")
    assert result["meta"]["interrupted"] is True
    assert len(result["softmax"]) >= 1 and result["softmax"][0]["impl"] == "flashtune"
    assert "Interrupted" in (tmp_path / "out" / "flashtune_bench.md").read_text()


def test_bench_interrupted_before_any_case_leaves_an_earlier_result_alone(tmp_path, monkeypatch):
    from flashtune.bench.runner import BenchOptions, run_bench

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "out"
    out.mkdir()
    earlier = out / "flashtune_bench.json"
    earlier.write_text('{"an": "earlier complete run"}\n')

    def log(line):
        if line.startswith("copy bandwidth"):  # before the first case
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as stop:
        run_bench(BenchOptions(out=out, mode="interpret", ops=("softmax",), overhead=False,
                               log=log))
    assert not hasattr(stop.value, "saved_in")
    assert earlier.read_text() == '{"an": "earlier complete run"}\n'
