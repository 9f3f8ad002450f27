"""The runtime dispatcher: exact / nearest / default choices on a seeded database, broken
databases, environment switches, logging and the no-database-on-the-hot-path promise.

Without a GPU everything runs in Triton's interpreter on CPU tensors (tests/conftest.py).
"""

from __future__ import annotations

import logging
import os
import warnings

import pytest
import torch

import flashtune
import flashtune.dispatch as dispatch
import flashtune.dispatch.plans as plans
from flashtune import once
from flashtune.cache import CacheWarning
from flashtune.dispatch import DispatchWarning
from flashtune.gen.softmax_ops import softmax_forward
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

from dispatch_helpers import DEVICE, fresh_db, row_config, seed, sm_count  # noqa: F401

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]


def _ours(caught) -> list:
    return [w for w in caught if issubclass(w.category, (CacheWarning, DispatchWarning))]


def test_exact_bucket_wins(fresh_db):
    tuned = row_config(64, rows=2)
    seed(fresh_db, "softmax", "float32", (8, 64), tuned)
    picked = dispatch.choice("softmax", (5, 40), "float32", DEVICE)  # bucket 8x64
    assert picked.how == "exact"
    assert picked.config.as_dict() == tuned
    x = torch.randn(5, 40, device=DEVICE)
    torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
    # the same decision through the choose hook of the generator's user-level wrapper
    seen = []

    def hook(op, problem, device):
        config = dispatch.RUNTIME.dispatcher.choose(op, problem, device)
        seen.append(config)
        return config

    torch.testing.assert_close(softmax_forward(x, -1, choose=hook), torch.softmax(x, -1))
    assert [c.as_dict() for c in seen] == [tuned]


@pytest.mark.parametrize("faster_row", ["stored", "respelled"])
def test_one_bucket_stored_twice_serves_the_faster_winner(fresh_db, faster_row):
    # Defect (audit): a row copied by hand with its bucket JSON spelled another way (keys in
    # another order) is a second winner for one bucket; the dispatcher served whichever row
    # the database returned last, the slower one included.
    import json
    import sqlite3

    slow, fast = row_config(64, rows=2), row_config(64, rows=4)
    key = seed(fresh_db, "softmax", "float32", (8, 64),
               fast if faster_row == "stored" else slow, median_ms=1.0)
    respelled = json.dumps(dict(reversed(key.bucket)))  # same fields, other key order
    assert respelled != key.bucket_json()
    conn = sqlite3.connect(fresh_db)
    with conn:
        row = conn.execute("SELECT * FROM ft_v1_winners").fetchone()
        names = [c[1] for c in conn.execute("PRAGMA table_info(ft_v1_winners)")]
        values = dict(zip(names, row))
        median = 0.5 if faster_row == "respelled" else 2.0
        values.update(bucket=respelled, median_ms=median, p20_ms=median, p80_ms=median,
                      config=json.dumps(fast if faster_row == "respelled" else slow))
        conn.execute(f"INSERT INTO ft_v1_winners ({', '.join(names)}) "  # names from the schema
                     f"VALUES ({', '.join('?' * len(names))})", list(values.values()))
    conn.close()
    dispatch.reset()
    picked = dispatch.choice("softmax", (5, 40), "float32", DEVICE)
    assert picked.how == "exact" and picked.config.as_dict() == fast
    x = torch.randn(5, 40, device=DEVICE)
    torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))


def test_nearest_fitting_bucket(fresh_db):
    # (16, 52) has bucket 16x64 (rows of whole 16-byte vectors). The closest tuned bucket (16x32, distance 1) holds a row
    # config too narrow for 50 columns; the next one (4x64, distance 2) fits and wins over
    # the far one (1024x64, distance 6).
    seed(fresh_db, "log_softmax", "float32", (16, 32), row_config(32))
    seed(fresh_db, "log_softmax", "float32", (4, 64), row_config(64, rows=4))
    seed(fresh_db, "log_softmax", "float32", (1024, 64), row_config(64, rows=8))
    picked = dispatch.choice("log_softmax", (16, 52), "float32", DEVICE)
    assert picked.how == "nearest"
    assert dict(picked.tuned_bucket) == {"rows_bucket": 4, "cols_bucket": 64}
    assert picked.config.as_dict() == row_config(64, rows=4)
    x = torch.randn(16, 52, device=DEVICE)
    torch.testing.assert_close(flashtune.log_softmax(x), torch.log_softmax(x, -1))


