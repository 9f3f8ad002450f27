"""Every notice flashtune gives at run time names the user's line, not a line inside flashtune:
a warning's file and line are what Python prints first, and "flashtune/cache/runtime.py:48"
tells a user nothing about which of their calls met the broken cache."""

from __future__ import annotations

import warnings

import torch

import flashtune
from flashtune import once
from flashtune.cache import CacheWarning
from flashtune.dispatch import DispatchWarning

from dispatch_helpers import DEVICE, fresh_db, row_config, seed  # noqa: F401


def _notices(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [w for w in caught if issubclass(w.category, (CacheWarning, DispatchWarning))]


def test_a_corrupt_database_is_said_at_the_users_call(fresh_db, monkeypatch):
    monkeypatch.setattr(once, "_said", {})
    fresh_db.write_bytes(b"this is not an SQLite file" * 40)
    x = torch.randn(3, 40, device=DEVICE)
    y, said = _notices(lambda: flashtune.softmax(x, dim=-1))
    torch.testing.assert_close(y, torch.softmax(x, -1))
    assert said, "the corrupt database was not said"
    assert [(w.filename, w.category) for w in said] == [(__file__, CacheWarning)] * len(said)


def test_a_tuned_config_that_fails_is_said_at_the_users_call(fresh_db, monkeypatch):
    """A stored winner that cannot run here falls back with a DispatchWarning, said where the
    user called log_softmax (through nn.Module, torch's op dispatch and our own frames)."""
    from flashtune.dispatch import plans

    monkeypatch.setattr(once, "_said", {})
    seed(fresh_db, "log_softmax", "float32", (6, 52), row_config(64, rows=2))
    real = plans.load_variant

    def picky(op, config):  # as a compiler that rejects the tuned config would
        if config["rows_per_program"] == 2:
            raise RuntimeError("out of resources (simulated)")
        return real(op, config)

    monkeypatch.setattr(plans, "load_variant", picky)

    class Model(torch.nn.Module):
        def forward(self, t):
            return flashtune.log_softmax(t, dim=-1)  # the line a notice should name

    x = torch.randn(6, 52, device=DEVICE)
    y, said = _notices(lambda: Model()(x))
    torch.testing.assert_close(y, torch.log_softmax(x, -1))
    assert [w.category for w in said] == [DispatchWarning]
    assert said[0].filename == __file__ and "out of resources" in str(said[0].message)


def test_a_corrupt_database_is_said_at_the_users_attention_call(fresh_db, monkeypatch):
    monkeypatch.setattr(once, "_said", {})
    fresh_db.write_bytes(b"this is not an SQLite file" * 40)
    q, k, v = (torch.randn(1, 2, 16, 16, device=DEVICE, dtype=torch.float16) for _ in range(3))
    out, said = _notices(lambda: flashtune.attention(q, k, v))
    expected = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
    torch.testing.assert_close(out.double(), expected, atol=2e-3, rtol=0)
    assert said
    assert [(w.filename, w.category) for w in said] == [(__file__, CacheWarning)] * len(said)


def test_a_bad_switch_at_import_is_said_at_the_users_import(tmp_path):
    """A FLASHTUNE_* switch's bad value is said when flashtune is imported: at the user's
    `import flashtune`, not inside flashtune. warnings.warn skips importlib's frames when it
    counts stacklevel, so they must not count (they named flashtune/dispatch/attention.py)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "user.py"
    script.write_text("import warnings\nwarnings.simplefilter('always')\nimport torch\n"
                      "import flashtune  # the line a notice should name\n")
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "FLASHTUNE_LOG": "maybe",
           "FLASHTUNE_DB": f"sqlite:///{tmp_path / 'none.sqlite'}",
           "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{script}:4: DispatchWarning: FLASHTUNE_LOG='maybe'" in done.stderr, done.stderr
