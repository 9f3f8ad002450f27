"""Session 40: where a --total-time run's wall time goes, phase by phase (GPU).

Wraps the tuner's phases (listing candidates, worker setup, each trial, the finish's re-check
and re-timing) with wall-clock timers and runs one `flashtune tune`-like session.
Usage: PRECOMPILE=N python tune_phases.py TOTAL_S PROBLEM [PROBLEM...]
Session 40: the total counts from this script's start (started_at), as the CLI's does now, and
the precompile pool is the CLI's (8 processes on a 16-core host; PRECOMPILE=0 turns it off).
"""
import os
import sys
import time
import functools

T0 = time.monotonic()


def stamp(name, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            print(f"[{start - T0:7.2f} s] {name}: {time.monotonic() - start:.2f} s", flush=True)
    return timed


def main():
    total, texts = float(sys.argv[1]), sys.argv[2:]
    from flashtune.cache import TuneDB
    from flashtune.tuner import families, study, worker
    from flashtune.tuner.problems import parse_problem
    from flashtune.tuner.session import SessionOptions, run_session
    from flashtune.tuner.study import TuneOptions

    print(f"[{time.monotonic() - T0:7.2f} s] imports done", flush=True)
    fam = families.family("softmax")
    cls = fam if isinstance(fam, type) else type(fam)
    cls.candidates = staticmethod(stamp("list candidates", cls.candidates))
    worker.ProcessRunner.setup = stamp("worker setup", worker.ProcessRunner.setup)
    worker.ProcessRunner.start_early = stamp("worker start_early", worker.ProcessRunner.start_early)
    worker.LocalRunner.setup = stamp("(in the worker) setup", worker.LocalRunner.setup)
    worker.ProcessRunner.measure = stamp("trial", worker.ProcessRunner.measure)
    worker.ProcessRunner.retime = stamp("finish: re-check + re-time", worker.ProcessRunner.retime)
    study._finish = stamp("finish (all)", study._finish)
    db = TuneDB(f"sqlite:////tmp/phases_{time.time_ns()}.sqlite")
    opts = SessionOptions(tune=TuneOptions(), total_budget_s=total, progress=False,
                          precompile_workers=int(os.environ.get("PRECOMPILE", "8")),
                          started_at=T0)
    start = time.monotonic()
    result = run_session([parse_problem(t) for t in texts], db, opts, device="cuda:0")
    print(f"session {time.monotonic() - start:.1f} s for --total-time {total:g}")
    for p in result.problems:
        print(f"  {p.label}: search {p.search_s:.1f} s, wall {p.wall_s:.1f} s, "
              f"{len(p.measured)} trials, {len(p.finalists)} finalists, {p.stopped_by or p.error}")


if __name__ == "__main__":
    main()
