"""``flashtune tune``: find the fastest correct variant of each problem on this GPU; cache it.

Without --problem, tunes the default set: the benchmark softmax shapes (65536x128 ...
4096x50257) for float16, bfloat16 and float32, and the benchmark attention shapes (D=64 and
128 at N=1024, 4096, 16384; D=256 at N=4096; the ragged 4x32x1000x128 causal) for float16
and bfloat16, causal and not: 30 attention problems. --ops picks the ops (softmax,
log_softmax, softmax_backward, log_softmax_backward, attention_fwd). Every measured config and
each winner go to the cache ($FLASHTUNE_DB, or --db).

Trials per problem default to 24 for the softmax family and 12 for attention (its compiles
are slower); --trials sets both.

--problem syntax: OP:DTYPE:ROWSxCOLS for the softmax family, attention_fwd:DTYPE:BxHxNxD[:causal]
for attention (batch, heads, sequence length of queries and keys, head dim).

--interpret runs the whole pipeline on the CPU under the Triton interpreter on tiny problems
(softmax 8x100, 4x1000; with --ops attention_fwd: 1x2x64x16 and 1x3x40x16 causal), with few trials
and perf_counter timings: a smoke test of the tuner, not a tune. Its default --ops is softmax.

Examples:
  flashtune tune
  flashtune tune --ops attention_fwd --trials 6
  flashtune tune --ops softmax,log_softmax,softmax_backward --trials 64
  flashtune tune --problem softmax:float16:4096x50257 --problem attention_fwd:bfloat16:4x32x1000x128:causal
  flashtune tune --interpret --ops softmax,attention_fwd
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path

from ..paths import expand_home
from .options import add_db_option, ascii_float, ascii_int, check_writable_db


def _positive_int(text: str) -> int:
    value = ascii_int(text, "an integer >= 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _count(text: str) -> int:
    return ascii_int(text, "an integer >= 0")


def _positive_float(text: str) -> float:
    value = ascii_float(text, "a number > 0")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _seed(text: str) -> int:
    value = ascii_int(text, "an integer in [0, 2**63)")
    if not 0 <= value < 2**63:  # torch.Generator.manual_seed takes a 64-bit value
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**63), got {text!r}")
    return value


def register(sub) -> None:
    p = sub.add_parser("tune", help="tune kernels for this GPU and store the winners",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_argument_group("what to tune")
    what.add_argument("--problem", action="append", default=[], metavar="OP:DTYPE:SHAPE",
                      help="a problem, e.g. softmax:float16:4096x50257 or "
                           "attention_fwd:float16:4x32x1000x128:causal (repeatable; replaces the default set)")
    what.add_argument("--ops", default=None,
                      help="comma list of ops for the default set (softmax, log_softmax, "
                           "softmax_backward, log_softmax_backward, attention_fwd); default "
                           "softmax,attention_fwd (softmax with --interpret)")
    what.add_argument("--dtypes", default=None, help="comma list of dtypes for the default set "
                      "(default float16,bfloat16,float32; float32,float16 with --interpret)")
    what.add_argument("--interpret", action="store_true",
                      help="run on the CPU under the Triton interpreter (tiny problems, few trials)")
    how = p.add_argument_group("search")
    how.add_argument("--mode", choices=("tpe", "grid", "random"), default="tpe",
                     help="tpe (default), grid (every candidate: measures the tuner) or random")
    how.add_argument("--trials", type=_positive_int, default=None,
                     help="measured configs per problem (default 24 softmax, 12 attention; "
                          "6 and 4 with --interpret)")
    how.add_argument("--time-budget", type=_positive_float, default=None, metavar="S",
                     help="seconds per problem (default 300; 60 with --interpret)")
    how.add_argument("--total-time", type=_positive_float, default=None, metavar="S",
                     help="seconds for the whole run, shared fairly by the problems (re-timing "
                          "and setup included); problems it leaves no time for are reported "
                          "untuned")
    how.add_argument("--patience", type=_positive_int, default=None,
                     help="stop a problem after this many trials without a gain (default 12; off "
                          "with --interpret)")
    how.add_argument("--grid-limit", type=_positive_int, default=None,
                     help="grid mode: measure a deterministic subsample of this size")
    how.add_argument("--seed", type=_seed, default=0, help="sampler and input seed (default 0)")
    how.add_argument("--top-k", type=_positive_int, default=None, help="finalists re-timed (default 4 softmax, min(4, max(2, trials // 3)) "
                          "attention; 2 with --interpret)")
    how.add_argument("--batch", type=_positive_int, default=None,
                     help="proposals compiled in parallel per round (default on a GPU: 4 softmax, "
                          "min(trials, 6) attention; 1 interpreted)")
    run_ = p.add_argument_group("execution")
    run_.add_argument("--precompile-workers", type=_count, default=None,
                      help="compile processes, at most the CPU count (default min(8, CPUs - 2) on "
                           "a GPU; 0 disables; no effect with --interpret)")
    # default None: 120 s, but a value given beside --no-isolate is noted (see run())
    run_.add_argument("--trial-timeout", type=_positive_float, default=None, metavar="S",
                      help="seconds before a trial counts as hung and its worker is restarted "
                           "(default 120; with --no-isolate no trial can be stopped)")
    run_.add_argument("--no-isolate", action="store_true",
                      help="measure in this process (faster start; a faulting kernel ends the run)")
    run_.add_argument("--rep-ms", type=_positive_int, default=None,
                      help="do_bench measuring time per trial in ms (default 50)")
    run_.add_argument("--journal", default=None, metavar="PATH|URL",
                      help="Optuna storage: a journal file (resumable; shareable by processes) "
                           "or an RDB URL; default in memory")
    add_db_option(run_)
    run_.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(run=run)


def _options(args, interpret: bool):
    import dataclasses

    from ..tuner.session import SessionOptions
    from ..tuner.study import TuneOptions
    from ..tuner.timing import TimingOptions

    def pick(value, default, tiny):
        return value if value is not None else (tiny if interpret else default)

    tune = TuneOptions(
        mode=args.mode,
        n_trials=pick(args.trials, 24, 6),
        time_budget_s=pick(args.time_budget, 300.0, 60.0),
        patience=pick(args.patience, 12, None),
        seed=args.seed,
        top_k=pick(args.top_k, 4, 2),
        retime_rounds=pick(None, 5, 2),
        batch=pick(args.batch, 4, 1),
        grid_limit=args.grid_limit,
        storage=args.journal,
    )
    # Attention: fewer trials (a compile takes seconds), compiled in larger parallel rounds,
    # fewer finalists re-timed (a large problem's launch takes milliseconds).
    att_trials = pick(args.trials, 12, 4)
    attention = dataclasses.replace(
        tune, n_trials=att_trials, batch=pick(args.batch, min(att_trials, 6), 1),
        top_k=pick(args.top_k, min(4, max(2, att_trials // 3)), 2),
        retime_rounds=pick(None, 3, 2))
    timing = TimingOptions(rep_ms=args.rep_ms or 50)
    workers = args.precompile_workers
    if workers is None:
        workers = 0 if interpret else max(0, min(8, (os.cpu_count() or 2) - 2))
    if workers < 0:
        raise ValueError(f"--precompile-workers must be >= 0, got {workers}")
    cpus = os.cpu_count()  # None where the platform cannot tell: no bound to check then
    if cpus is not None and workers > cpus:  # each is a CPU-bound process with its own torch
        raise ValueError(f"--precompile-workers must be at most this machine's {cpus} CPUs, "
                         f"got {workers}")
    return SessionOptions(tune=tune, timing=timing, isolate=not args.no_isolate,
                          trial_timeout_s=pick(args.trial_timeout, 120.0, 120.0),
                          precompile_workers=workers,
                          total_budget_s=args.total_time, progress=not args.quiet,
                          started_at=getattr(args, "started_at", None),
                          family_tune={"attention": attention})


def _check_journal_is_not_the_database(journal: str | None, db) -> None:
    """A journal file path naming the winner database's file: the check below would make it
    (empty), the database would then be made in it, and Optuna failed on reading SQLite's
    bytes as journal records ("AssertionError: Should not reach", a traceback)."""
    if journal is None or "://" in journal or not journal.strip() or journal == "-":
        return  # a URL (sqlite:///F shares F on purpose), or refused by _check_journal
    from ..cache.engine import resolve_url, sqlite_file

    try:
        db_file = sqlite_file(resolve_url(db))
    except ValueError:
        return  # a bad --db is said when the database is opened
    path = expand_home(journal, "--journal")
    if db_file is not None and os.path.realpath(path) == os.path.realpath(db_file):
        raise ValueError(f"--journal: {journal} is the winner database's file (--db); a "
                         "journal file must be a file of its own (to keep the study in the "
                         f"same SQLite file, give --journal sqlite:///{os.path.abspath(path)})")


def _check_journal(journal: str | None) -> None:
    """Say a bad --journal path or URL before minutes of work, not when the first study opens."""
    if journal is None:
        return
    if not journal.strip():
        raise ValueError("--journal: empty; give a journal file path or a database URL")
    if journal == "-":
        # As for export and import (cli.options.file_path): '-' is stdin or stdout by the Unix
        # habit, and taken as a path it made a journal file named "-" without a word.
        raise ValueError("--journal: '-' (stdin or stdout) is not taken; give a journal file "
                         "path (./- for a file named '-') or a database URL")
    if "://" in journal:
        _check_journal_url(journal)
        return
    from ..cache.engine import check_not_half_url

    # sqlite:j.db (a URL missing its '//') made a journal file named "sqlite:j.db"
    check_not_half_url(journal, "--journal")
    path = expand_home(journal, "--journal")
    try:
        os.stat(path)
    except FileNotFoundError:
        pass  # a journal still to be made; a missing parent folder is said below
    except OSError as err:
        # Path.is_dir() below raises for anything but a missing path (a folder on the path this
        # user may not search, a name too long): the bare "[Errno 13] ..." did not name --journal.
        # A file where a folder should be (NotADirectoryError) is said as such, not as a
        # folder that "does not exist".
        from ..cache.engine import why_unseen

        reason = why_unseen(path) or f"cannot be looked at ({err.strerror or err})"
        raise ValueError(f"--journal: {journal} {reason}") from None
    if not path.parent.is_dir():
        raise ValueError(f"--journal: folder {path.parent} does not exist")
    if path.is_dir():
        raise ValueError(f"--journal: {journal} is a folder; give a journal file path")
    if path.exists() and not path.is_file():  # a pipe or a device: Optuna's reads would hang
        raise ValueError(f"--journal: {journal} is not a regular file; give a journal file path")
    if path.is_file():
        _check_journal_records(path, journal)
        _check_journal_replays(journal)
    if not _folder_writable(path.parent):
        # Optuna's lock is a file made beside the journal: its first write failed with
        # "[Errno 13] Permission denied: 'j.log' -> 'j.log.lock'", after the set-up.
        raise ValueError(f"--journal: this user may not create files in {path.parent}, "
                         "where Optuna keeps the journal's lock file")
    try:
        with open(path, "ab"):  # creates it, as Optuna would; an existing journal is kept as is
            pass
    except OSError as err:  # read-only folder or file, a dangling link, /proc ...
        raise ValueError(f"--journal: cannot write {journal} ({err.strerror or err})") from None


def _folder_writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


_RECORD_START = b'{"op_code":'  # how Optuna's journal writer begins every record


def _journal_lines(path: Path, journal: str) -> list[bytes]:
    try:
        return path.read_bytes().split(b"\n")  # the last item: what follows the last newline
    except OSError as err:
        raise ValueError(f"--journal: cannot read {journal} ({err.strerror or err})") from None


def _check_journal_records(path: Path, journal: str) -> None:
    """An existing journal file must hold Optuna journal records. Optuna appends to any file
    (a notes file, the winner database named by mistake) and then fails on reading it with a
    bare "Expecting value: line 1 column 1 (char 0)" or a UTF-8 error.

    A record cut off at the end (a writer killed or out of disk space while appending) is
    skipped by Optuna's reader, but the next append is glued onto it and every later run fails
    on that line: it is dropped here, under Optuna's own journal lock (a writer holds it while
    appending, so a record still being written by a live run is waited for, not cut)."""
    import json

    lines = _journal_lines(path, journal)
    for number, line in enumerate(lines[:-1], start=1):
        try:
            record = json.loads(line)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
            record = None
        if not (isinstance(record, dict) and "op_code" in record):
            raise ValueError(f"--journal: {journal} is not an Optuna journal (line {number} is "
                             "not a journal record); give a new file path, or move it away")
    if not lines[-1]:
        return
    if not lines[-1].startswith(_RECORD_START[: len(lines[-1])]):
        raise ValueError(f"--journal: {journal} is not an Optuna journal (its last line is not "
                         "a journal record); give a new file path, or move it away")
    try:
        from optuna.storages.journal import JournalFileSymlinkLock
    except ImportError:  # optuna < 4.0
        from optuna.storages import JournalFileSymlinkLock
    lock = JournalFileSymlinkLock(os.path.abspath(path))  # as tuner.storage opens it
    lock.acquire()
    try:
        lines = _journal_lines(path, journal)
        if lines[-1]:  # still cut off with the lock held: its writer is gone
            complete = len(b"\n".join(lines[:-1])) + (len(lines) > 1)
            with open(path, "r+b") as f:
                f.truncate(complete)
            print(f"flashtune tune: --journal {journal}: dropped its last record, cut off by a "
                  "run that stopped while writing it", file=sys.stderr)
    finally:
        lock.release()


def _check_journal_replays(journal: str) -> None:
    """Optuna replays a journal's records when it opens it: records that are JSON with an
    op_code but that it cannot replay (a newer Optuna's op code, a record edited by hand) fail
    there with its bare AssertionError ("Should not reach."), KeyError or ValueError, after the
    set-up and naming no file (make_storage names it now). Opening it once here (journals are
    small) says so up front."""
    from ..tuner.storage import make_storage

    try:
        make_storage(journal)
    except ValueError as err:  # the records Optuna cannot replay, named
        raise ValueError(f"--journal: {err}") from None
    except OSError as err:  # gone unreadable since it was read above
        raise ValueError(f"--journal: cannot read {journal} ({err.strerror or err})") from None


def _check_journal_url(url: str) -> None:
    """Open Optuna's RDB storage once (it creates its tables): a wrong driver, an unreachable
    server or a folder that does not exist is one line now."""
    from ..cache.engine import hide_password, hide_url_password
    from ..tuner.storage import make_storage

    shown = hide_url_password(url)
    _check_sqlite_journal_file(url, shown)
    _create_sqlite_file(url)
    try:
        import optuna

        storage = optuna.storages.RDBStorage(make_storage(url))
        storage.engine.dispose()  # the tune opens its own
    except ImportError as err:
        raise ValueError(f"--journal {shown}: its database driver is not installed "
                         f"({hide_password(str(err))})") from None
    except Exception as err:  # noqa: BLE001 - sqlalchemy's and optuna's errors alike
        text = str(getattr(err, "orig", None) or err).strip().splitlines()
        raise ValueError(f"--journal {shown}: cannot open it as an Optuna storage "
                         f"({type(err).__name__}: {hide_password(text[0]) if text else ''})") from None


def _check_sqlite_journal_file(url: str, shown: str) -> None:
    """An SQLite --journal's file, named for what it is where it is no file SQLite can open
    (Optuna's open said only "unable to open database file" or "disk I/O error"), as a journal
    file path is. An in-memory SQLite URL is refused: it keeps nothing. Its -journal path
    holding something other than a file (a named pipe, a folder) is refused before Optuna
    opens it too: SQLite opens that journal before its first read and waits forever on a
    pipe, as for the winner database (see cache.engine.blocked_journal)."""
    from sqlalchemy.engine import make_url

    from ..cache.engine import (blocked_journal, check_sqlite_host, no_file_there,
                                read_only_url, sqlite_file, why_unseen)

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - Optuna's open reports a bad URL
        return
    if read_only_url(parsed):
        # The tuner writes every trial to its journal. Without uri=true SQLAlchemy dropped
        # mode=ro with a warning and wrote anyway; with it, the first trial's write failed.
        raise ValueError(f"--journal {shown}: mode=ro opens it read-only, and the tuner "
                         "writes every trial to its journal; give the URL without ?mode=ro")
    if parsed.get_backend_name() == "sqlite":
        # sqlite://tmp/j.db, a slash short: said before _create_sqlite_file makes ./j.db
        check_sqlite_host(parsed, f"--journal {shown}")
        if "uri" in parsed.query:
            # As --db refuses them (cache.engine): uri=true keeps a plain path's query in the
            # file name (sqlite:///d/j.db?uri=true&x=1 made "j.db?x=1"), and a file: URI's
            # path is not the file the checks below look at.
            raise ValueError(f"--journal {shown}: SQLite URI filenames (uri=...) are not "
                             "supported; give the file itself, e.g. sqlite:////abs/path/j.db")
    path = sqlite_file(parsed)
    if path is None:
        if parsed.get_backend_name() == "sqlite":
            # sqlite://, sqlite:///:memory: - the study would be gone when the run ends: no
            # resume, no sharing, which is what --journal is for (--db refuses them too).
            raise ValueError(f"--journal {shown}: an in-memory SQLite database is gone when "
                             "the run ends, so its study cannot be resumed or shared; give a "
                             "journal file path or sqlite:///FILE (without --journal the "
                             "study is kept in memory)")
        return
    unseen = why_unseen(path)  # a link loop, a folder on its path this user may not search
    if unseen is not None:
        raise ValueError(f"--journal {shown}: {path} {unseen}")
    what = no_file_there(path)
    if what in ("a folder", "not a regular file"):
        raise ValueError(f"--journal {shown}: {path} is {what}; give an SQLite file path")
    if what is None and not os.access(path, os.W_OK):
        # Optuna opened it and failed only at the first trial's write ("attempt to write a
        # readonly database"), after the set-up.
        raise ValueError(f"--journal {shown}: {path} is read-only (this user may not write "
                         "it); give a journal this user can write")
    if not path.parent.is_dir():  # SQLite creates the file, not its folder
        raise ValueError(f"--journal {shown}: folder {path.parent} does not exist")
    if not _folder_writable(path.parent):
        # SQLite makes its rollback journal beside the file at the first write: Optuna
        # failed there ("attempt to write a readonly database"), after the set-up.
        raise ValueError(f"--journal {shown}: this user may not create files in "
                         f"{path.parent}, where SQLite keeps the file's rollback journal")
    journal = blocked_journal(path)
    if journal is not None:
        raise ValueError(f"--journal {shown}: {journal}, where SQLite keeps its rollback "
                         f"journal, is {no_file_there(journal)}; move it away, or give another "
                         "--journal")


def _create_sqlite_file(url: str) -> None:
    """A new SQLite journal file, made with the mode a plain open gives (0o666 less the umask),
    as TuneDB makes a new winner database: SQLite, opened by Optuna, would create it 0o644
    whatever the umask, and a journal shared with the winners (--journal sqlite:///F --db F)
    is made here first. Anything there already, a URL that names no plain file, or an error,
    is left to Optuna's open to take or report."""
    from sqlalchemy.engine import make_url

    from ..cache.db import create_shareable

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - Optuna's open reports a bad URL
        return
    if (parsed.get_backend_name() != "sqlite" or parsed.query
            or parsed.database in (None, "", ":memory:")):
        return
    create_shareable(parsed.database)


def run(args) -> int:
    from ..tuner import problems as P

    check_writable_db(args.db)  # a read-only --db: before the journal or any kernel is made
    interpret = bool(args.interpret)
    if interpret:
        # Before any kernel is loaded: Triton picks the interpreter when @triton.jit runs, and
        # the worker processes inherit the environment.
        os.environ["TRITON_INTERPRET"] = "1"
    if args.problem and (args.ops is not None or args.dtypes is not None):
        # --problem replaces the default set that --ops and --dtypes pick from: either would be
        # ignored, typos included, and the run would tune something else than asked.
        given = " and ".join(name for name, value in (("--ops", args.ops), ("--dtypes", args.dtypes))
                             if value is not None)
        raise ValueError(f"--problem replaces the default set, so {given} would be ignored; "
                         f"give --problem alone, or {given} without it")
    if args.grid_limit is not None and args.mode != "grid":
        # Only grid mode subsamples: with tpe or random the limit would be ignored without a
        # word, and the run would search as if it had not been given.
        raise ValueError(f"--grid-limit applies to --mode grid only, not --mode {args.mode}; "
                         "give --mode grid with it, or leave it out")
    if args.problem:
        # Each problem once, in the order given (as --ops and --dtypes take their names): a
        # repeated --problem (8x100 and 8X100 too) was searched again from scratch.
        problems = list(dict.fromkeys(P.parse_problem(text) for text in args.problem))
    else:
        # `is not None`: an empty --ops or --dtypes is a mistake to report, not "the default set"
        dtypes = P.parse_dtypes(args.dtypes) if args.dtypes is not None else (
            P.INTERPRET_DTYPES if interpret else P.DTYPES)
        ops = args.ops if args.ops is not None else ("softmax" if interpret else "softmax,attention_fwd")
        problems = P.default_problems(P.parse_ops(ops), dtypes, interpret=interpret)
        if not problems:
            # main() reports it as "flashtune tune: error: ..." with exit status 2
            raise ValueError(f"no problems: the ops {ops} take none of the dtypes "
                             f"{','.join(dtypes)}")
    options = _options(args, interpret)

    from ..tuner.session import NoDeviceError, pick_device

    try:
        device = pick_device(interpret)
    except NoDeviceError as err:
        print(f"flashtune tune: {err}", file=sys.stderr)
        return 1
    from ..cache import TuneDB
    from ..tuner.session import TuneInterrupted, first_line, run_session

    # After the other checks (a journal file it creates stays, even when the run stops on a bad
    # argument or no GPU), before the database is made.
    _check_journal_is_not_the_database(args.journal, args.db)
    _check_journal(args.journal)
    if interpret and args.precompile_workers:
        # The compile pool runs on a GPU only (the session starts none under the interpreter):
        # said once, not dropped without a word.
        print("flashtune tune: note: --precompile-workers has no effect with --interpret (the "
              "compile processes run on a GPU only)", file=sys.stderr)
    if args.no_isolate and args.trial_timeout is not None:
        # Only a worker process can be stopped and restarted: in this process a hung trial
        # hangs the run, so a timeout given for it is said to be none, not dropped silently.
        print("flashtune tune: note: --trial-timeout cannot stop a trial with --no-isolate "
              "(trials run in this process: a hung one hangs the run)", file=sys.stderr)
    db = TuneDB(args.db)
    try:
        with _sigterm_as_interrupt() as received:
            result = run_session(problems, db, options, device=device)
    except TuneInterrupted as stop:
        return _report_interrupt(stop, received, db.where, args.journal)
    finally:
        db.close()
    failed = [p for p in result.problems if p.winner is None]
    # Every winner found is stored ("winners stored in DB" was printed even when none was), in
    # its cache bucket's one row: problems of one bucket (8x100 and 5x100) leave the last one's.
    bucket_of = {tp.label(): tp.key() for tp in problems}
    stored = len({bucket_of.get(p.label, p.label) for p in result.problems if p.winner is not None})
    replaced = result.winners - stored
    print(f"flashtune tune: {result.winners}/{len(result.problems)} problems tuned on "
          f"{result.device.name} in {result.wall_s:.1f} s; "
          + (f"{stored} winner(s) stored in {db.where}" if result.winners
             else "no winner stored")
          + (f" ({replaced} replaced by the winner of a later problem of the same cache "
             "bucket)" if replaced else "")
          + (f"; worker restarts: {result.worker_restarts}" if result.worker_restarts else ""))
    for p in failed:
        print(f"flashtune tune: no winner for {p.label}: {first_line(p.error)}", file=sys.stderr)
    return 1 if failed else 0


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (kill, a job scheduler's stop) ends the run like Ctrl-C: the worker is stopped
    and the summary printed, instead of dying silently. Yields a list that gets "SIGTERM".
    Signals after the first, while the run stops, are ignored."""
    received: list[str] = []
    stopping: list[int] = []  # the signal that stopped the run, once one has

    def on_signal(signum, frame):
        # One stop: a second signal while the run stops (a scheduler's repeated SIGTERM, a
        # Ctrl-C pressed twice) landed in the cleanup and lost the summary of what was kept
        # (and SIGTERM's status); three Ctrl-C gave a multiprocessing traceback.
        if stopping:
            return
        stopping.append(signum)
        if signum == signal.SIGTERM:
            received.append("SIGTERM")
            raise KeyboardInterrupt("SIGTERM")
        raise KeyboardInterrupt

    try:
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread (an embedding program): keep its handling
        yield received
        return
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _report_interrupt(stop, received: list, db_where: str, journal: str | None) -> int:
    """What an interrupted run kept, on stderr; the shell's exit code for the signal."""
    from ..cache.engine import hide_url_password

    how = received[0] if received else "Ctrl-C"
    done = [p for p in stop.result.problems if p.label != stop.interrupted]
    won = sum(1 for p in done if p.winner is not None)
    finished = (f"{won} of the {len(done)} finished problem(s) have their winner stored in "
                f"{db_where}" if done else "no problem finished")
    lines = [f"flashtune tune: interrupted ({how}) after {stop.result.wall_s:.1f} s; {finished}"]
    if stop.interrupted is not None:
        cut = [p.error for p in stop.result.problems if p.label == stop.interrupted]
        lines.append(f"flashtune tune: {stop.interrupted}: " + (cut[0] if cut and cut[0] else
                     f"{stop.trials_kept} measured trial(s) kept, no winner stored"))
    if stop.not_started:
        lines.append(f"flashtune tune: not started: {', '.join(stop.not_started)}")
    if stop.interrupted is not None or stop.not_started:
        lines.append("flashtune tune: to finish, run the same command again: " + (
            f"configs already measured (kept in {hide_url_password(journal)}) are not measured "
            "again"
            if journal else
            "every problem is searched again (stored winners stay unless beaten); --journal "
            "PATH makes a run resumable"))
    print("\n".join(lines), file=sys.stderr)
    return 128 + (signal.SIGTERM if received else signal.SIGINT)
