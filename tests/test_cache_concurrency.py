"""Four processes writing to one database at once lose nothing and see no errors."""

from __future__ import annotations

import multiprocessing
import traceback

from flashtune.cache import TuneDB
from test_cache_support import DEV, FAMILY, KEY, db_url, key_for, row_config  # noqa: F401

PROCESSES = 4
DISTINCT = 100  # winners of distinct keys per process
SHARED = 40  # upserts per process on the one key every process writes
TRIALS = 40  # trials of distinct configs per process (shared key)
_WARPS = (1, 2, 4, 8, 16, 32)


def _shared_median(proc: int, i: int) -> float:
    # distinct per (proc, i); the global minimum is proc 3's last upsert
    return 10.0 - (i * PROCESSES + proc) * 0.01


def _trial_config(proc: int, i: int) -> dict:
    # 40 distinct (block, rows) tiles of at most 65536 elements; exp2 alternates by process, so
    # every config is written by two processes
    return row_config(block=32 << (i % 8), rows_per_program=1 << (i // 8), warps=1,
                      exp2=bool(proc % 2))


def _writer(url: str, proc: int, start, results) -> None:
    errors = []
    try:
        db = TuneDB(url, timeout=60)
        start.wait(60)  # all four hammer at the same moment
        for i in range(DISTINCT):
            try:
                db.upsert_winner(DEV, FAMILY, key_for(rows=1 + proc * 10_000 + i), row_config(),
                                 median_ms=1.0, p20_ms=1.0, p80_ms=1.0, trials=1)
                if i < SHARED:
                    ms = _shared_median(proc, i)
                    db.upsert_winner(DEV, FAMILY, KEY, row_config(warps=_WARPS[proc]),
                                     median_ms=ms, p20_ms=ms, p80_ms=ms, trials=i + 1)
                if i < TRIALS:
                    db.record_trial(DEV, FAMILY, KEY, _trial_config(proc, i), median_ms=1.0 + proc)
            except Exception:  # noqa: BLE001 - counted and reported, not raised
                errors.append(traceback.format_exc())
        db.close()
    except Exception:  # noqa: BLE001
        errors.append(traceback.format_exc())
    results.put((proc, errors))


def test_four_processes_write_at_once(db_url):
    # no TuneDB opened before: the four processes also race to create the tables
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(db_url, p, start, results)) for p in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    reports = dict(results.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    errors = [e for proc_errors in reports.values() for e in proc_errors]
    assert errors == [], errors[0]
    with TuneDB(db_url) as db:
        winners = db.winners()
        shared = db.winner(DEV, FAMILY, KEY)
        trials = db.trials(DEV, FAMILY, KEY)
    assert len(winners) == PROCESSES * DISTINCT + 1  # 0 lost rows
    assert shared.median_ms == min(_shared_median(p, i) for p in range(PROCESSES) for i in range(SHARED))
    assert shared.config == row_config(warps=_WARPS[PROCESSES - 1])
    # exp2 alternates between processes: two processes share each trial config, so half remain
    assert len(trials) == PROCESSES * TRIALS // 2


def test_tuners_opening_a_new_sqlite_file_together_all_succeed(tmp_path):
    """Two tuners started at once on a fresh database: switching it to WAL answers "locked" at
    once (no busy timeout) to the loser of the race; it must retry, not fail."""
    import threading

    failures = []
    for attempt in range(40):
        url = f"sqlite:///{tmp_path / f'fresh{attempt}.sqlite'}"
        gate = threading.Barrier(4)

        def open_it():
            gate.wait(10)
            try:
                with TuneDB(url, timeout=10):
                    pass
            except Exception as err:  # noqa: BLE001 - collected for the assert
                failures.append(repr(err))

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert failures == []
