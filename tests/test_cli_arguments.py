"""CLI argument mistakes found by an audit: each is one ``flashtune CMD: error:`` line and a
nonzero exit before any work starts, and nothing is written where nothing can be kept."""

from __future__ import annotations

import json
import os
from pathlib import Path
import sqlite3
import stat

import pytest

from cli_helpers import bench_result, run_cli
from flashtune.cli import main
from flashtune.tuner.session import first_line


def _one_line_error(rc: int, err: str, command: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"flashtune {command}: error: "), err
    assert all(n in lines[0] for n in needles), err


def _app_database(path):
    """Another program's SQLite file (one table of its own); its bytes, to compare after."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()
    return path.read_bytes()


def _empty_export(tmp_path):
    """A valid winners export with no rows."""
    source = tmp_path / "w.json"
    source.write_text('{"format": "flashtune-winners", "schema_version": 1, "winners": []}')
    return source


@pytest.mark.parametrize("option", ["--ops", "--dtypes"])
def test_tune_refuses_an_empty_list_instead_of_tuning_the_default_set(tmp_path, capsys, option):
    # Defect: `--ops ''` was taken as "not given", and the whole default set was tuned (about
    # an hour on a GPU).
    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", option, "", "--db", str(db))
    _one_line_error(rc, err, "tune", option, "empty")
    assert not db.exists()


@pytest.mark.parametrize("journal, needle", [
    ("foo://bar", "cannot open it as an Optuna storage"),
    # named as a journal file path's missing folder is (it said "cannot open it as an
    # Optuna storage (OperationalError: unable to open database file)")
    ("sqlite:////no/such/folder/j.db", "folder /no/such/folder does not exist"),
    ("", "empty"),
    # '-' made a journal file named "-" in the current folder (as `export -` did)
    ("-", "./- for a file named '-'"),
])
def test_tune_checks_a_journal_url_up_front(tmp_path, capsys, journal, needle):
    # Defect: a URL was passed to Optuna unchecked; a bad one ended in a SQLAlchemy traceback
    # when the first study opened.
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", journal, "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal", needle)


@pytest.mark.parametrize("db", ["same path", "same file by URL", "relative"])
def test_tune_refuses_a_journal_file_that_is_the_winner_database(tmp_path, capsys, monkeypatch, db):
    # Defect: with --journal F --db F (F new) the journal check made F empty, the database was
    # made in it, and Optuna then read SQLite's bytes as journal records: a traceback
    # ("AssertionError: Should not reach.") and exit 1.
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "x.sqlite"
    given = {"same path": str(path), "same file by URL": f"sqlite:///{path}",
             "relative": "x.sqlite"}[db]
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x8",
                         "--journal", str(path), "--db", given)
    _one_line_error(rc, err, "tune", "--journal", "is the winner database's file (--db)")
    assert not path.exists()


def test_a_relative_journal_path_is_opened_by_its_absolute_path(tmp_path, monkeypatch):
    # Defect: Optuna's journal lock is a symbolic link to the path as given, so runs/j.log
    # locked with a link to runs/j.log inside runs/ (dangling): a lock left by a killed run
    # never read as stale, and the next run spun on it for ever.
    from flashtune.tuner.storage import make_storage

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    storage = make_storage("runs/j.log")
    assert storage._backend._file_path == str(tmp_path / "runs" / "j.log")


@pytest.mark.parametrize("journal", ["sqlite://", "sqlite:///:memory:", "sqlite+pysqlite://"])
def test_tune_refuses_an_in_memory_sqlite_journal(tmp_path, capsys, journal):
    # Defect (audit): an in-memory SQLite --journal was taken silently, though its study is
    # gone when the run ends (no resume, no sharing: what --journal is for); the winner
    # database (--db) refuses in-memory URLs.
    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", journal, "--db", str(db))
    _one_line_error(rc, err, "tune", f"--journal {journal}", "in-memory")
    assert not db.exists()


def test_tune_refuses_an_sqlite_journal_url_with_a_host(tmp_path, capsys, monkeypatch):
    # Defect: sqlite://tmp/j.db (a slash short) was refused only by Optuna's open, after the
    # check had made an empty j.db in the current folder.
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", "sqlite://tmp/j.db", "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal sqlite://tmp/j.db", "has no host")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("journal", ["sqlite:j.db", "sqlite:/j.db", "postgresql:u@h/db"])
def test_tune_refuses_a_journal_url_missing_its_slashes(tmp_path, capsys, monkeypatch, journal):
    # Defect: sqlite:j.db (a URL missing its '//') was taken as a path: the run kept its
    # journal in a file named "sqlite:j.db" in the current folder, where --db refuses it.
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", journal, "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal", "without the '//'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make, needle", [
    (lambda p: p.mkdir(), "is a folder"),
    (lambda p: os.mkfifo(p), "is not a regular file"),
    (lambda p: p.symlink_to(p), "is a symbolic link loop"),
])
def test_tune_names_what_is_at_an_sqlite_journal_urls_path(tmp_path, capsys, make, needle):
    # Defect: Optuna's open said only "(OperationalError: unable to open database file)" for a
    # folder or a link loop there, "(OperationalError: disk I/O error)" for a named pipe; the
    # journal file path (--journal F) names each.
    path = tmp_path / "study.sqlite"
    make(path)
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", f"sqlite:///{path}", "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal", f"{path} {needle}")


@pytest.mark.parametrize("prefix, query", [("", "?mode=ro"), ("file:", "?mode=ro&uri=true")])
def test_tune_refuses_a_read_only_sqlite_journal_url(tmp_path, capsys, prefix, query):
    # Defect (review): --journal sqlite:///F?mode=ro was taken. Without uri=true SQLAlchemy
    # dropped mode=ro with a warning and the tuner wrote to F anyway; with it, the first
    # trial's write failed after the set-up. --db refuses mode=ro for a writer the same way.
    path = tmp_path / "study.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", f"sqlite:///{prefix}{path}{query}",
                         "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal", "mode=ro", "read-only")
    assert not path.exists()


def test_tune_refuses_an_sqlite_journal_file_it_may_not_write(tmp_path, capsys, monkeypatch):
    # Optuna opened it and failed at the first trial's write. As root (CI) every file is
    # writable, so the user's view is what os.access says for this file.
    path = tmp_path / "study.sqlite"
    path.write_bytes(b"")
    path.chmod(0o444)
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if str(p) == str(path) and mode & os.W_OK else access(p, mode, **kw)))
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", f"sqlite:///{path}", "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal", f"{path} is read-only")


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_tune_refuses_a_journal_in_a_folder_it_may_not_write(tmp_path, capsys, monkeypatch,
                                                            kind):
    # Review: a writable journal in a folder this user may not write passed the checks; the
    # first trial's write then failed after the set-up (Optuna's lock file, SQLite's rollback
    # journal are made beside it). As root (CI) every folder is writable: os.access decides.
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / ("j.log" if kind == "file" else "j.db")
    path.write_bytes(b"")
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if str(p) == str(folder) and mode & os.W_OK else access(p, mode, **kw)))
    journal = str(path) if kind == "file" else f"sqlite:///{path}"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", journal, "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal", f"may not create files in {folder}")


@pytest.mark.parametrize("prefix", ["", "file:"])
def test_tune_refuses_sqlite_uri_filenames_for_a_journal(tmp_path, capsys, prefix):
    # Review: SQLAlchemy keeps a plain path's query in the file name under uri=true
    # (sqlite:///d/j.db?mode=rw&uri=true made "j.db?mode=rw"), and the checks looked at j.db;
    # a file: URI's path is not the file they look at either. Refused, as --db refuses them.
    path = tmp_path / "j.db"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", f"sqlite:///{prefix}{path}?mode=rw&uri=true",
                         "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "--journal", "SQLite URI filenames (uri=...) are not "
                    "supported")
    assert list(tmp_path.iterdir()) == []


def test_tune_checks_that_the_journal_file_can_be_written_up_front(tmp_path, capsys):
    # Defect: only the folder's existence was checked; a journal path that cannot be written
    # (here a link into a missing folder; also a read-only folder or /proc) failed when the
    # first study opened, after the database was made, as a bare "[Errno 2] ..." line that
    # did not name --journal.
    journal = tmp_path / "j.log"
    journal.symlink_to(tmp_path / "missing" / "j.log")
    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", str(journal), "--db", str(db))
    _one_line_error(rc, err, "tune", "--journal", "cannot write", str(journal))
    assert not db.exists()


@pytest.mark.parametrize("where, needles", [
    ("locked/j.log", ("cannot be looked at: permission denied",)),
    ("locked/sub/j.log", ("cannot be looked at: permission denied",)),
    ("a" * 300, ("cannot be looked at", "File name too long")),
])
def test_tune_names_a_journal_path_it_cannot_look_at(tmp_path, capsys, monkeypatch, where, needles):
    # Defect (audit): a --journal in a folder this user may not search (or a name too long for
    # the file system) ended as a bare "error: [Errno 13] Permission denied: 'j/x.log'" without
    # "--journal": Path.is_dir() raises for anything but a missing path.
    locked = tmp_path / "locked"
    locked.mkdir()
    real_stat = os.stat

    def stat_as_a_user(path, *args, **kwargs):  # tests run as root, which may search any folder
        if str(path).startswith(str(locked) + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat_as_a_user)
    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", str(tmp_path / where), "--db", str(db))
    _one_line_error(rc, err, "tune", "--journal", where[:50], *needles)
    assert "Errno" not in err and not db.exists()


@pytest.mark.parametrize("where", ["afile/j.log", "afile/sub/j.log"])
@pytest.mark.parametrize("url", [False, True])
def test_tune_says_a_journal_path_under_a_file_cannot_exist(tmp_path, capsys, where, url):
    # Defect (audit): `--journal F/j.log` with F a regular file said "folder F does not exist",
    # though F exists (as a file): NotADirectoryError was taken for a missing path. It now says
    # why, in the words of cache.engine.why_unseen, as an SQLite journal URL's path does.
    (tmp_path / "afile").write_text("x")
    path = tmp_path / where
    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--journal", f"sqlite:///{path}" if url else str(path), "--db", str(db))
    _one_line_error(rc, err, "tune", "--journal", str(path),
                    f"cannot exist: a part of its path is not a folder ({tmp_path / 'afile'})")
    assert "does not exist" not in err and not db.exists()


@pytest.mark.parametrize("problem, needle", [
    ("softmax:float16:0x100", "rows and columns must be >= 1"),
    ("log_softmax:float32:4x0", "rows and columns must be >= 1"),
    ("softmax:float8:4x100", "unknown dtype 'float8'"),
    ("softmaxx:float16:4x100", "unknown op 'softmaxx'"),
    ("attention_fwd:float16:0x1x16x16", "must be >= 1"),
    ("attention_fwd:float16:1x1x16x7", "head dim 7"),
    ("attention_fwd:float32:1x1x16x16", "unknown dtype 'float32'"),
    ("softmax:float16:4x", "ROWSxCOLS"),
    ("softmax:float16:4", "ROWSxCOLS"),
    ("softmax:float16", "OP:DTYPE:ROWSxCOLS"),
])
def test_tune_names_the_problem_option_and_value_it_refuses(tmp_path, capsys, problem, needle):
    # Defect (audit): `--problem softmax:float16:0x100` said only "problem rows and columns
    # must be >= 1" (an unknown op or dtype, a bad head dim alike), naming neither --problem
    # nor the value given.
    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", problem, "--db", str(db))
    _one_line_error(rc, err, "tune", "--problem", problem, needle)
    assert not db.exists()


def test_tune_with_no_problem_for_the_ops_and_dtypes_is_an_error_line(tmp_path, capsys):
    # Defect: `--ops attention_fwd --dtypes float32` (attention has no float32 problems)
    # exited 2 with "flashtune tune: no problems: ...", not the "flashtune tune: error: ..."
    # form that the README promises for every exit status 2.
    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--ops", "attention_fwd",
                         "--dtypes", "float32", "--db", str(db))
    _one_line_error(rc, err, "tune", "no problems", "attention_fwd", "float32")
    assert not db.exists()


def test_tune_stopped_by_another_check_leaves_no_journal_file(tmp_path, capsys, monkeypatch):
    # Defect: the --journal write check created the journal first, so a run stopped by a later
    # check (here no GPU without --interpret) left an empty journal file behind.
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    journal, db = tmp_path / "j.log", tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--journal", str(journal), "--db", str(db))
    assert rc == 1 and "needs a CUDA GPU" in err, err
    assert not journal.exists() and not db.exists()


def test_tune_without_a_gpu_names_the_command_once(tmp_path, capsys, monkeypatch):
    # Defect: the README quickstart's `flashtune tune` on a machine without a GPU said
    # "flashtune tune: flashtune tune needs a CUDA GPU ..." (the CLI's prefix and the
    # message's own).
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc, _, err = run_cli(capsys, "tune", "--db", str(tmp_path / "t.sqlite"))
    assert rc == 1 and err.count("flashtune tune") == 2, err  # the prefix, and the --interpret hint
    assert err.startswith("flashtune tune: ") and "needs a CUDA GPU" in err, err
    assert "run: flashtune tune --interpret" in err, err


def test_tune_journal_check_keeps_an_existing_journal(tmp_path):
    from flashtune.cli.tune_cmd import _check_journal

    journal = tmp_path / "j.log"
    record = b'{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n'
    journal.write_bytes(record)  # a journal holding one study, created
    _check_journal(str(journal))
    assert journal.read_bytes() == record


def test_tune_refuses_more_precompile_workers_than_cpus(tmp_path, capsys):
    # Defect: any count was taken; on a GPU the pool started that many spawn processes, each
    # importing torch: --precompile-workers 100000 would start 100000 of them (from the code;
    # not run on a GPU).
    import os

    db = tmp_path / "t.sqlite"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--precompile-workers",
                         str((os.cpu_count() or 1) + 1), "--db", str(db))
    _one_line_error(rc, err, "tune", "--precompile-workers", "CPUs")
    assert not db.exists()


def test_tune_takes_precompile_workers_where_the_cpu_count_is_unknown(monkeypatch):
    # Defect: where os.cpu_count() is None (the platform cannot tell), the bound became 1 CPU
    # and any --precompile-workers above 1 was refused; with no count there is nothing to check.
    import os

    from flashtune.cli import build_parser
    from flashtune.cli.tune_cmd import _options

    monkeypatch.setattr(os, "cpu_count", lambda: None)
    args = build_parser().parse_args(["tune", "--precompile-workers", "4"])
    assert _options(args, interpret=False).precompile_workers == 4


def test_report_names_an_unusable_out_folder(tmp_path, capsys):
    # Defect: `flashtune report R.json --out X` where X cannot be made printed a bare
    # "[Errno ...] ...: 'X'" line that did not say which option was wrong.
    result = Path(__file__).parent.parent / "benchmarks" / "results" / "bench_h200_2026-11-21"
    if not (result / "flashtune_bench.json").is_file():
        pytest.skip("no recorded bench result in this checkout")
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc, _, err = run_cli(capsys, "report", str(result / "flashtune_bench.json"),
                         "--out", str(blocker / "out"))
    _one_line_error(rc, err, "report", "--out", str(blocker / "out"))


def _deny_mkdir(monkeypatch, tmp_path):
    """An --out folder this user may not create (the tests may run as root, who may)."""
    import errno

    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if self.name == "denied":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    return tmp_path / "denied"


@pytest.mark.parametrize("make_out, reason", [
    (lambda mp, tmp: (tmp / "file").write_text("") or tmp / "file", "is a file, not a folder"),
    (lambda mp, tmp: (tmp / "file").write_text("") or tmp / "file" / "out",
     "a part of its path is not a folder"),
    (lambda mp, tmp: (tmp / "loop").symlink_to(tmp / "loop") or tmp / "loop",
     "is a symbolic link loop"),
    (_deny_mkdir, "Permission denied"),
])
@pytest.mark.parametrize("command", ["bench", "report"])
def test_an_unusable_out_folder_is_named_with_the_reason_in_words(tmp_path, capsys, monkeypatch,
                                                                 make_out, reason, command):
    # Defect: --out said the reason as a raw errno, "--out F is not a writable folder
    # ([Errno 17] File exists: 'F')" for a file there, ([Errno 20] Not a directory: ...) for a
    # file on its path, "File exists" for a link loop too.
    out = make_out(monkeypatch, tmp_path)
    if command == "bench":
        argv = ["bench", "--interpret", "--out", str(out)]
    else:
        result = tmp_path / "r.json"
        # with measurements: a result without any has nothing to write, so no --out is made
        result.write_text(json.dumps(bench_result()))
        argv = ["report", str(result), "--out", str(out)]
    rc, _, err = run_cli(capsys, *argv)
    _one_line_error(rc, err, command, f"--out {out}", reason)
    assert "Errno" not in err


@pytest.mark.parametrize("argv, argument", [
    (["report", ""], "argument result"),
    (["report", "r.json", "--out", ""], "argument --out"),
    (["bench", "--interpret", "--out", ""], "argument --out"),
])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch,
                                                                 argv, argument):
    # Defect: Path("") is the current folder: `report ''` said ".: not a regular file", and
    # `--out ''` (an unset variable in `--out "$DIR"`) wrote the report files into the current
    # folder. export and import refuse an empty FILE already.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"{argument}: empty" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", ["-1", str(2**64), "99999999999999999999"])
def test_tune_seed_must_fit_a_generator(capsys, seed):
    # Defect: a seed past 64 bits reached the worker, whose traceback was printed twice.
    with pytest.raises(SystemExit) as stop:
        main(["tune", "--interpret", "--seed", seed])
    assert stop.value.code == 2
    assert "--seed" in capsys.readouterr().err


def test_a_failed_problem_is_summed_up_in_one_line():
    error = "WorkerError: could not set up: RuntimeError: no memory\nTraceback (most recent...)\n  x"
    assert first_line(error) == "WorkerError: could not set up: RuntimeError: no memory"
    assert first_line("") == first_line(None) == "failed"


def test_source_dispatch_with_another_regime_starts_from_plain_defaults(capsys, tmp_path,
                                                                       monkeypatch):
    # Defect: the dispatched row config kept rows_per_program > 1 under --regime online, and
    # the command failed with "rows_per_program must be 1 outside the row regime".
    monkeypatch.setenv("FLASHTUNE_DB", str(tmp_path / "none.sqlite"))
    rc, out, err = run_cli(capsys, "source", "softmax", "--shape", "4x100", "--regime", "online",
                           "--dispatch")
    assert rc == 0, err
    assert "regime           = online" in out and "differs from the picked" in err


@pytest.mark.parametrize("db", ["sqlite://", "sqlite:///:memory:"])
def test_import_refuses_an_in_memory_database(tmp_path, capsys, db):
    # Defect: `import --db sqlite://` said "imported 8 winner(s)" and kept nothing.
    rc, _, err = run_cli(capsys, "import", str(_empty_export(tmp_path)), "--db", db)
    _one_line_error(rc, err, "import", "in-memory")


def test_writers_leave_another_programs_sqlite_file_alone(tmp_path, capsys):
    # Defect: import (and tune) created flashtune's tables in another program's SQLite file and
    # switched it to WAL; show, export and clear already refused it.
    path = tmp_path / "app.db"
    before = _app_database(path)
    source = _empty_export(tmp_path)
    rc, _, err = run_cli(capsys, "import", str(source), "--db", str(path))
    _one_line_error(rc, err, "import", "another program's SQLite database", "users")
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--db", str(path))
    _one_line_error(rc, err, "tune", "another program's SQLite database")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "w.json"]


def test_export_never_replaces_an_sqlite_database(tmp_path, capsys):
    # Defect: only the source database itself was protected; `export other.sqlite` replaced
    # any other SQLite file (another tuned database, another program's) with JSON.
    other = tmp_path / "other.sqlite"
    before = _app_database(other)
    source = _empty_export(tmp_path)
    db = tmp_path / "tuned.sqlite"
    rc, _, err = run_cli(capsys, "import", str(source), "--db", str(db))
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "export", str(other), "--db", str(db))
    _one_line_error(rc, err, "export", "is an SQLite database")
    assert other.read_bytes() == before
    rc, _, err = run_cli(capsys, "export", str(tmp_path / "out.json"), "--db", str(db))
    assert rc == 0, err


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal", "-WAL"])
def test_export_never_replaces_a_databases_side_file(tmp_path, capsys, suffix):
    # Defect: `export tuned.sqlite-wal` replaced the database's write-ahead log (committed
    # writes not yet in the database file) with JSON: it starts with no SQLite header.
    db = tmp_path / "tuned.sqlite"
    rc, _, err = run_cli(capsys, "import", str(_empty_export(tmp_path)), "--db", str(db))
    assert rc == 0, err
    side = tmp_path / f"tuned.sqlite{suffix}"
    side.write_bytes(b"")  # empty: SQLite, opening the database, reads it as nothing pending
    rc, _, err = run_cli(capsys, "export", str(side), "--db", str(db))
    _one_line_error(rc, err, "export", f"is the {suffix} file of the SQLite database tuned.sqlite")
    # Not replaced by the export (SQLite itself may rewrite its -shm when it opens the database).
    assert side.exists() and not side.read_bytes().startswith(b"{")
    # A file that only looks like one (no SQLite database beside it) is the user's to replace.
    lone = tmp_path / f"notes{suffix}"
    lone.write_text("old")
    rc, _, err = run_cli(capsys, "export", str(lone), "--db", str(db))
    assert rc == 0, err
    assert lone.read_text().startswith("{")


@pytest.mark.parametrize("suffix", ["-wal", "-journal"])
def test_export_never_makes_a_side_file_for_a_database(tmp_path, capsys, suffix):
    # Review: the first fix looked only at a side file already there. SQLite makes -wal and
    # -shm only while the database is open, and takes a -journal it finds for a rollback to
    # replay: readers then failed ("attempt to write a readonly database") and served no
    # winners. Exported from another database, so that no connection made the file first.
    other = tmp_path / "other.sqlite"
    rc, _, err = run_cli(capsys, "import", str(_empty_export(tmp_path)), "--db", str(other))
    assert rc == 0, err
    sqlite3.connect(tmp_path / "tuned.sqlite").execute("CREATE TABLE t (x)").connection.close()
    side = tmp_path / f"tuned.sqlite{suffix}"
    assert not side.exists()
    rc, _, err = run_cli(capsys, "export", str(side), "--db", str(other))
    _one_line_error(rc, err, "export", f"is the {suffix} file of the SQLite database tuned.sqlite")
    assert not side.exists()


def test_export_leaves_alone_what_it_may_not_read_to_check(tmp_path, monkeypatch):
    # Review: a database the caller may not read (another user's, in a shared folder) did
    # not count as one, so its files could be replaced (replacing needs only the folder's
    # write permission). Simulated: tests may run as root, which reads everything.
    from flashtune.cache import transfer

    real_open = transfer.open_regular_file
    unreadable = {tmp_path / "theirs.sqlite", tmp_path / "theirs.json"}

    def refuse(path):
        if Path(path) in unreadable:
            raise PermissionError(13, "Permission denied")
        return real_open(path)

    monkeypatch.setattr(transfer, "open_regular_file", refuse)
    for name in ("theirs.sqlite", "theirs.sqlite-wal", "theirs.json"):
        (tmp_path / name).write_bytes(b"their bytes")
    for name in ("theirs.sqlite-wal", "theirs.json"):
        with pytest.raises(ValueError, match="SQLite database"):
            transfer.export_winners([], tmp_path / name)
        assert (tmp_path / name).read_bytes() == b"their bytes"


@pytest.mark.parametrize("args, needle", [
    (["--ops", ""], "--ops must be"), (["--ops", "softmax,backwards"], "--ops must be"),
    (["--budget", "0"], "--budget must be > 0 seconds"), (["--budget", "nan"], "--budget must be > 0"),
    (["--db", "foo://x"], "not supported"),
])
def test_bench_checks_its_arguments_before_making_the_output_folder(tmp_path, capsys, args, needle):
    # Defect: --out was created first (and --db read only after the copy measurement).
    out = tmp_path / "results"
    rc, _, err = run_cli(capsys, "bench", "--interpret", "--out", str(out), *args)
    _one_line_error(rc, err, "bench", needle)
    assert not out.exists()


def test_tune_says_why_rows_too_long_for_the_kernels_cannot_be_tuned(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:1x3000000000",
                         "--db", str(tmp_path / "t.sqlite"))
    _one_line_error(rc, err, "tune", "at most", "int32 column offsets")


def test_source_dispatch_regime_on_attention_names_the_stray_tunable(capsys, tmp_path, monkeypatch):
    # Defect (in this fix's first form): attention configs have no regime; a KeyError traceback.
    monkeypatch.setenv("FLASHTUNE_DB", str(tmp_path / "none.sqlite"))
    rc, _, err = run_cli(capsys, "source", "attention_fwd", "--shape", "1x2x64x16", "--regime",
                         "online", "--dispatch")
    assert rc == 2 and "has no tunable(s) ['regime']" in err and "Traceback" not in err


def test_a_journal_and_the_winners_may_share_one_sqlite_file(tmp_path, capsys):
    # The journal check creates Optuna's tables first; the writers' refusal of other programs'
    # files must not then refuse the file it shares with flashtune.
    shared = tmp_path / "shared.db"
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                         "--trials", "1", "--quiet", "--journal", f"sqlite:///{shared}",
                         "--db", str(shared))
    assert rc == 0, err


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_a_new_sqlite_journal_shared_with_the_winners_gets_the_mode_a_plain_open_gives(
        tmp_path, capsys):
    # Defect: the journal check let SQLite (through Optuna) create the new file, 0644 whatever
    # the umask, before TuneDB's own pre-create could give it 0666 less the umask; under
    # umask 002 a team sharing `--journal sqlite:///F --db F` could not tune into it.
    shared = tmp_path / "shared.db"
    old = os.umask(0o002)
    try:
        rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:4x100",
                             "--trials", "1", "--quiet", "--journal", f"sqlite:///{shared}",
                             "--db", str(shared))
    finally:
        os.umask(old)
    assert rc == 0, err
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o664


def test_import_says_a_row_comes_from_another_flashtune_version(tmp_path, capsys):
    # A backward winner exported before the backward space had `align` (other templates): the
    # file is refused, and the message says why in terms a user can act on.
    from flashtune.cache import DeviceInfo, ProblemKey, TuneDB

    config = {"regime": "row", "block": 64, "rows_per_program": 1, "splits": 1, "num_warps": 1,
              "num_stages": 1, "lane_stats": False, "l2_hint": False, "align": False}
    db = tmp_path / "src.sqlite"
    key = ProblemKey.make("softmax_backward", "float32", {"rows_bucket": 8, "cols_bucket": 64})
    with TuneDB(db) as src:
        src.upsert_winner(DeviceInfo("GPU", "9.0", 132, "3.6.0"), "0" * 16, key, config,
                          median_ms=1.0, p20_ms=1.0, p80_ms=1.0, trials=1)
    rc, _, err = run_cli(capsys, "export", str(tmp_path / "w.json"), "--db", str(db))
    assert rc == 0, err
    document = json.loads((tmp_path / "w.json").read_text())
    del document["winners"][0]["config"]["align"]
    (tmp_path / "w.json").write_text(json.dumps(document))
    rc, _, err = run_cli(capsys, "import", str(tmp_path / "w.json"), "--db", str(tmp_path / "d.sqlite"))
    assert rc == 2 and "missing keys ['align']" in err and "another flashtune version" in err, err


@pytest.mark.parametrize("argv", [["source", "softmax", "--bogus", "1"], ["show", "--nope"],
                                  ["export", "o.json", "extra.json"]])
def test_an_unknown_option_is_named_by_its_subcommand(capsys, argv):
    # Defect (audit): the top-level parser answered "flashtune: error: unrecognized
    # arguments", with the top-level usage, not the subcommand's.
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"flashtune {argv[0]}: error: unrecognized arguments: " in err, err
    assert f"usage: flashtune {argv[0]}" in err, err


@pytest.mark.parametrize("content", [b"hello notes\n", b"\x00\xf8SQLite format 3\n",
                                     b'{"op_code": 0}\nnot json\n', b"[1, 2]\n", b"hello"])
def test_tune_refuses_a_journal_that_is_not_an_optuna_journal_and_leaves_it_alone(
        tmp_path, capsys, content):
    # Defect: Optuna appended its records to any existing file (a notes file, the winner
    # database named by mistake) and then the run failed with a bare "flashtune tune: error:
    # Expecting value: line 1 column 1 (char 0)" or a UTF-8 error naming neither --journal
    # nor the file.
    journal, db = tmp_path / "notes.txt", tmp_path / "t.sqlite"
    journal.write_bytes(content)
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:8x100",
                         "--trials", "1", "--quiet", "--journal", str(journal), "--db", str(db))
    _one_line_error(rc, err, "tune", "--journal", str(journal), "not an Optuna journal")
    assert journal.read_bytes() == content and not db.exists()


@pytest.mark.parametrize("record", [b'{"op_code": 99, "worker_id": "w"}',  # a newer Optuna's
                                    b'{"op_code": 0, "worker_id": "w"}',  # fields missing
                                    b'{"op_code": 0, "worker_id": "w", "study_name": "s", '
                                    b'"directions": [7]}'])
def test_tune_names_a_journal_whose_records_optuna_cannot_replay(tmp_path, capsys, record):
    # Defect: journal records that are JSON with an op_code but that Optuna cannot replay (an
    # op code of a newer Optuna, a record edited by hand) failed when the first study opened,
    # after the set-up, with Optuna's bare "AssertionError: Should not reach." or KeyError
    # traceback, or "flashtune tune: error: 7 is not a valid StudyDirection", naming neither
    # --journal nor the file.
    journal, db = tmp_path / "j.log", tmp_path / "t.sqlite"
    journal.write_bytes(record + b"\n")
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--problem", "softmax:float32:8x100",
                         "--trials", "1", "--quiet", "--journal", str(journal), "--db", str(db))
    _one_line_error(rc, err, "tune", "--journal", str(journal), "cannot replay")
    assert journal.read_bytes() == record + b"\n" and not db.exists()


def test_tune_drops_a_journal_record_cut_off_by_a_dead_writer(tmp_path, capsys):
    # Defect: a record cut off at the end of the journal (a run killed, or out of disk space,
    # while appending) was skipped by Optuna's reader, but the next run's first record was
    # glued onto it, and every run after that failed with "flashtune tune: error: Expecting
    # ',' delimiter: line 1 column 30 (char 29)".
    journal, db = tmp_path / "j.log", tmp_path / "t.sqlite"
    args = ("tune", "--interpret", "--problem", "softmax:float32:8x100", "--trials", "1",
            "--quiet", "--journal", str(journal), "--db", str(db))
    assert run_cli(capsys, *args)[0] == 0
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"op_code":5,"worker_id":"x')
    rc, _, err = run_cli(capsys, *args)
    assert rc == 0 and "dropped its last record" in err, err
    assert journal.read_bytes().startswith(whole)
    rc, _, err = run_cli(capsys, *args)  # failed here before the fix
    assert rc == 0 and "dropped" not in err, err
    for line in journal.read_bytes().splitlines():
        assert json.loads(line)["op_code"] is not None


def test_tune_takes_a_repeated_problem_once(tmp_path, capsys, monkeypatch):
    # Defect: `--problem X --problem X` (or 8x100 and 8X100) searched the problem twice, from
    # scratch without a journal; --ops and --dtypes already took each name once.
    import types

    import flashtune.tuner.session as session

    seen = []

    def fake_run_session(problems, db, options, device=None):
        seen.extend(p.label() for p in problems)
        return session.SessionResult(types.SimpleNamespace(name="cpu"), [], 0.0)

    monkeypatch.setattr(session, "run_session", fake_run_session)
    rc, out, err = run_cli(capsys, "tune", "--interpret", "--quiet", "--db",
                           str(tmp_path / "t.sqlite"), "--problem", "softmax:float32:8x100",
                           "--problem", "softmax:float16:8x100", "--problem", "softmax:float32:8X100")
    assert rc == 0, err
    assert seen == ["softmax:float32:8x100", "softmax:float16:8x100"]


def _fake_session(monkeypatch, results=()):
    """run_session replaced by one that measures nothing and returns ``results`` (the
    ProblemResults): the tune command's own lines only. Returns the options each call got."""
    import types

    import flashtune.tuner.session as session

    calls = []

    def fake_run_session(problems, db, options, device=None):
        calls.append(options)
        return session.SessionResult(types.SimpleNamespace(name="cpu"), list(results), 0.0)

    monkeypatch.setattr(session, "run_session", fake_run_session)
    return calls


