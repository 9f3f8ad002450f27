"""``flashtune show``, ``env``, ``clear`` and ``source --dispatch`` on a seeded database."""

from __future__ import annotations

import pytest
import torch

from flashtune.cache import DeviceInfo, ProblemKey, TuneDB
from flashtune.cli import main
from flashtune.gen import template_family_hash
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

import flashtune.dispatch as dispatch
from dispatch_helpers import DEVICE, fresh_db, row_config, seed  # noqa: F401
from test_cache_support import unsearchable

pytestmark = pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")


def _seed_with_default_trial(path):
    """A 8x64 softmax winner twice as fast as the default config's trial."""
    key = seed(path, "softmax", "float32", (8, 64), row_config(64, rows=2), median_ms=0.01)
    device = DeviceInfo.current(torch.device(DEVICE))
    default = default_config("softmax", SoftmaxProblem(8, 64, "float32"), sm_count=device.sm_count)
    with TuneDB(f"sqlite:///{path}") as db:
        db.record_trial(device, template_family_hash("softmax"), key, default.as_dict(),
                        median_ms=0.02, p20_ms=0.019, p80_ms=0.021)
    return key


def test_show_lists_winners_with_speedup(fresh_db, capsys):
    _seed_with_default_trial(fresh_db)
    seed(fresh_db, "log_softmax", "float16", (4, 128), row_config(128))
    assert main(["show"]) == 0
    out = capsys.readouterr().out
    assert "winners for" in out and ": 2" in out
    lines = [l for l in out.splitlines() if l.startswith("softmax ")]
    assert len(lines) == 1 and "8x64" in lines[0] and "2.00x" in lines[0]
    assert "row block=64 rows=2" in lines[0]
    log_line = next(l for l in out.splitlines() if l.startswith("log_softmax"))
    assert " - " in log_line  # no default timing stored: said, not invented
    assert main(["show", "--op", "log_softmax"]) == 0
    assert "8x64" not in capsys.readouterr().out


def test_show_says_1x_when_the_default_config_won(fresh_db, capsys):
    # Defect (README audit): where the heuristic default itself won, "vs default" divided the
    # default's first trial time by the winner's re-timed median, two measurements of one
    # config: an interpreter run showed 0.57x (the winner "slower" than itself).
    device = DeviceInfo.current(torch.device(DEVICE))
    default = default_config("softmax", SoftmaxProblem(8, 64, "float32"), sm_count=device.sm_count)
    key = seed(fresh_db, "softmax", "float32", (8, 64), default.as_dict(), median_ms=0.02)
    with TuneDB(f"sqlite:///{fresh_db}") as db:
        db.record_trial(device, template_family_hash("softmax"), key, default.as_dict(),
                        median_ms=0.01, p20_ms=0.009, p80_ms=0.011)
    assert main(["show"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("softmax "))
    assert "1.00x" in line and "0.50x" not in line, line


def test_show_without_database(fresh_db, capsys):
    assert main(["show"]) == 0
    assert "no winner database" in capsys.readouterr().out
    assert not fresh_db.exists()


@pytest.mark.parametrize("command", [["show"], ["clear"], ["clear", "--yes"]])
@pytest.mark.parametrize("why", ["link loop", "permission denied"])
def test_show_and_clear_do_not_call_an_unreadable_database_missing(fresh_db, capsys, monkeypatch,
                                                                   command, why):
    # Defect: a database behind a symbolic link loop, or in a folder this user may not search
    # (a team's database in another user's folder), was "no winner database at ... (run
    # `flashtune tune` first)" / "nothing to clear", exit 0: info.database_missing read any
    # failed stat as a missing file. It is a database the command cannot use: exit 2, and
    # the message names the path and the reason.
    if why == "link loop":
        fresh_db.symlink_to(fresh_db)
    else:
        seed(fresh_db, "softmax", "float32", (8, 64), row_config(64))
        unsearchable(monkeypatch, fresh_db)  # as if its folder were another user's 0o700 one
    assert main(command) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"flashtune {command[0]}: error: "), (out, err)
    assert str(fresh_db) in err and why in err and "flashtune tune" not in err, err


@pytest.mark.parametrize("why", ["link loop", "corrupt"])
def test_bench_refuses_a_database_it_cannot_read(fresh_db, tmp_path, capsys, why):
    # Defect (README audit): README's exit statuses give 2 for a database a command cannot
    # use, and say every command names a database behind a link loop and exits 2. `bench`
    # ran to the end on the default kernels (the dispatcher's notice went into the JSON rows)
    # and exited 0: a report of minutes that looked like one of the tuned winners.
    if why == "link loop":
        fresh_db.symlink_to(fresh_db)
    else:
        fresh_db.write_bytes(b"not a database " * 100)
    out = tmp_path / "out"
    assert main(["bench", "--interpret", "--ops", "softmax", "--no-overhead",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flashtune bench: error: ") and str(fresh_db) in err, err
    assert not out.exists()  # refused before the output folder is made or anything is timed


def test_show_marks_stale_winners(fresh_db, capsys):
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64), family_hash="f" * 16)
    assert main(["show"]) == 0
    assert "stale" in capsys.readouterr().out


