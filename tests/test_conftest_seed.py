"""The test setup's own environment variable (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


@pytest.mark.parametrize("seed", ["abc", "1.5", "0x10", str(2**63)])
def test_a_bad_test_seed_is_a_usage_error_naming_the_variable(seed, tmp_path):
    # Defect: a FLASHTUNE_TEST_SEED that is no whole number ended the run in "ImportError while
    # loading conftest" and a ValueError traceback; one past 64 bits failed every test in
    # torch.manual_seed ("Overflow when unpacking long long").
    env = {**os.environ, "FLASHTUNE_TEST_SEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         str(TESTS / "test_conftest_seed.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "FLASHTUNE_TEST_SEED" in output and "whole number" in output, output
    assert "Traceback" not in output and "ImportError" not in output, output


def test_a_good_test_seed_is_taken(tmp_path):
    env = {**os.environ, "FLASHTUNE_TEST_SEED": "-7"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         str(TESTS / "test_conftest_seed.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