@pytest.mark.parametrize("workers, noted", [("2", True), ("0", False), (None, False)])
def test_tune_says_precompile_workers_have_no_effect_when_interpreted(tmp_path, capsys,
                                                                      monkeypatch, workers, noted):
    # Defect (audit): `--interpret --precompile-workers 2` was taken without a word, though the
    # compile pool runs on a GPU only: the user waited for a parallel compile that never was.
    _fake_session(monkeypatch)
    extra = ["--precompile-workers", workers] if workers is not None else []
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--quiet", "--db",
                         str(tmp_path / "t.sqlite"), "--problem", "softmax:float32:8x100", *extra)
    assert rc == 0, err
    notes = [line for line in err.splitlines() if "--precompile-workers" in line]
    assert len(notes) == (1 if noted else 0), err
    if noted:
        assert "no effect" in notes[0] and "--interpret" in notes[0], err


@pytest.mark.parametrize("extra, noted", [
    (["--no-isolate", "--trial-timeout", "30"], True),
    (["--no-isolate"], False),  # the default timeout, not asked for: nothing to say
    (["--trial-timeout", "30"], False),  # a worker process: the timeout applies
])
def test_tune_says_trial_timeout_cannot_apply_without_a_worker(tmp_path, capsys, monkeypatch,
                                                                extra, noted):
    # Defect (audit): `--no-isolate --trial-timeout 30` was taken without a word, though with
    # no worker process there is nothing to stop a hung trial: the user counted on a limit
    # that was never there.
    calls = _fake_session(monkeypatch)
    rc, _, err = run_cli(capsys, "tune", "--interpret", "--quiet", "--db",
                         str(tmp_path / "t.sqlite"), "--problem", "softmax:float32:8x100", *extra)
    assert rc == 0, err
    notes = [line for line in err.splitlines() if "--trial-timeout" in line]
    assert len(notes) == (1 if noted else 0), err
    if noted:
        assert notes[0].startswith("flashtune tune: note: ") and "--no-isolate" in notes[0], err
    assert calls[0].trial_timeout_s == (30.0 if "--trial-timeout" in extra else 120.0)