@pytest.mark.parametrize("family", ["F" * 16, "edited", "f" * 64])
def test_show_does_not_call_an_edited_family_hash_stale(fresh_db, capsys, family):
    # Review: any hash that was not today's read "stale: other templates or tunables",
    # one of a form flashtune never writes included.
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64), family_hash=family)
    assert main(["show"]) == 0
    out = capsys.readouterr().out
    assert "not served: family hash edited" in out and "stale" not in out


def test_clear_needs_yes(fresh_db, capsys):
    _seed_with_default_trial(fresh_db)
    assert main(["clear"]) == 1
    assert "would delete 1 winner" in capsys.readouterr().out
    with TuneDB(f"sqlite:///{fresh_db}") as db:
        assert len(db.winners()) == 1
    assert main(["clear", "--yes"]) == 0
    assert "deleted 1 winner" in capsys.readouterr().out
    with TuneDB(f"sqlite:///{fresh_db}") as db:
        assert db.winners() == []


def test_clear_this_device_keeps_others(fresh_db, capsys):
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64))
    other = DeviceInfo("Other GPU", "8.0", 108, "3.0.0")
    with TuneDB(f"sqlite:///{fresh_db}") as db:
        db.upsert_winner(other, template_family_hash("softmax"),
                         ProblemKey.make("softmax", "float32", {"rows_bucket": 8, "cols_bucket": 64}),
                         row_config(64), median_ms=1.0, p20_ms=0.9, p80_ms=1.1, trials=1)
    assert main(["clear", "--yes"]) == 0
    with TuneDB(f"sqlite:///{fresh_db}") as db:
        assert [w.device.name for w in db.winners()] == ["Other GPU"]
    assert main(["clear", "--all-devices", "--yes"]) == 0
    with TuneDB(f"sqlite:///{fresh_db}") as db:
        assert db.winners() == []


def test_env_reports_versions_and_locations(fresh_db, capsys):
    import flashtune

    assert main(["env"]) == 0
    out = capsys.readouterr().out
    for needle in ("device", "torch", "triton", str(fresh_db), "cache folder", "FLASHTUNE_DB"):
        assert needle in out, needle
    assert ["flashtune", flashtune.__version__] in [line.split() for line in out.splitlines()]
    assert not fresh_db.exists(), "env must not create the database"


def test_env_reports_every_runtime_switch(fresh_db, capsys, monkeypatch):
    # Defect: FLASHTUNE_FAST_LAUNCH=0 (the stored-plan fast path off) changes what a call runs
    # but was missing from the report, whose help promises the FLASHTUNE_* switches.
    monkeypatch.setenv("FLASHTUNE_FAST_LAUNCH", "0")
    assert main(["env"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    for name in ("FLASHTUNE_DB", "FLASHTUNE_CACHE_DIR", "FLASHTUNE_DISABLE", "FLASHTUNE_LOG",
                 "TRITON_INTERPRET"):
        assert any(line[:1] == [name] for line in lines), name
    assert ["FLASHTUNE_FAST_LAUNCH", "0"] in lines


def test_env_marks_a_switch_value_flashtune_ignores(fresh_db, capsys, monkeypatch):
    # Defect: FLASHTUNE_LOG=maybe was reported as "FLASHTUNE_LOG  maybe", as if logging were
    # on (the runtime ignores it, with a warning); control characters went out raw.
    monkeypatch.setenv("FLASHTUNE_LOG", "maybe")
    monkeypatch.setenv("FLASHTUNE_FAST_LAUNCH", " Off ")
    monkeypatch.setenv("FLASHTUNE_DISABLE", "\x1b[2J")
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "ignored" in lines["FLASHTUNE_LOG"] and "off by default" in lines["FLASHTUNE_LOG"]
    assert "ignored" not in lines["FLASHTUNE_FAST_LAUNCH"]
    assert "\x1b" not in out and "\\x1b[2J" in lines["FLASHTUNE_DISABLE"]
    assert "ignored" in lines["FLASHTUNE_DISABLE"]


def test_env_names_a_flashtune_variable_it_does_not_know(fresh_db, capsys, monkeypatch):
    # Defect: a misspelt switch (FLASHTUNE_DISABEL=1) was not in the report at all, so the
    # user who set it believed flashtune off while it ran its kernels.
    monkeypatch.setenv("FLASHTUNE_DISABEL", "1")
    monkeypatch.setenv("FLASHTUNE_DBURL", "postgresql://u:secret@h/db")
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "unknown" in lines["FLASHTUNE_DISABEL"]
    assert "did you mean FLASHTUNE_DISABLE?" in lines["FLASHTUNE_DISABEL"]
    assert "unknown" in lines["FLASHTUNE_DBURL"] and "secret" not in out
    assert "unknown" not in lines["FLASHTUNE_DISABLE"]


def test_env_leaves_the_test_tools_variables_alone(fresh_db, capsys, monkeypatch):
    # .ci/postgres.sh reads FLASHTUNE_PG_DIR/PORT/DB (the tests' PostgreSQL server): a user who
    # exports them for it was told they are unknown to flashtune, as if misspelt.
    monkeypatch.setenv("FLASHTUNE_PG_PORT", "5433")
    monkeypatch.setenv("FLASHTUNE_TEST_SEED", "7")
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "FLASHTUNE_PG_PORT" not in out and "FLASHTUNE_TEST_SEED" not in out, out


def test_env_says_unknown_after_a_query_password(fresh_db, capsys, monkeypatch):
    # Defect: the line was hidden as a whole URL, and a query password runs to the next "&":
    # "(unknown: ...)" after it was taken for the password and replaced by ***.
    monkeypatch.setenv("FLASHTUNE_DBURL", "postgresql://u@h/db?password=secret")
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("FLASHTUNE_DBURL"))
    assert "secret" not in out and "password=***" in line
    assert "unknown" in line and "did you mean FLASHTUNE_DB?" in line, line


def test_env_spells_out_control_characters_on_every_line(fresh_db, capsys, monkeypatch,
                                                         tmp_path):
    # Defect: FLASHTUNE_CACHE_DIR's line spelled an escape sequence out, but the "cache
    # folder" and "kernel sources" lines, which show the same path, printed it raw.
    monkeypatch.delenv("FLASHTUNE_DB", raising=False)
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path / "odd\x1b[31m\x07name"))
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out, out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "odd\\x1b[31m\\x07name" in lines["FLASHTUNE_CACHE_DIR"]
    assert "odd\\x1b[31m\\x07name" in out.split("cache folder", 1)[1].splitlines()[0]


