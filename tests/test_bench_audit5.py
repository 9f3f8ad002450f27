"""Audit 5 (bench report): a tampered attention dtype, which names a plot file, is refused."""

from __future__ import annotations

import json

import pytest

from flashtune.bench.report import SCHEMA, load_result
from flashtune.cli import main


def _result(dtype: str) -> dict:
    row = {"op": "attention", "shape": "d16-b1-h2-n40", "dtype": dtype, "impl": "flashtune",
           "status": "failed", "error": "x", "B": 1, "H": 2, "N": 40, "D": 16, "causal": True}
    return {"schema": SCHEMA, "meta": {}, "softmax": [], "attention": [row]}


@pytest.mark.parametrize("dtype", ["x/y", "../float16", "float16\n", ""])
def test_report_refuses_an_attention_dtype_that_is_no_file_name_part(tmp_path, capsys, dtype):
    # Was: plot_attention_<dtype>.png written as is: "x/y" wrote into a folder plot_attention_x
    # when there was one (else an OSError naming no row); "float16\n" left a plot that the
    # next render's clean-up does not recognise.
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_result(dtype)))
    (tmp_path / "plot_attention_x").mkdir()
    with pytest.raises(ValueError, match=r"(?s)attention row 0 .*'dtype' must be a name"):
        load_result(path)
    assert main(["report", str(path)]) == 2
    assert "attention row 0" in capsys.readouterr().err
    assert not any((tmp_path / "plot_attention_x").iterdir())


def test_report_still_renders_a_plain_attention_dtype(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_result("float16")))
    assert main(["report", str(path)]) == 0
    assert (tmp_path / "plot_attention_float16.png").is_file()