@pytest.mark.parametrize("outcomes, summary", [
    (["failed"], "0/1 problems tuned on cpu in 0.0 s; no winner stored"),
    (["stored", "failed", "stored"], "2/3 problems tuned on cpu in 0.0 s; 2 winner(s) stored in "),
])
def test_tune_summary_says_how_many_winners_it_stored(tmp_path, capsys, monkeypatch, outcomes,
                                                      summary):
    # Defect (audit): the summary said "winners stored in DB" when no problem found a winner.
    # (Every winner found is stored: the tuner weighs the stored config on its own shape.)
    from flashtune.tuner.study import ProblemResult

    results = []
    for number, outcome in enumerate(outcomes):
        r = ProblemResult(f"softmax:float32:8x{100 + number}", candidates=1, pruned=0)
        if outcome == "failed":
            r.error = "no candidate passed"
        else:
            r.winner = {"num_warps": 4}
        results.append(r)
    _fake_session(monkeypatch, results)
    rc, out, err = run_cli(capsys, "tune", "--interpret", "--quiet", "--db",
                           str(tmp_path / "t.sqlite"), "--problem", "softmax:float32:8x100")
    assert rc == (1 if "failed" in outcomes else 0), err
    assert summary in out and "winners stored" not in out, out


def test_tune_summary_counts_one_winner_per_cache_bucket(tmp_path, capsys, monkeypatch):
    # Defect (audit): two problems of one cache bucket (softmax rows round up to a power of
    # two: 8x100 and 5x100) each stored a winner in the bucket's one row, the later replacing
    # the earlier, and the summary said "2 winner(s) stored" where `flashtune show` listed one.
    from flashtune.tuner.study import ProblemResult

    labels = ["softmax:float32:8x100", "softmax:float32:5x100", "softmax:float32:8x300"]
    results = [ProblemResult(label, candidates=1, pruned=0, winner={"num_warps": 4})
               for label in labels]
    _fake_session(monkeypatch, results)
    rc, out, err = run_cli(capsys, "tune", "--interpret", "--quiet", "--db",
                           str(tmp_path / "t.sqlite"), *(f"--problem={label}" for label in labels))
    assert rc == 0, err
    assert "3/3 problems tuned" in out and "2 winner(s) stored in " in out, out
    assert "(1 replaced by the winner of a later problem of the same cache bucket)" in out, out