def test_odd_widths_take_only_winners_tuned_on_their_own_row_grain(fresh_db):
    """Rows of whole 16-byte vectors, and rows of each smaller grain, have separate buckets: a
    winner tuned on 4096 x 65536 lacks the aligned walk that 4096 x 50257 needs, and narrow
    odd rows want other tiles than narrow rows of grain 4 (200000 x 33 fp16 ran 2x slower
    with 200000 x 36's config, H100)."""
    aligned = dict(row_config(8192, warps=16), regime="online", lane_stats=True)
    odd = dict(aligned, align=True, block=4096)
    seed(fresh_db, "softmax", "float16", (4096, 65536), aligned)
    picked = dispatch.choice("softmax", (4096, 50257), "float16", DEVICE)
    assert picked.how == "default" and picked.config["align"] is True
    assert picked.bucket == {"rows_bucket": 4096, "cols_bucket": 65536, "row_grain": 1}
    assert dispatch.choice("softmax", (4096, 65520), "float16", DEVICE).how == "exact"
    # 8 mod 16 columns are a grain of their own (Triton sees no multiple of 16 there, and
    # the aligned one's winner, without the aligned walk, ran 2.2x slower: H200, session 36).
    picked = dispatch.choice("softmax", (4096, 65528), "float16", DEVICE)
    assert picked.how == "default" and picked.config["align"] is True
    assert picked.bucket == {"rows_bucket": 4096, "cols_bucket": 65536, "row_grain": 8}

    seed(fresh_db, "softmax", "float16", (2048, 40001), odd)
    dispatch.reset()
    for shape, how in [((4096, 50257), "nearest"), ((2048, 33333), "exact")]:
        picked = dispatch.choice("softmax", shape, "float16", DEVICE)
        assert (picked.how, picked.config.as_dict()) == (how, odd), shape
        assert dict(picked.tuned_bucket)["row_grain"] == 1
    # Another grain of the same columns (40002: grain 2) takes neither winner: its own default.
    assert dispatch.choice("softmax", (2048, 40002), "float16", DEVICE).how == "default"
    # An aligned width of the odd winner's bucket keeps the aligned one's winner (nearest).
    picked = dispatch.choice("softmax", (2048, 40000), "float16", DEVICE)
    assert picked.how == "nearest" and picked.config.as_dict() == aligned


def test_narrow_rows_of_one_grain_do_not_take_another_grains_winner(fresh_db):
    seed(fresh_db, "softmax", "float16", (8, 36), row_config(64, rows=32, warps=4))
    picked = dispatch.choice("softmax", (8, 33), "float16", DEVICE)
    assert picked.how == "default" and picked.bucket["row_grain"] == 1
    assert (picked.config["rows_per_program"], picked.config["num_warps"]) == (8, 1)
    assert dispatch.choice("softmax", (8, 60), "float16", DEVICE).how == "exact"  # grain 4 too
    x = torch.randn(8, 33, device=DEVICE, dtype=torch.float16)
    torch.testing.assert_close(flashtune.softmax(x).float(), torch.softmax(x.float(), -1),
                               atol=2e-3, rtol=2e-2)


def test_split_winners_serve_only_their_row_count(fresh_db):
    # A coop winner tuned on 1024 rows (16 programs per row) is not "nearest" for 4096 rows:
    # the problem gets the heuristic default; the same rows bucket still takes it.
    coop = dict(row_config(4096, warps=8), regime="coop", splits=16)
    seed(fresh_db, "softmax", "float32", (1024, 65536), coop)
    picked = dispatch.choice("softmax", (4096, 50257), "float32", DEVICE)
    assert picked.how == "default"
    picked = dispatch.choice("softmax", (1024, 30000), "float32", DEVICE)
    assert picked.how == "nearest" and picked.config.as_dict() == coop


def test_row_per_program_winners_do_not_serve_too_few_rows(fresh_db):
    # An online winner tuned on 1024 rows (one program per row) would leave most SMs idle on
    # 16 rows: they get the heuristic default (split on a GPU); 256 rows still take it.
    # A winner tuned on few rows may serve as many or more rows (the second seed).
    online = dict(row_config(4096, warps=8), regime="online", num_stages=2)
    seed(fresh_db, "softmax", "float32", (1024, 200000), online)
    seed(fresh_db, "softmax", "float32", (8, 3000), row_config(4096, rows=1, warps=8))
    picked = dispatch.choice("softmax", (16, 200000), "float32", DEVICE)
    assert picked.how == "default"
    # 128 rows (a bucket of at most 128) cannot fill 132 SMs with one program per row.
    assert dispatch.choice("softmax", (128, 262144), "float32", DEVICE).how == "default"
    picked = dispatch.choice("softmax", (256, 200000), "float32", DEVICE)
    assert picked.how == "nearest" and picked.config.as_dict() == online
    assert dispatch.choice("softmax", (64, 3000), "float32", DEVICE).how == "nearest"