def test_source_dispatch_prints_the_pick(fresh_db, capsys):
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    assert main(["source", "softmax", "--shape", "5x40", "--dtype", "float32", "--dispatch"]) == 0
    captured = capsys.readouterr()
    assert "exact" in captured.err and "'rows_per_program': 2" in captured.err
    assert "rows_per_program = 2" in captured.out
    assert main(["source", "softmax", "--shape", "5x3000", "--dtype", "float32", "--dispatch"]) == 0
    assert "default" in capsys.readouterr().err


def test_source_dispatch_and_show_under_flashtune_disable(fresh_db, capsys, monkeypatch):
    """Defect: with FLASHTUNE_DISABLE=1 `source --dispatch` said "exact (tuned bucket ...)" and
    printed the tuned winner's source, though softmax then runs torch.softmax (and attention
    its heuristic default), and `show` listed the winners as if the runtime used them."""
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
    dispatch.reset()
    for op in ("softmax", "softmax_backward"):
        assert main(["source", op, "--shape", "8x64", "--dtype", "float32", "--dispatch"]) == 0
        captured = capsys.readouterr()
        assert "exact" not in captured.err and "FLASHTUNE_DISABLE=1" in captured.err
        assert "torch" in captured.err, captured.err
        assert "rows_per_program = 2" not in captured.out  # the default's source, not the winner's
    assert main(["source", "attention_fwd", "--shape", "1x2x64x16", "--dispatch"]) == 0
    err = capsys.readouterr().err
    assert "FLASHTUNE_DISABLE=1" in err and "default" in err, err
    assert main(["show"]) == 0
    assert "FLASHTUNE_DISABLE=1" in capsys.readouterr().out


def test_disable_messages_name_the_value_that_was_set(fresh_db, capsys, monkeypatch):
    """FLASHTUNE_DISABLE=yes (any spelling env_flag takes) was reported as FLASHTUNE_DISABLE=1
    by `source --dispatch` and `show`."""
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    monkeypatch.setenv("FLASHTUNE_DISABLE", "yes")
    dispatch.reset()
    assert main(["source", "softmax", "--shape", "8x64", "--dtype", "float32", "--dispatch"]) == 0
    assert "# dispatch: FLASHTUNE_DISABLE=yes:" in capsys.readouterr().err
    assert main(["show"]) == 0
    assert "FLASHTUNE_DISABLE=yes: the runtime uses none" in capsys.readouterr().out


def test_show_clips_a_huge_device_name_from_the_database(fresh_db, capsys):
    """Defect: `show --all-devices` printed a tampered row's 3,000,000-character device name
    whole, padding every line of the table to that width; cells are cut at 200 characters
    now, saying how long they were (as `export` refuses such a row)."""
    import sqlite3

    seed(fresh_db, "softmax", "float32", (4, 32), row_config(32))
    conn = sqlite3.connect(fresh_db)
    conn.execute("UPDATE ft_v1_winners SET device_name = ?", ("gpu" * 5000,))
    conn.commit()
    conn.close()
    assert main(["show", "--all-devices", "--db", str(fresh_db)]) == 0
    out = capsys.readouterr().out
    assert "(15000 characters)" in out
    assert max(len(line) for line in out.splitlines()) < 600, out[:300]