@pytest.mark.parametrize("option, value, expected", [
    ("--trials", "abc", "integer >= 1"), ("--trials", "\u0663", "integer >= 1"),
    ("--batch", "1_0", "integer >= 1"), ("--seed", "+5", "2**63"),
    ("--precompile-workers", "x", "integer >= 0"), ("--time-budget", "abc", "number > 0"),
    ("--trial-timeout", "1_0", "number > 0"), ("--total-time", "\u0661\u0662", "number > 0"),
])
def test_tune_number_options_say_what_they_expect(tmp_path, capsys, option, value, expected):
    # Defect (audit): int() and float() failures reached the user as argparse's bare
    # "invalid _positive_int value: 'abc'", and int() took other scripts' digits ("\u0663" as 3)
    # and "1_0", where --problem and --shape take ASCII digits only.
    from flashtune.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["tune", "--interpret", option, value, "--db", str(tmp_path / "t.sqlite")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and last.startswith("flashtune tune: error: argument " + option)
    assert expected in last and "invalid" not in last, last


@pytest.mark.parametrize("value", ["abc", "1_0", "\u0661\u0662"])
def test_bench_budget_says_what_it_expects(tmp_path, capsys, value):
    # As the tune options: float() took "1_0" and other scripts' digits, and its failure read
    # as argparse's bare "invalid float value".
    from flashtune.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", "--interpret", "--budget", value, "--out", str(tmp_path / "b")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and last.startswith("flashtune bench: error: argument --budget")
    assert "number of seconds" in last and "invalid" not in last, last


def test_output_to_a_reader_that_went_away_stops_quietly():
    # Defect (audit): `flashtune show | head` printed "flashtune show: error: [Errno 32] Broken
    # pipe" once head had its lines. Unix tools stop quietly there (status 128 + SIGPIPE).
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader at all: the first write fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "flashtune", "source", "softmax"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("command", ["export", "import"])
def test_an_empty_file_argument_is_named(tmp_path, capsys, command):
    # Defect (audit): `flashtune export ""` said "error: : is a folder; ..." (Path("") is the
    # current folder) and `flashtune import ""` "error: : cannot read (No such file ...)":
    # neither named the argument.
    with pytest.raises(SystemExit) as stop:
        main([command, "", "--db", str(tmp_path / "t.sqlite")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2, last
    assert last.startswith(f"flashtune {command}: error: argument file: empty"), last
    assert list(tmp_path.iterdir()) == []



@pytest.mark.parametrize("command", ["export", "import"])
def test_a_dash_file_argument_is_refused_not_taken_for_a_file_named_dash(tmp_path, capsys,
                                                                        monkeypatch, command):
    # Defect (audit): `flashtune export -` (stdout, by the Unix habit) wrote the winners to a
    # file named "-" in the current folder and said "exported 4 winner(s) to -"; so
    # `flashtune export - | ssh host flashtune import -` printed nothing and the import read
    # whatever file named "-" it found there. Neither stdin nor stdout is a file they take.
    from flashtune.cache import TuneDB

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "t.sqlite"
    TuneDB(str(db)).close()
    with pytest.raises(SystemExit) as stop:
        main([command, "-", "--db", str(db)])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2, last
    assert last.startswith(f"flashtune {command}: error: argument file: '-'"), last
    assert "./-" in last  # how to name a file called "-"
    assert not (tmp_path / "-").exists()

def test_bench_budget_inf_means_no_limit_as_tune_total_time_inf_does():
    # Defect: `bench --budget inf` was refused while `tune --total-time inf` ran unbounded.
    from flashtune.cli.bench_cmd import DEFAULT_GPU_BUDGET_S, budget_seconds

    assert budget_seconds(float("inf"), interpret=False) is None
    assert budget_seconds(float("inf"), interpret=True) is None
    assert budget_seconds(None, interpret=False) == DEFAULT_GPU_BUDGET_S
    assert budget_seconds(None, interpret=True) is None
    assert budget_seconds(12.5, interpret=False) == 12.5
    for bad in (0.0, -1.0, float("nan"), float("-inf")):
        with pytest.raises(ValueError, match="--budget must be > 0 seconds"):
            budget_seconds(bad, interpret=False)


@pytest.mark.parametrize("argv, option", [
    (["source", "softmax", "--shape", "-4x5"], "--shape"),
    (["tune", "--time-budget", "-1e3"], "--time-budget"),
    (["bench", "--budget", "-inf"], "--budget"),
    (["show", "--db", "-odd.sqlite"], "--db"),
])
def test_a_value_starting_with_a_minus_says_how_to_pass_it(capsys, argv, option):
    """argparse takes a value that starts with '-' and is not a plain negative number
    (-4x5, -1e3, -inf, a path) for the next option, and said only "argument --shape: expected
    one argument", though one was given: the error now says how to give it."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert (f"flashtune {argv[0]}: error: argument {option}: expected one argument "
            f"(a value that starts with '-' goes after '=': {option}=VALUE)") in err, err


def _ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("command, where", [
    (["tune", "--interpret", "--problem", "softmax:float32:8x100"],
     ("flashtune.cli.tune_cmd", "_check_journal")),  # the journal check, before the database
    (["tune", "--interpret", "--problem", "softmax:float32:8x100"], ("flashtune.cache", "TuneDB")),
    (["bench", "--interpret"], ("flashtune.bench.runner", "check_gpu")),
    (["export", "x.json"], ("flashtune.cache", "TuneDB")),
    (["import", "x.json"], ("flashtune.cache.transfer", "load_winners")),
    (["show"], ("flashtune.cli", "build_parser")),  # imports torch: seconds to cut short
])
def test_ctrl_c_before_the_work_starts_is_one_line_and_status_130(tmp_path, capsys, monkeypatch,
                                                                   command, where):
    # Defect (audit): Ctrl-C while a command started (torch's import while the parser is built,
    # tune's journal check or database opening, bench's GPU check) ended in a KeyboardInterrupt
    # traceback; a tune or bench stopped later says one line and exits 130.
    import importlib

    monkeypatch.setattr(importlib.import_module(where[0]), where[1], _ctrl_c)
    monkeypatch.chdir(tmp_path)
    try:
        rc, out, err = run_cli(capsys, *command, "--db", str(tmp_path / "t.sqlite"))
    except KeyboardInterrupt:  # caught here: escaping, it would stop the whole pytest run
        pytest.fail("KeyboardInterrupt escaped main()")
    name = command[0] if where[1] != "build_parser" else ""
    assert rc == 130, err
    assert err == f"flashtune{' ' + name if name else ''}: interrupted (Ctrl-C)\n", err


def test_version_option_prints_the_version(capsys):
    # Defect: `flashtune --version` said "the following arguments are required: COMMAND".
    import flashtune

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"flashtune {flashtune.__version__}"
