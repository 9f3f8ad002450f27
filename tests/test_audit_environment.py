"""Hostile environments end to end: what the winner database and the CLI do with them."""

from __future__ import annotations

import os

import pytest

from flashtune.cache import CacheError, CacheWarning, DeviceInfo, TuneDB
from test_cache_support import DEV, FAMILY, KEY, row_config, unsearchable


def test_export_skips_rows_that_import_would_refuse(tmp_path):
    # upsert_winner stores a device name longer than its column in SQLite (PostgreSQL would
    # refuse it); export wrote that row, and import then refused the whole file, good rows too
    source, target = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    long_name = DeviceInfo("x" * 201, DEV.capability, DEV.sm_count, DEV.triton_version)
    with TuneDB(str(source)) as db:
        for device in (DEV, long_name):
            db.upsert_winner(device, FAMILY, KEY, row_config(), median_ms=1.0, p20_ms=1.0,
                             p80_ms=1.0, trials=1)
    export = tmp_path / "winners.json"
    with pytest.warns(CacheWarning, match="201 characters, at most 200"):
        with TuneDB(str(source), read_only=True) as db:
            assert db.export_json(export) == 1
    with TuneDB(str(target)) as db:
        assert db.import_json(export) == 1
        assert [w.device for w in db.winners()] == [DEV]


@pytest.mark.parametrize("what", ["folder", "pipe", "link loop"])
def test_writers_name_what_is_at_the_database_path(tmp_path, what, capsys):
    # import/tune into a folder said "its folder is missing or not writable", into a pipe
    # "disk I/O error", into a symbolic link loop "its folder is missing or not writable"
    from flashtune.cli import main as cli_main

    path = tmp_path / "tuned.sqlite"
    if what == "folder":
        path.mkdir()
    elif what == "pipe":
        os.mkfifo(path)
    else:
        path.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(path)
    expected = {"folder": "is a folder", "pipe": "is not a regular file",
                "link loop": "is a symbolic link loop"}[what]
    with pytest.raises(CacheError, match=expected):
        TuneDB(str(path))
    export = tmp_path / "winners.json"
    export.write_text('{"format": "flashtune-winners", "schema_version": 1, "winners": []}')
    assert cli_main(["import", str(export), "--db", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert os.path.lexists(path) and not path.is_file()  # left as it was


def test_writers_name_a_folder_on_the_path_they_may_not_search(tmp_path, monkeypatch, capsys):
    # Defect: import / tune read a database in a folder this user may not search as missing
    # (no_file_there), tried to create it, and SQLite then said "its folder is missing or not
    # writable": the folder is there, and the reason is a permission on it.
    from flashtune.cli import main as cli_main

    path = tmp_path / "private" / "tuned.sqlite"
    with TuneDB(str(path)):
        pass
    unsearchable(monkeypatch, path)
    with pytest.raises(CacheError, match="permission denied"):
        TuneDB(str(path))
    export = tmp_path / "winners.json"
    export.write_text('{"format": "flashtune-winners", "schema_version": 1, "winners": []}')
    assert cli_main(["import", str(export), "--db", str(path)]) == 2
    err = capsys.readouterr().err
    assert "permission denied" in err and str(path) in err and "missing" not in err, err


@pytest.mark.parametrize("value, interprets", [("false", False), ("off", False), ("2", False),
                                               ("0", False), ("1", True), ("true", True)])
def test_triton_interpret_is_read_as_triton_reads_it(monkeypatch, capsys, value, interprets):
    """Defect: flashtune took any TRITON_INTERPRET but "" and "0" as the interpreter, Triton
    only 1/true/yes/on/y: with TRITON_INTERPRET=false, flashtune.softmax of a CPU tensor went
    to a kernel that Triton compiled for a GPU ("0 active drivers"), `flashtune bench` ran its
    CPU smoke run and `flashtune tune` refused a GPU because "TRITON_INTERPRET is set"."""
    import torch

    import flashtune
    import flashtune.dispatch as dispatch
    from flashtune.cli import main as cli_main
    from flashtune.gen.loader import interpreter_mode

    monkeypatch.setenv("TRITON_INTERPRET", value)
    dispatch.reset()
    try:
        assert interpreter_mode() is interprets
        if not interprets and not torch.cuda.is_available():
            x = torch.randn(4, 16)
            assert torch.equal(flashtune.softmax(x), torch.softmax(x, -1))  # torch's, no kernel
            assert cli_main(["tune"]) == 1
            assert "needs a CUDA GPU" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        dispatch.reset()


def test_the_suite_keeps_off_the_users_cache_folder_and_database(tmp_path):
    # Defect: conftest set its private FLASHTUNE_CACHE_DIR and FLASHTUNE_DB with setdefault, so
    # a user who had them set (a team database, as the README suggests) and ran the README's
    # `python -m pytest` had the suite write kernel files into their cache folder and read
    # (tests without fresh_db) their winners; conftest says the user's cache is never touched.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parent.parent
    user_cache, user_db = tmp_path / "user-cache", tmp_path / "user.sqlite"
    env = dict(os.environ, FLASHTUNE_CACHE_DIR=str(user_cache),
               FLASHTUNE_DB=f"sqlite:///{user_db}",
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_ops.py::test_result_layout_matches_fake"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not user_cache.exists() and not user_db.exists()


@pytest.mark.parametrize("value, interprets", [("false", False), ("off", False), ("0", False),
                                               ("1", True), ("true", True)])
def test_attention_kernels_read_triton_interpret_as_triton_does(monkeypatch, value, interprets):
    """Defect: the attention module read TRITON_INTERPRET by itself (anything but "" and "0"
    was the interpreter), so with TRITON_INTERPRET=false on a GPU its bf16 tile products went
    through fp32 (UPCAST_DOT, the interpreter's workaround): slower kernels, tuned and served
    so, where Triton compiled them."""
    import torch

    from flashtune.gen import load_variant
    from flashtune.gen.attention_space import SPACE

    monkeypatch.setenv("TRITON_INTERPRET", value)
    module = load_variant("attention_fwd", SPACE.complete({}))
    q = torch.empty(1, 1, 16, 64, dtype=torch.bfloat16)
    assert module._specialization(q, q, False, False, 1.0)["UPCAST_DOT"] is interprets