def test_winners_serve_only_widths_their_tiles_suit(fresh_db):
    # A row winner's tile is its rows' width: 8192 x 4096's (block 4096, a row per program)
    # served 65536 x 128 as "nearest" on an H100 at 0.17x the default. Chunk loops longer
    # than the row are refused too; equal widths and wider rows for chunks still transfer.
    seed(fresh_db, "log_softmax_backward", "float16", (8192, 4096),
         row_config(4096, warps=8, fwd=False))
    online = dict(row_config(8192, warps=8), regime="online", num_stages=2)
    seed(fresh_db, "softmax", "float32", (1024, 65536), online)
    assert dispatch.choice("log_softmax_backward", (65536, 128), "float16", DEVICE).how == "default"
    picked = dispatch.choice("log_softmax_backward", (16384, 3008), "float16", DEVICE)
    assert picked.how == "nearest" and picked.config["block"] == 4096
    assert dispatch.choice("softmax", (2048, 3000), "float32", DEVICE).how == "default"
    assert dispatch.choice("softmax", (2048, 5000), "float32", DEVICE).how == "nearest"


def test_winners_chosen_from_an_older_softmax_space_are_not_served(fresh_db):
    """Row tiles below 16 columns came with the softmax spaces' revision 2: a winner tuned
    before (a 16-column tile for rows of 5, up to 2.8x slower than today's default on an
    H100) carries the templates-only hash, so it is a winner of another family: not served,
    and the new revision's winner is. Attention's space has no new revision: its hash is its
    templates' alone, and its winners stay current."""
    from flashtune.gen import render, template_family_hash
    from flashtune.gen.registry import TEMPLATE_FAMILIES

    templates_only = render.template_family_hash(TEMPLATE_FAMILIES["softmax"])
    assert template_family_hash("softmax") != templates_only
    assert template_family_hash("attention_fwd") == render.template_family_hash(
        TEMPLATE_FAMILIES["attention_fwd"])
    seed(fresh_db, "softmax", "float16", (4096, 5), row_config(16, rows=64, warps=2),
         family_hash=templates_only)
    picked = dispatch.choice("softmax", (4096, 5), "float16", DEVICE)
    assert picked.how == "default" and picked.config["block"] == 8
    seed(fresh_db, "softmax", "float16", (4096, 5), row_config(8, rows=128, warps=2))
    dispatch.reset()
    picked = dispatch.choice("softmax", (4096, 5), "float16", DEVICE)
    assert picked.how == "exact" and picked.config["rows_per_program"] == 128


def test_default_when_nothing_fits(fresh_db):
    seed(fresh_db, "softmax", "float16", (8, 64), row_config(64))  # other dtype
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64),
         family_hash="0" * 16)  # tuned on other templates: stale
    seed(fresh_db, "softmax", "float32", (8, 16), row_config(16))  # too narrow for 40 columns
    problem = SoftmaxProblem(8, 40, "float32")
    picked = dispatch.choice("softmax", (8, 40), "float32", DEVICE)
    assert picked.how == "default"
    assert picked.config == default_config("softmax", problem, sm_count=sm_count())


def test_missing_database_defaults_and_warns_once(fresh_db):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.randn(3, 20, device=DEVICE)
        for _ in range(3):
            torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
        torch.testing.assert_close(flashtune.softmax(x[:, :7]), torch.softmax(x[:, :7], -1))
    assert len(_ours(caught)) == 1, [str(w.message) for w in caught]
    assert not fresh_db.exists(), "a runtime read must not create the database"


def _no_tables_wal(path) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # writes SQLite's header: a database, no tables
    conn.close()


@pytest.mark.parametrize("make", [lambda p: p.write_bytes(b""), _no_tables_wal],
                         ids=["zero-bytes", "no-tables"])
