"""Defects found by an adversarial audit of the public ops, the cache and the command line.

Each test names the input that used to go wrong and what a user relies on instead.
"""

from __future__ import annotations

import os
import sqlite3
import warnings

import numpy as np
import pytest
import torch

import flashtune
from flashtune import once
from flashtune.cache import CacheWarning, TuneDB
from cli_helpers import run_cli as _cli
from flashtune.gen import loader as loader_mod
from flashtune.gen import load_variant
from flashtune.gen.softmax_ops import softmax_backward, softmax_forward
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from test_cache_support import DEV, FAMILY, KEY, row_config, unsearchable

_NO_STRIDES = {  # layouts whose tensors raise on .stride() (nested: on .shape too)
    "csr": lambda x: x.to_sparse_csr(),
    "csc": lambda x: x.to_sparse_csc(),
    "bsr": lambda x: x.to_sparse_bsr((2, 2)),
    "bsc": lambda x: x.to_sparse_bsc((2, 2)),
}


# -- inputs without strides: a TypeError naming the layout, not an internal RuntimeError --------

@pytest.mark.parametrize("op", [flashtune.softmax, flashtune.log_softmax])
@pytest.mark.parametrize("layout", sorted(_NO_STRIDES))
def test_sparse_compressed_input_is_a_clear_type_error(op, layout, device):
    # the hot path used to read x.stride() first: "Sparse CSR tensors do not have strides"
    dense = torch.randn(4, 6, device=device)
    op(dense)  # a plan for this shape exists: the sparse call must still get the clear error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
        sparse = _NO_STRIDES[layout](dense)
    with pytest.raises(TypeError, match="layout"):
        op(sparse)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_strided_nested_tensor_is_a_clear_type_error(requires_grad):
    # layout torch.strided, yet no sizes: used to fail with "NestedTensorImpl doesn't support
    # sizes. Please file an issue." (or deep inside a permute on the autograd path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "nested tensors are in prototype stage"
        nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)],
                                            requires_grad=requires_grad)
    with pytest.raises(TypeError, match="nested"):
        flashtune.softmax(nested, -1)
    with pytest.raises(TypeError, match="x is a nested tensor"):
        softmax_forward(nested, -1)
    with pytest.raises(TypeError, match="dy is a nested tensor"):
        softmax_backward(torch.randn(2, 3), nested, -1)


# -- attention flag errors name numpy types as torch does ---------------------------------------

def test_attention_flag_errors_name_numpy_types(device):
    q = torch.randn(1, 2, 5, 16, dtype=torch.float16, device=device)
    # used to say "causal must be a bool, got bool"
    with pytest.raises(TypeError, match=r"causal must be a bool, got numpy\.bool"):
        flashtune.attention(q, q, q, causal=np.bool_(True))
    with pytest.raises(TypeError, match=r"return_lse must be a bool, got numpy\.bool"):
        flashtune.attention(q, q, q, return_lse=np.bool_(False))
    with pytest.raises(TypeError, match=r"scale must be a real number, a 0-d tensor or None, got numpy\.ndarray"):
        flashtune.attention(q, q, q, scale=np.array(0.5))


# -- the command line ---------------------------------------------------------------------------

def test_env_reports_an_invalid_database_url(capsys, monkeypatch):
    # the diagnostics command used to stop at a bad FLASHTUNE_DB with no report at all
    monkeypatch.setenv("FLASHTUNE_DB", "mysql://user@host/db")
    rc, out, err = _cli(capsys, "env")
    assert rc == 0 and "Traceback" not in err
    assert "database" in out and "invalid" in out and "mysql" in out
    assert "torch" in out and "FLASHTUNE_DB" in out  # the rest of the report is still there


def test_env_says_what_is_at_a_database_path_that_holds_no_file(capsys, monkeypatch, tmp_path):
    # Defect: a folder (or a device) at the database path was reported "(not created yet)",
    # where show, tune and the runtime all say it is a folder: the bug report misled.
    monkeypatch.setenv("FLASHTUNE_DB", str(tmp_path))
    rc, out, err = _cli(capsys, "env")
    line = next(line for line in out.splitlines() if line.startswith("database"))
    assert rc == 0 and "(a folder, not a database file)" in line, out


def test_env_does_not_call_a_database_it_cannot_look_at_not_created(capsys, monkeypatch,
                                                                     tmp_path):
    # Defect: a symbolic link loop at the database path, or a folder on it this user may not
    # search, was reported "(not created yet)", where show, tune and the runtime say why
    # they cannot read it.
    loop = tmp_path / "loop.sqlite"
    loop.symlink_to(loop)
    monkeypatch.setenv("FLASHTUNE_DB", str(loop))
    rc, out, err = _cli(capsys, "env")
    line = next(line for line in out.splitlines() if line.startswith("database"))
    assert rc == 0 and "symbolic link loop" in line and "not created" not in line, out
    hidden = tmp_path / "private" / "tuned.sqlite"
    unsearchable(monkeypatch, hidden)
    monkeypatch.setenv("FLASHTUNE_DB", str(hidden))
    rc, out, err = _cli(capsys, "env")
    line = next(line for line in out.splitlines() if line.startswith("database"))
    assert rc == 0 and "permission denied" in line and "not created" not in line, out


