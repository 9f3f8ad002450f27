"""Test setup: without a CUDA GPU, kernels run in Triton's interpreter on CPU tensors.

TRITON_INTERPRET must be set before any kernel module is loaded (Triton picks the interpreter
when ``@triton.jit`` runs); flashtune loads kernels lazily, so setting it here is early enough.
Each session also gets its own kernel-source folder and database, so the user's cache is never
touched.
"""

from __future__ import annotations

import os
import tempfile
import zlib

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        # xdist workers on the CPU: each takes its share of the cores for torch's threads, so
        # that two workers on two cores do not run four threads (timing tests included).
        torch.set_num_threads(max(1, torch.get_num_threads() // workers))

_session_dir = tempfile.mkdtemp(prefix="flashtune-tests-")
# Set, not setdefault: a user's own FLASHTUNE_CACHE_DIR / FLASHTUNE_DB (a team database) must
# not receive the suite's kernel files, nor feed their winners to tests that expect an empty one.
os.environ["FLASHTUNE_CACHE_DIR"] = os.path.join(_session_dir, "cache")
os.environ["FLASHTUNE_DB"] = "sqlite:///" + os.path.join(_session_dir, "tuned.sqlite")

DEVICE = "cuda" if HAS_CUDA else "cpu"

# Every test draws its random inputs from a seed fixed by its own name, so a run is reproducible
# and a failure seen in CI is seen again locally. FLASHTUNE_TEST_SEED shifts all seeds at once
# (to shake the suite with fresh data: FLASHTUNE_TEST_SEED=7 python -m pytest).
# Read in pytest_configure: a bad value raised there is pytest's one-line usage error, where at
# import it was "ImportError while loading conftest" and a traceback.
SEED_BASE = 0

# Variants validated in this session: (op, dtype, config items), filled by record_variant.
_VALIDATED: set[tuple] = set()


def _seed_base(text: str) -> int:
    """FLASHTUNE_TEST_SEED: a whole number (empty: 0) within 64 signed bits, so that it plus a
    test's crc32 stays within what torch.manual_seed takes (at most 2**64 - 1)."""
    try:
        seed = int(text.strip() or "0")
    except ValueError:
        seed = None
    if seed is None or not -(2**63) <= seed < 2**63:
        raise pytest.UsageError(f"FLASHTUNE_TEST_SEED must be a whole number from -2**63 to "
                                f"2**63 - 1 (the base of every test's seed), got {text!r}")
    return seed


def pytest_configure(config):
    global SEED_BASE
    SEED_BASE = _seed_base(os.environ.get("FLASHTUNE_TEST_SEED", ""))


@pytest.fixture(autouse=True)
def _seeded_rng(request):
    torch.manual_seed(SEED_BASE + zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True)
def _keep_triton_interpret(monkeypatch):
    """TRITON_INTERPRET as the session set it, after every test: an in-process
    `flashtune bench --interpret` or `tune --interpret` sets it, and on a GPU machine every
    later test then ran its kernels through the interpreter that Triton was not imported for
    (InterpreterError: "Cannot call @triton.jit'd outside of the scope of a kernel")."""
    value = os.environ.get("TRITON_INTERPRET")
    monkeypatch.setenv("TRITON_INTERPRET", "0" if value is None else value)  # recorded here
    if value is None:
        # (delenv alone records nothing for a variable that is not set: nothing to undo)
        monkeypatch.delenv("TRITON_INTERPRET")


def pytest_report_header(config):
    return f"flashtune: test seed base {SEED_BASE} (FLASHTUNE_TEST_SEED)"


@pytest.fixture
def device() -> str:
    return DEVICE


@pytest.fixture
def record_variant(request):
    """Call with (op, dtype, config) after a variant passed its accuracy check; it counts as
    validated when its test passes (see pytest_runtest_logreport)."""

    def record(op: str, dtype: torch.dtype, config) -> None:
        items = [list(item) for item in sorted(dict(config).items())]
        request.node.user_properties.append((_VARIANT_PROPERTY, (op, str(dtype), items)))

    return record


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (this machine has none)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_addoption(parser, pluginmanager):
    """Without pytest-xdist (a GPU machine set up by hand, or `-p no:xdist`), the README's
    `--numprocesses auto --dist loadfile` is taken and ignored: the tests run in one process,
    as they do with xdist where CUDA is present, instead of pytest refusing the command line.
    (The README spells `-n` out: a conftest may not add a one-letter option.)"""
    # (xdist registers as "xdist" when autoloaded, as "xdist.plugin" when named by -p)
    if not (pluginmanager.hasplugin("xdist") or pluginmanager.hasplugin("xdist.plugin")):
        group = parser.getgroup("flashtune", "without pytest-xdist")
        group.addoption("--numprocesses", dest="numprocesses", default=None,
                        help="ignored: pytest-xdist is not installed (one process)")
        group.addoption("--dist", dest="dist", default="no",
                        help="ignored: pytest-xdist is not installed (one process)")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`--numprocesses auto`: one worker per CPU (at most 8: each imports torch and Triton),
    none with a CUDA GPU, where tests share one device and some time it; xdist's own
    PYTEST_XDIST_AUTO_NUM_WORKERS, where set, decides instead."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip():
        return None  # xdist's hook reads it
    if HAS_CUDA:
        return 0
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


_VARIANT_PROPERTY = "flashtune_validated_variant"


def pytest_runtest_logreport(report):
    """Variants of a test that passed, from its report: in one process and, with pytest-xdist,
    in the controller, which gets each report as its test ends (a worker that crashes later
    loses none of the variants it validated before)."""
    if report.when != "call" or not report.passed:
        return
    for name, value in report.user_properties:
        if name == _VARIANT_PROPERTY:
            op, dtype, config = value
            _VALIDATED.add((op, dtype, tuple(tuple(item) for item in config)))


def pytest_terminal_summary(terminalreporter):
    families: dict[str, int] = {}
    for op, _, _ in _VALIDATED:
        family = op.split("_backward")[0].replace("log_", "")
        families[family] = families.get(family, 0) + 1
    mode = "GPU" if HAS_CUDA else "Triton interpreter"
    for family, count in sorted(families.items()):
        terminalreporter.write_line(
            f"flashtune: validated {count} {family} variants (op x dtype x config) on {mode}"
        )