def test_empty_database_file_is_an_empty_cache_without_warning(fresh_db, make):
    # Defect: a 0-byte file (SQLite's empty database: one a tuner has just created, before its
    # tables) warned "holds no flashtune schema v1 winners table", as if it were another
    # program's file; `flashtune show` reads it as a database with no winners, and so does the
    # runtime now: defaults, no warning, the file left as it was.
    make(fresh_db)
    before = fresh_db.read_bytes()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.randn(3, 20, device=DEVICE)
        for _ in range(2):
            torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
        picked = dispatch.choice("softmax", (3, 20), "float32", DEVICE)
    assert picked.how == "default"
    assert _ours(caught) == [], [str(w.message) for w in _ours(caught)]
    assert fresh_db.read_bytes() == before


def test_broken_database_correct_results_one_warning(fresh_db):
    fresh_db.write_bytes(os.urandom(4096))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for shape in ((4, 30), (2, 100), (6, 8)):
            x = torch.randn(shape, device=DEVICE)
            for _ in range(2):
                torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
                torch.testing.assert_close(flashtune.log_softmax(x), torch.log_softmax(x, -1))
        picked = dispatch.choice("softmax", (4, 30), "float32", DEVICE)
    assert picked.how == "default"
    ours = _ours(caught)
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "flashtune" in str(ours[0].message)


def test_no_database_access_on_hot_path(fresh_db):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64))
    queries = []

    def count(*args, **kwargs):
        queries.append(args[2] if len(args) > 2 else None)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        x = torch.randn(8, 64, device=DEVICE)
        flashtune.softmax(x)  # warm-up: loads the table (the one read)
        assert queries, "the warm-up call should have read the winner table"
        queries.clear()
        for _ in range(100):
            flashtune.softmax(x)
        # new problems after warm-up use the in-memory table too
        flashtune.softmax(torch.randn(3, 10, device=DEVICE))
        flashtune.log_softmax(x)
        assert queries == []
    finally:
        event.remove(Engine, "before_cursor_execute", count)


def test_repeated_calls_reuse_the_plan(fresh_db, monkeypatch):
    x = torch.randn(4, 33, device=DEVICE)
    first = flashtune.softmax(x)
    calls = []
    real = plans.load_variant
    monkeypatch.setattr(plans, "load_variant", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(dispatch.RUNTIME.dispatcher, "choose",
                        lambda *a: pytest.fail("decision not memoized"))
    for _ in range(5):
        torch.testing.assert_close(flashtune.softmax(x), first)
    assert calls == []


def test_disable_switch_uses_plain_torch(fresh_db, monkeypatch):
    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
    dispatch.reset()
    monkeypatch.setattr(plans, "load_variant", lambda *a: pytest.fail("kernel loaded while disabled"))
    x = torch.randn(3, 17, device=DEVICE)
    assert torch.equal(flashtune.softmax(x, 0), torch.softmax(x, 0))
    assert torch.equal(flashtune.log_softmax(x), torch.log_softmax(x, -1))


def test_disable_switch_makes_the_backward_torch_too(fresh_db, monkeypatch):
    """Defect: FLASHTUNE_DISABLE=1 made the forward torch's, but the backward op
    (torch.ops.flashtune.softmax_backward: what the registered op's autograd runs under
    torch.compile, and what `flashtune bench --ops backward` times) still launched our kernels."""
    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
    dispatch.reset()
    monkeypatch.setattr(plans, "load_variant", lambda *a: pytest.fail("kernel loaded while disabled"))
    x = torch.randn(3, 17, device=DEVICE, requires_grad=True)
    g = torch.randn(3, 17, device=DEVICE)
    for log, torch_op in ((False, torch.softmax), (True, torch.log_softmax)):
        op = torch.ops.flashtune.log_softmax if log else torch.ops.flashtune.softmax
        (ours,) = torch.autograd.grad(op(x, -1), x, g)
        (theirs,) = torch.autograd.grad(torch_op(x, -1), x, g)
        assert torch.equal(ours, theirs)
        y = torch_op(x, 0).detach()
        assert torch.equal(dispatch.RUNTIME.backward(y, g, 0, log),
                           plans.torch_backward(y, g, 0, log))


def test_cpu_without_interpreter_is_torch(fresh_db, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    dispatch.reset()
    monkeypatch.setattr(plans, "load_variant", lambda *a: pytest.fail("kernel used on CPU"))
    x = torch.randn(3, 17)
    torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1), rtol=0, atol=0)
    torch.testing.assert_close(flashtune.log_softmax(x, 0), torch.log_softmax(x, 0), rtol=0, atol=0)