@pytest.mark.parametrize("url", ["postgresql://user:secretpw@host/db",  # valid
                                 "postgresql://user@srv:secretpw@host/db",  # "@" in the user
                                 "mysql://user:secretpw@host/db",  # unsupported backend
                                 "postgresql://user:secretpw@:notaport/db"])  # unparsable
def test_database_passwords_stay_out_of_messages(capsys, monkeypatch, url):
    # the runtime warning and `flashtune env` used to print FLASHTUNE_DB as given
    from flashtune.cache.runtime import read_runtime_winners
    from flashtune.cache.keys import DeviceInfo

    monkeypatch.setenv("FLASHTUNE_DB", url)
    rc, out, err = _cli(capsys, "env")
    assert rc == 0 and "secretpw" not in out + err and ":***@" in out
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_runtime_winners(DeviceInfo("GPU", "9.0", 132, "3.6.0")) == []
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert messages and not any("secretpw" in m for m in messages), messages


@pytest.mark.parametrize("url", ["postgresql://user:hunter two@spacehost/db",  # valid
                                 "postgresql://user:hunter two@spacehost:notaport/db",  # unparsable
                                 "postgresql://user@spacehost/db?password=hunter two"])
def test_a_password_with_a_space_stays_out_of_env_and_messages(capsys, monkeypatch, url):
    # Defect: SQLAlchemy (and libpq) take a password holding an unencoded space, but the
    # pattern that hides passwords in text stopped at the space: `flashtune env` printed
    # "postgresql://user:hunter two@spacehost/db" as given, and the runtime's warning about an
    # unparsable FLASHTUNE_DB showed it too, and so did `flashtune tune --journal URL`'s errors.
    from flashtune.cache.runtime import read_runtime_winners
    from flashtune.cache.keys import DeviceInfo

    rc, out, err = _cli(capsys, "tune", "--interpret", "--journal", url)
    assert rc == 2 and "--journal" in err and "hunter" not in out + err and "two" not in out + err, err
    monkeypatch.setenv("FLASHTUNE_DB", url)
    rc, out, err = _cli(capsys, "env")
    assert rc == 0 and "hunter" not in out + err and "two" not in out + err, out
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_runtime_winners(DeviceInfo("GPU", "9.0", 132, "3.6.0")) == []
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert messages and not any("hunter" in m or "two" in m for m in messages), messages


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_flashtune_db_is_not_named_when_the_default_file_cannot_be_read(
        monkeypatch, blank):
    # Review (session 41): FLASHTUNE_DB set but blank means the default file, as README says;
    # where the cache folder could not be named, the warning still blamed "FLASHTUNE_DB=''".
    from flashtune.cache.runtime import read_runtime_winners
    from flashtune.cache.keys import DeviceInfo

    monkeypatch.setattr(once, "_said", {})  # each case's notice is the same, said once
    monkeypatch.setenv("FLASHTUNE_DB", blank)
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", "~no_such_user_of_flashtune/cache")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_runtime_winners(DeviceInfo("GPU", "9.0", 132, "3.6.0")) == []
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert messages and all("FLASHTUNE_DB" not in m for m in messages), messages
    assert "winner database in the cache folder could not be read" in messages[0], messages
    assert "cannot expand" in messages[0], messages


def test_a_password_in_the_url_query_stays_out_of_env_and_messages(capsys, monkeypatch):
    # `flashtune env` (whose output goes into bug reports) and every error message printed
    # FLASHTUNE_DB=postgresql+psycopg2://u@h/db?password=secretpw as given
    monkeypatch.setenv("FLASHTUNE_DB", "postgresql+psycopg2://user@host/db?password=secretpw")
    rc, out, err = _cli(capsys, "env")
    assert rc == 0 and "secretpw" not in out + err and "password=***" in out
    rc, out, err = _cli(capsys, "show")
    assert rc == 2 and "secretpw" not in out + err and "password=***" in err


