"""``flashtune source`` prints readable Triton source for a chosen variant."""

from __future__ import annotations

import ast
import subprocess
import sys

from flashtune.cli import main


def test_source_prints_variant(capsys):
    assert main(["source", "softmax", "--regime", "split", "--splits", "8", "--block", "4096",
                 "--num-stages", "2"]) == 0
    out = capsys.readouterr().out
    ast.parse(out)
    assert "@triton.jit" in out and "splits           = 8" in out and "BLOCK=4096" in out


def test_source_default_for_shape(capsys):
    assert main(["source", "log_softmax_backward", "--shape", "16x1048576"]) == 0
    out = capsys.readouterr().out
    assert 'regime "split"' in out


def test_source_rejects_bad_values(capsys):
    assert main(["source", "softmax", "--regime", "row", "--block", "100"]) == 2
    assert "outside the space" in capsys.readouterr().err
    assert main(["source", "softmax_backward", "--exp2", "true"]) == 2
    assert "has no tunable" in capsys.readouterr().err


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "flashtune", "source", "softmax"],
                            capture_output=True, text=True, check=True)
    assert "@triton.jit" in result.stdout


def test_source_attention(capsys):
    assert main(["source", "attention_fwd", "--causal", "--shape", "1x8x1000x64",
                 "--BLOCK-M", "64"]) == 0
    out = capsys.readouterr().out
    ast.parse(out)
    assert "@triton.jit" in out


def test_source_shape_must_match_the_family(capsys):
    assert main(["source", "softmax", "--shape", "2x3x4"]) == 2
    assert "ROWSxCOLS" in capsys.readouterr().err
    assert main(["source", "attention_fwd", "--shape", "4096x4096"]) == 2
    assert "BxHxNxD" in capsys.readouterr().err