@pytest.mark.parametrize("value, on", [("1", True), ("TRUE", True), (" on ", True), ("yes", True),
                                       ("0", False), ("false", False), ("Off", False),
                                       ("no", False), ("", False)])
def test_boolean_switches_read_the_usual_spellings(monkeypatch, value, on):
    from flashtune.dispatch.settings import Settings

    monkeypatch.setenv("FLASHTUNE_DISABLE", value)
    monkeypatch.setenv("FLASHTUNE_LOG", value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = Settings.from_env()
    assert settings.disabled is on and settings.log is on


def test_boolean_switch_of_unknown_value_warns_once(monkeypatch):
    """Defect: FLASHTUNE_DISABLE=2 (or a typo, "ture") was silently taken as off."""
    from flashtune.dispatch.settings import Settings

    monkeypatch.setenv("FLASHTUNE_DISABLE", "ture")
    # The message starts with the switch: the CLI puts "flashtune <command>: warning:" first,
    # and a "flashtune:" of its own read twice there.
    with pytest.warns(DispatchWarning, match="^FLASHTUNE_DISABLE='ture' is ignored"):
        assert Settings.from_env().disabled is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Settings.from_env().disabled is False  # once per value


@pytest.mark.parametrize("switch", ["FLASHTUNE_DISABLE", "FLASHTUNE_LOG"])
def test_readme_filter_recipe_lets_a_bad_switch_value_through(tmp_path, switch):
    """Defect: with torch imported first (any model), importing flashtune reads the switches,
    and an unknown value's DispatchWarning raised out of that import under `python -W error`.
    So `from flashtune.dispatch import DispatchWarning`, which the README's recipe needs to
    let its notices through, itself raised (pytest's `default::flashtune...DispatchWarning`
    filter line stopped the whole session the same way); the notice must wait for the filter."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import warnings, torch\n"
            "from flashtune.cache.errors import CacheWarning\n"
            "from flashtune.dispatch import DispatchWarning\n"
            "warnings.filterwarnings('default', category=CacheWarning)\n"
            "warnings.filterwarnings('default', category=DispatchWarning)\n"
            "import flashtune\n"
            "x = torch.randn(3, 17)\n"
            "torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))\n"
            "flashtune.softmax(x)\n"
            "print('ran')\n")
    root = Path(__file__).parent.parent
    env = dict(os.environ, FLASHTUNE_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1",
               FLASHTUNE_DB=f"sqlite:///{tmp_path / 'missing.sqlite'}", **{switch: "ture"},
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ran", out.stderr[-2000:]
    # Said once, at the first call, as the missing database's notice is.
    assert out.stderr.count(f"{switch}='ture' is ignored") == 1, out.stderr
    assert out.stderr.count("missing.sqlite does not exist") == 1, out.stderr


def test_log_switch_logs_once_per_problem(fresh_db, monkeypatch, caplog):
    monkeypatch.setenv("FLASHTUNE_LOG", "1")
    dispatch.reset()
    seed(fresh_db, "softmax", "float32", (4, 32), row_config(32))
    x = torch.randn(4, 32, device=DEVICE)
    with caplog.at_level(logging.INFO, logger="flashtune"):
        for _ in range(3):
            flashtune.softmax(x)
        flashtune.softmax(torch.randn(2, 300, device=DEVICE))
    records = [r for r in caplog.records if r.name == "flashtune"]
    assert len(records) == 2
    first, second = (r.getMessage() for r in records)
    assert "softmax 4x32 float32" in first and "exact" in first and "'block': 32" in first
    assert "rows_bucket" in first and "source " in first and first.rstrip().endswith(".py")
    assert "2x300" in second and "default" in second


@pytest.mark.parametrize("temp_writable", [True, False], ids=["temp-folder", "memory"])
def test_log_names_where_the_source_really_is(fresh_db, tmp_path, monkeypatch, caplog,
                                               temp_writable):
    # Defect: FLASHTUNE_LOG named <cache>/kernels/<variant>.py whatever happened to it; where
    # that folder cannot be written the file is in the temp folder, or nowhere (the kernel runs
    # from memory), and the logged path was a file that was never written.
    import flashtune.gen.loader as loader_mod

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("FLASHTUNE_LOG", "1")
    fallback = (tmp_path if temp_writable else blocker) / "tmp" / "kernels"
    monkeypatch.setattr(loader_mod, "fallback_kernel_dir", lambda: fallback)
    monkeypatch.setattr(once, "_said", {})
    dispatch.reset()
    x = torch.randn(3, 41, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DispatchWarning)
        with caplog.at_level(logging.INFO, logger="flashtune"):
            torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "flashtune"]
    assert str(blocker / "cache") not in line, line
    if temp_writable:
        logged = line.rsplit("source ", 1)[1].strip()
        assert logged.startswith(str(fallback)) and os.path.isfile(logged), line
    else:
        assert "not written" in line, line


def test_integer_dtype_is_a_type_error(fresh_db):
    with pytest.raises(TypeError, match="torch.int64"):
        flashtune.softmax(torch.arange(6, device=DEVICE).reshape(2, 3))
    with pytest.raises(TypeError, match="torch.bool"):
        flashtune.log_softmax(torch.ones(2, 3, dtype=torch.bool, device=DEVICE))
    with pytest.raises(TypeError, match="input must be a torch.Tensor"):
        flashtune.softmax([1.0, 2.0])


def test_float64_is_computed_by_torch(fresh_db, monkeypatch):
    monkeypatch.setattr(plans, "load_variant", lambda *a: pytest.fail("kernel used for fp64"))
    x = torch.randn(3, 9, dtype=torch.float64, device=DEVICE)
    torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1), rtol=0, atol=0)


def test_bad_dim(fresh_db):
    x = torch.randn(3, 4, device=DEVICE)
    with pytest.raises(IndexError, match="dim=2"):
        flashtune.softmax(x, 2)
    with pytest.raises(TypeError, match="dim must be an int"):
        flashtune.softmax(x, 1.5)


def _fail_two_row_configs(monkeypatch):
    """Make every config of 2 rows per program fail to load, as a compiler that rejects it
    would (the seeded tuned configs below use 2; the defaults do not)."""
    real = plans.load_variant

    def picky(op, config):
        if config["rows_per_program"] == 2:
            raise RuntimeError("out of resources (simulated)")
        return real(op, config)

    monkeypatch.setattr(plans, "load_variant", picky)


def test_the_readme_filters_let_every_fallback_notice_through(fresh_db, monkeypatch):
    """Under warnings-as-errors, the README's pytest filters (default::...) must let both
    fallback notices through: a broken database's CacheWarning and a failing tuned config's
    DispatchWarning. (It named CacheWarning only; the DispatchWarning still raised.)"""
    import importlib
    import re
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    categories = []
    for spec in re.findall(r"`default::([\w.]+)`", readme):
        module, _, name = spec.rpartition(".")
        categories.append(getattr(importlib.import_module(module), name))
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    _fail_two_row_configs(monkeypatch)
    x = torch.randn(6, 52, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # the interpreter's numpy warnings on masked lanes (the module's pytestmark, again)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")
        for category in categories:
            warnings.filterwarnings("default", category=category)
        torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))  # DispatchWarning
        fresh_db.write_bytes(b"not a database" * 100)
        dispatch.reset()
        torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))  # CacheWarning


def test_a_notice_raised_inside_the_plan_under_w_error_keeps_the_tuned_winner(
        fresh_db, monkeypatch, tmp_path):
    # Defect (audit): with every warning an error (python -W error), a notice raised while the
    # tuned config's plan was built or run (here "cannot write generated kernels to ...", the
    # cache folder being under a file) was taken for a failure of the tuned config: the user
    # got "the tuned softmax config ... failed (DispatchWarning: ...)" and the winner was
    # rejected for the device, so the next calls silently took the default config.
    import flashtune.gen.loader as loader_mod

    tuned = row_config(64, rows=2)
    seed(fresh_db, "softmax", "float32", (8, 64), tuned)
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(blocker / "cache"))  # cannot be written
    monkeypatch.setattr(once, "_said", {})  # the notice is once per folder
    dispatch.reset()
    x = torch.randn(6, 52, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")
        with pytest.raises(DispatchWarning, match="^flashtune cannot write generated kernels"):
            flashtune.softmax(x)
    picked = dispatch.choice("softmax", (6, 52), "float32", DEVICE)
    assert picked.how == "exact" and picked.config.as_dict() == tuned


@pytest.mark.parametrize("path", ["hot", "autograd", "backward"])
def test_a_notice_raised_by_a_stored_plan_under_w_error_raises(fresh_db, monkeypatch, path):
    # Defect (audit): a notice made an error by the user's filters (python -W error) inside a
    # stored plan (on CUDA the fast launch's "the fast kernel launch failed ...; launching
    # through Triton's normal path from now on", said once per process) was taken for a failed
    # plan: the plan was dropped and the call decided afresh, which launched the normal way
    # without a word, so the notice was lost for good. Here the plan raises it as the fast
    # launch does (the interpreter has no fast launch).
    import flashtune.dispatch.fast_launch as fast_launch

    monkeypatch.setattr(fast_launch._STATE, "failed", None)
    x = torch.randn(6, 52, device=DEVICE, requires_grad=path == "autograd")
    y, dy = torch.softmax(x.detach(), -1), torch.randn(6, 52, device=DEVICE)
    if path == "backward":
        call, plans_of_op = (lambda: dispatch.RUNTIME.backward(y, dy, 1, False),
                             dispatch.RUNTIME.backward_plans["softmax"])
    else:  # the public op's stored plan (no_grad), or the runtime's (autograd records it)
        call, plans_of_op = (lambda: flashtune.softmax(x)), dispatch.RUNTIME.plans["softmax"]
    call()
    assert plans_of_op

    def noisy(plan):
        def run(*tensors):
            fast_launch._fail(RuntimeError("simulated"), "launching")
            return plan(*tensors)
        return run

    for key, plan in list(plans_of_op.items()):
        monkeypatch.setitem(plans_of_op, key, noisy(plan))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")
        with pytest.raises(fast_launch.FastLaunchWarning, match="fast kernel launch failed"):
            call()


def test_failing_tuned_config_falls_back_to_default(fresh_db, monkeypatch):
    """A tuned variant that cannot be built or launched here must not break the model."""
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    seed(fresh_db, "softmax_backward", "float32", (8, 64), row_config(64, rows=2, fwd=False))
    _fail_two_row_configs(monkeypatch)
    x = torch.randn(6, 52, device=DEVICE, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with torch.no_grad():
                torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
        flashtune.softmax(x).sum().backward()
    assert len([w for w in caught if issubclass(w.category, DispatchWarning)]) == 2
    assert dispatch.choice("softmax", (6, 52), "float32", DEVICE).how == "default"
    torch.testing.assert_close(x.grad, torch.zeros_like(x), atol=1e-6, rtol=0)


def test_the_readme_says_how_a_running_process_sees_a_new_database(fresh_db, monkeypatch,
                                                                   tmp_path):
    """The environment switches (FLASHTUNE_DB among them) and a database's winners are read
    once; a process that calls flashtune before `flashtune tune` / `import`, or before it
    points FLASHTUNE_DB elsewhere, keeps its decisions until flashtune.dispatch.reset(). The
    README named no way to reload (only a docstring did): the call it names must be that
    one and must make the new database's winner serve the same shape."""
    import re
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    named = re.findall(r"`(flashtune\.dispatch\.\w+)\(\)`", readme)
    assert named == ["flashtune.dispatch.reset"] * len(named) and named
    x = torch.randn(8, 64, device=DEVICE)
    flashtune.softmax(x)
    assert dispatch.choice("softmax", (8, 64), "float32", DEVICE).how == "default"
    other = tmp_path / "other.sqlite"
    seed(other, "softmax", "float32", (8, 64), row_config(64, rows=2))
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{other}")
    assert dispatch.choice("softmax", (8, 64), "float32", DEVICE).how == "default"  # read once
    getattr(dispatch, named[0].rpartition(".")[2])()
    picked = dispatch.choice("softmax", (8, 64), "float32", DEVICE)
    assert picked.how == "exact" and picked.config["rows_per_program"] == 2
    torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))


def test_choice_of_rows_too_long_for_the_kernels_says_torch_computes_them(fresh_db):
    """Rows of more than MAX_COLS columns are computed by torch (the kernels' column offsets
    are int32). dispatch.choice (and `flashtune source --dispatch`) answered a "default" split
    kernel for them, one that never runs there."""
    from flashtune.gen.softmax_space import MAX_COLS

    for op in ("softmax", "log_softmax_backward"):
        with pytest.raises(ValueError, match="shape.*torch"):
            dispatch.choice(op, (1, MAX_COLS + 1), "float16", DEVICE)
        assert dispatch.choice(op, (1, MAX_COLS), "float16", DEVICE).how == "default"