@pytest.mark.parametrize("text, shown", [
    ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
    ("postgresql://admin@srv:pw@srv.example.com/db", "postgresql://admin@srv:***@srv.example.com/db"),
    ("postgresql://u:p@ss/w:rd@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("error for mysql://u:pw@h/x (no driver)", "error for mysql://u:***@h/x (no driver)"),
    # a password in the query, as psycopg2 and libpq take it (it was shown as given)
    ("postgresql://u@h/db?password=pw", "postgresql://u@h/db?password=***"),
    ("postgresql://u@h/db?sslmode=require&password=p%40w&x=1",
     "postgresql://u@h/db?sslmode=require&password=***&x=1"),
    # Defect: libpq's sslpassword (the client key's passphrase) was shown as given
    ("postgresql://u@h/db?sslpassword=hunter2", "postgresql://u@h/db?sslpassword=***"),
    ("postgresql://u@h/db?sslmode=require&SSLPassword=k&x=1",
     "postgresql://u@h/db?sslmode=require&SSLPassword=***&x=1"),
    # no password: unchanged, SQLite paths with ":" and "@" included
    ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
    ("sqlite:////tmp/a:b@c/x.sqlite", "sqlite:////tmp/a:b@c/x.sqlite"),
    ("sqlite:///a:b@c.sqlite", "sqlite:///a:b@c.sqlite"),
])
def test_hide_password(text, shown):
    from flashtune.cache.engine import hide_password

    assert hide_password(text) == shown


@pytest.mark.parametrize("spelling", ["absolute", "dot-relative", "relative"])
def test_export_refuses_to_overwrite_its_own_database(tmp_path, capsys, monkeypatch, spelling):
    # `flashtune export tuned.sqlite --db tuned.sqlite` used to replace the database by the
    # JSON export: every tuned winner lost, exit code 0
    monkeypatch.chdir(tmp_path)
    db_path = tmp_path / "tuned.sqlite"
    with TuneDB(str(db_path)) as db:
        db.upsert_winner(DEV, FAMILY, KEY, row_config(), median_ms=1.0, p20_ms=1.0, p80_ms=1.0,
                         trials=1)
    target = {"absolute": str(db_path), "dot-relative": "./tuned.sqlite",
              "relative": "tuned.sqlite"}[spelling]
    rc, _, err = _cli(capsys, "export", target, "--db", f"sqlite:///{db_path}")
    assert rc == 2 and "is the winner database itself" in err and "Traceback" not in err
    with TuneDB(str(db_path), read_only=True) as db:
        assert [w.key for w in db.winners()] == [KEY]
    rc, _, _ = _cli(capsys, "export", str(tmp_path / "out.json"), "--db", str(db_path))
    assert rc == 0  # another target still works


def test_what_export_writes_imports_again(tmp_path, capsys):
    # a row with an empty flashtune_version was exported, and then made import reject the whole
    # file ("flashtune_version must be a non-empty str"): now the reader skips it, with a warning
    source, target = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    other = KEY.make(KEY.op, KEY.dtype, {"rows_bucket": 8, "cols_bucket": 4096})
    with TuneDB(str(source)) as db:
        for key in (KEY, other):
            db.upsert_winner(DEV, FAMILY, key, row_config(), median_ms=1.0, p20_ms=1.0,
                             p80_ms=1.0, trials=1)
    conn = sqlite3.connect(source)
    with conn:
        conn.execute("UPDATE ft_v1_winners SET flashtune_version = '' WHERE bucket = ?",
                     (other.bucket_json(),))
    conn.close()
    export = tmp_path / "winners.json"
    with pytest.warns(CacheWarning, match="flashtune_version"):
        with TuneDB(str(source), read_only=True) as db:
            assert db.export_json(export) == 1
    rc, _, err = _cli(capsys, "import", str(export), "--db", str(target))
    assert rc == 0, err
    with TuneDB(str(target), read_only=True) as db:
        assert [w.key for w in db.winners()] == [KEY]


# -- the kernel cache ---------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_fallback_kernel_folder_must_be_private(tmp_path, monkeypatch):
    # The fallback folder has a predictable name in the shared temp folder, and its kernels are
    # imported: one prepared by another user (writable by others) must not be used.
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(blocker / "sub"))  # cannot be written
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(loader_mod, "fallback_kernel_dir", lambda: shared / "kernels")
    config = default_config("softmax", SoftmaxProblem(3, 40, "float32")).as_dict()
    # Refused: since kernels run without a file where no folder can hold one (68b23f7), the
    # refusal is a warning and the kernel runs from memory; nothing is written to or read
    # from the shared folder.
    monkeypatch.setattr(once, "_said", {})
    monkeypatch.setattr(loader_mod, "_loaded", {})
    with pytest.warns(RuntimeWarning, match="not a private folder"):
        module = load_variant("softmax", config)
    assert "source not written" in module.__spec__.origin
    assert not (shared / "kernels").exists()
    monkeypatch.setattr(loader_mod, "_loaded", {})  # load again, now that the folder is ours
    shared.chmod(0o700)
    with pytest.warns(RuntimeWarning, match="FLASHTUNE_CACHE_DIR"):
        module = load_variant("softmax", config)
    assert module.__file__.startswith(str(shared / "kernels"))
    assert (shared / "kernels").stat().st_mode & 0o077 == 0
