"""Every semantics-distinct softmax variant against a float64 reference.

regime x op x direction x dtype x exp form x a small set of block sizes (and rows per program,
splits, per-lane statistics), on small shapes whose widths are not block multiples. Without a
GPU this runs in Triton's interpreter; warps, stages and L2 hints, which the interpreter
ignores, are covered by the GPU matrix (test_softmax_gpu.py, ``-m gpu``).
"""

from __future__ import annotations

import zlib

import pytest
import torch

from flashtune.gen import load_variant, loader
from flashtune.gen.softmax_ops import softmax_forward
from flashtune.reference import check_accuracy
from flashtune.gen.softmax_space import OPS, REGIMES, SoftmaxProblem, default_config, problem_misfit

from softmax_cases import BACKWARD_OPS, DTYPES, FORWARD_OPS, make_config, run_case, semantic_knobs

# (rows, cols): odd widths, a single column, widths below, at and above the chunk sizes.
SHAPES = ((5, 1), (7, 37), (3, 300), (2, 1000))


def _cases(ops):
    for op in ops:
        for regime in OPS[op].regimes:
            for knobs in semantic_knobs(op, regime):
                for dtype in DTYPES:
                    name = "-".join(f"{k}={v}" for k, v in knobs.items())
                    yield pytest.param(op, regime, knobs, dtype,
                                       id=f"{op}-{regime}-{name}-{str(dtype)[6:]}")


def _fits(op, regime, knobs, n_cols):
    """The validated config for this width, or None if the variant cannot run it."""
    config = OPS[op].space.validate(make_config(op, regime, knobs, n_cols))
    return None if problem_misfit(config, SoftmaxProblem(1, n_cols, "float32")) else config


@pytest.mark.parametrize("op,regime,knobs,dtype", list(_cases(FORWARD_OPS + BACKWARD_OPS)))
def test_variant(op, regime, knobs, dtype, device, record_variant):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{op}{regime}{knobs}{dtype}".encode()))
    ran = 0
    for rows, cols in SHAPES:
        config = _fits(op, regime, knobs, cols)
        if config is None:
            continue
        x = (torch.randn(rows, cols, generator=gen) * 3).to(device=device, dtype=dtype)
        acc = run_case(op, x, config)
        assert acc.ok, f"{config} on {rows}x{cols}: {acc}"
        record_variant(op, dtype, config)
        ran += 1
    assert ran >= 1, "no test shape fits this variant"


@pytest.mark.parametrize("op", FORWARD_OPS + BACKWARD_OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_narrow_row_tiles(op, dtype, device, record_variant):
    """Rows of 1 to 8 columns in tiles of 1, 2, 4 and 8 columns: a 128-row tile, and the
    shipped default (up to 512 rows per program), each more rows than the tensor's last
    program has; contiguous and through a padded row stride, against float64."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"narrow{op}{dtype}".encode()))
    for cols in (1, 2, 3, 5, 8):
        tile = OPS[op].space.validate(make_config(op, "row", {"block": None}, cols,
                                                  rows_per_program=128, num_warps=2))
        default = default_config(op, SoftmaxProblem(300, cols, str(dtype)[6:]))
        assert tile["block"] < 16 and default["block"] == tile["block"]
        x = (torch.randn(300, cols + 3, generator=gen) * 3).to(device=device, dtype=dtype)
        for config in (tile, default):
            for view in (x[:, :cols].contiguous(), x[:, :cols]):
                acc = run_case(op, view, config)
                assert acc.ok, f"{config} on {tuple(view.shape)} stride {view.stride()}: {acc}"
            record_variant(op, dtype, config)


@pytest.mark.parametrize("regime", REGIMES)
def test_row_stride_and_non_last_dim(regime, device):
    """A strided row view and dim=0 give torch's result (the kernel sees any row stride)."""
    base = torch.randn(40, 96).to(device)
    x = base[::2, 8:72]  # row stride 192, 64 columns
    knobs = semantic_knobs("softmax", regime)[-1 if regime == "coop" else 0]  # fits 64 columns
    config = make_config("softmax", regime, knobs, 64)
    out = softmax_forward(x, -1, config=config)
    torch.testing.assert_close(out, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    config0 = make_config("softmax", regime, knobs, x.shape[0])
    out0 = softmax_forward(x, 0, config=config0)
    torch.testing.assert_close(out0, torch.softmax(x, 0), rtol=1e-5, atol=1e-6)


def test_higher_rank_and_output_dtype(device):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 4, 50, generator=gen).to(device=device, dtype=torch.bfloat16)
    for dim in (-1, 1, 0):
        out = softmax_forward(x, dim, log=True)
        assert out.dtype == x.dtype and out.shape == x.shape
        acc = check_accuracy(out, torch.log_softmax(x.double(), dim), torch.log_softmax(x, dim))
        assert acc.ok, f"dim={dim}: {acc}"


ONE_LAUNCH = {
    "coop": dict(regime="coop", block=64, splits=4, num_warps=1),
    # segments of 64 columns walked in chunks of 16 (the tail segment: 58 of them)
    "fused split": dict(regime="split", block=16, splits=4, num_warps=1, num_stages=2,
                        fused=True),
    "fused split, lane stats": dict(regime="split", block=16, splits=4, num_warps=1,
                                    num_stages=2, fused=True, lane_stats=True),
    # rows of 251 columns walked from 16-byte boundaries: every row's lead differs
    "fused split, align": dict(regime="split", block=16, splits=4, num_warps=1, num_stages=2,
                               fused=True, align=True),
}


@pytest.mark.parametrize("op", FORWARD_OPS)
@pytest.mark.parametrize("variant", ONE_LAUNCH)
def test_one_launch_path_gives_up_waiting_correctly(op, variant):
    """The one-launch path of the coop and fused split regimes (PHASE 0: tickets, arrivals,
    the bounded wait and the counters' reset) in the interpreter, which runs programs one
    after another: each row's first programs give up waiting and compute their partners'
    (m, d) from x, the last one finds all partials published. Both must give torch's result,
    and the counters must be zero afterwards, for the next launch (here: a shorter one on the
    same counters)."""
    if not loader.interpreter_mode():
        pytest.skip("the GPU matrix runs this path for real")
    cfg = OPS[op].space.complete(ONE_LAUNCH[variant])
    module = load_variant(op, cfg)
    kernel = getattr(module, f"_{op}_{cfg['regime']}")
    # the split kernel's launch-time constexpr, as launch() decides it for 64-column segments
    # (the coop kernel has no loop statistics to compensate)
    # and its row length and strides in grains (250 fp32 columns: 2), as launch() passes them
    compensate = (dict(COMPENSATE=module._compensate(64 // cfg["block"]), GRAIN=2)
                  if cfg["regime"] == "split" else {})
    n_cols = 250
    if cfg["align"]:
        n_cols = 251
        compensate.update(GRAIN=1, VEC=4, Y_ALIGNED=True)
    grain = compensate.get("GRAIN", 1)
    counters = torch.zeros(2 + 2 * 5, dtype=torch.int32)
    for n_rows in (5, 3):
        x = torch.randn(n_rows, n_cols) * 3
        x[1] = float("-inf")
        x[0, :64] = float("-inf")  # a whole segment of -inf in a finite row
        x[-1, 7] = float("nan")
        y = torch.empty_like(x)
        stats = torch.empty(2, n_rows * 4)
        kernel[(n_rows * 4,)](x, y, stats[0], stats[1], counters, n_rows, n_cols // grain,
                              x.stride(0) // grain, y.stride(0) // grain, 64, n_rows * 4,
                              BLOCK=cfg["block"], SPLITS=4, PHASE=0, MAX_POLLS=2, **compensate)
        torch.testing.assert_close(y, (torch.log_softmax if OPS[op].log else torch.softmax)(x, -1),
                                   equal_nan=True)
        assert counters.tolist() == [0] * len(counters), f"counters left at {counters.tolist()}"


@pytest.mark.parametrize("op", FORWARD_OPS)
@pytest.mark.parametrize("programs", (1, 3, 40))
@pytest.mark.parametrize("paired,align,block",
                         ((False, False, 16), (True, False, 64), (False, False, 128),
                          (True, False, 128), (False, True, 16), (False, True, 128),
                          (True, True, 64), (True, True, 128)),
                         ids=("plain", "paired_loads", "plain-empty-segments",
                              "paired_loads-empty-segments", "align", "align-empty-segments",
                              "paired_loads-align", "paired_loads-align-empty-segments"))
def test_persistent_split_loops_over_items_and_gives_up_waiting_correctly(op, programs, paired,
                                                                            align, block):
    """The persistent fused split (programs_per_sm) in the interpreter, which runs its programs
    one after another: the first program takes every ticket, reading each (row, segment) item
    before finishing the one before. A finish whose row is not all published gives up waiting
    and computes the partners' (m, d) from x; one whose row is complete reads the published
    words. More programs than items: the extra ones find no ticket and only count their exit.
    Three launches alternate the two halves of the partials as row_sync.polled_partials does
    (5 rows, then 3, then 5): each must give torch's result and leave the half the next launch
    writes all zero, also the words past its own items (the 5-row launch's tail), and the
    ticket counters zero. paired_loads: the kernel for segments of one chunk (64 or 128
    columns here), whose turns load the new item and re-read the finished one together. Chunks of 128:
    segments of one chunk each, the last two of every row empty (launch()'s seg_len rounds the
    row's quarter up to whole chunks). align: rows of 251 columns walked from 16-byte
    boundaries (every row's lead differs; the first segment of a row takes its edges)."""
    if not loader.interpreter_mode():
        pytest.skip("the GPU matrix runs this path for real")
    knobs = dict(num_stages=1 if paired else 2, paired_loads=paired, align=align)
    n_cols, grain = (251, 1) if align else (250, 2)
    seg_len = -(-(-(-n_cols // 4)) // block) * block  # as launch() computes it
    cfg = OPS[op].space.complete(dict(regime="split", splits=4, num_warps=1, fused=True,
                                      programs_per_sm=2, l2_hint=True, block=block, **knobs))
    module = load_variant(op, cfg)
    kernel = getattr(module, f"_{op}_split_{'paired' if paired else 'persistent'}")
    words = torch.zeros(2, 5 * 4, dtype=torch.int64)
    tickets = torch.zeros(2, dtype=torch.int32)
    written = [0, 0]
    for launch, n_rows in enumerate((5, 3, 5)):
        half = launch % 2
        x = torch.randn(n_rows, n_cols) * 3
        x[1] = float("-inf")
        x[0, :64] = float("-inf")  # a segment (chunks of 128: half of one) of -inf in a finite row
        x[-1, 7] = float("nan")
        y = torch.full_like(x, 123.0)
        # row length and strides in grains (250 fp32 columns: 2), as launch() passes them
        kernel[(programs,)](x, y, words[half], words[1 - half], tickets, n_cols // grain,
                            x.stride(0) // grain, y.stride(0) // grain, seg_len, n_rows * 4,
                            written[1 - half], programs, BLOCK=cfg["block"], SPLITS=4,
                            MAX_POLLS=2, COMPENSATE=module._compensate(seg_len // block),
                            GRAIN=grain, **(dict(VEC=4, Y_ALIGNED=True) if align else {}))
        written = [n_rows * 4, 0] if half == 0 else [0, n_rows * 4]
        torch.testing.assert_close(y, (torch.log_softmax if OPS[op].log else torch.softmax)(x, -1),
                                   equal_nan=True)
        assert (words[half, :n_rows * 4] != 0).all(), "every item's partial was published"
        assert not words[1 - half].any(), f"launch {launch} left stale partials for the next"
        assert tickets.tolist() == [0, 0], f"ticket counters left at {tickets.tolist()}"


def test_split_partials_are_made_once_per_stream_and_grow():
    """On a GPU a one-launch split's (m, d) partials come from one workspace per stream
    (allocating and indexing a new one cost host time on every call), grown for a larger
    launch, with the stream's zeroed counters from the same lookup. A two-launch split gets
    fresh ones (another thread on the stream could enqueue its first launch between them), and
    so does every launch in the interpreter (no streams, two threads' launches at once);
    launches of several sizes give torch's result."""
    from flashtune.gen import row_sync

    if loader.interpreter_mode():
        first = row_sync.fused_split_workspace(torch.device("cpu"), 3, 10)
        again = row_sync.fused_split_workspace(torch.device("cpu"), 3, 10)
        assert first[0].data_ptr() != again[0].data_ptr()
    else:
        device = torch.device("cuda")
        m1, d1, c1 = row_sync.fused_split_workspace(device, 3, 10)
        m2, d2, c2 = row_sync.fused_split_workspace(device, 3, 10)
        assert (m1.data_ptr(), d1.data_ptr()) == (m2.data_ptr(), d2.data_ptr())
        assert m1.numel() >= 10 and m1.data_ptr() != d1.data_ptr()
        assert c1.data_ptr() == c2.data_ptr() == row_sync.sync_counters(device, 3).data_ptr()
        assert c1.numel() >= 2 + 2 * 3 and not c1.any()
        two = row_sync.split_stats(device, 10)
        assert two[0].data_ptr() != m1.data_ptr()
        grown, _, counters = row_sync.fused_split_workspace(device, 1 << 12, 1 << 20)
        assert grown.numel() >= 1 << 20 and counters.numel() >= 2 + 2 * (1 << 12)
        with torch.cuda.stream(torch.cuda.Stream()):  # another stream: its own
            other = row_sync.fused_split_workspace(device, 3, 10)
            assert other[0].data_ptr() != grown.data_ptr()
            assert other[2].data_ptr() != counters.data_ptr()
        return
    cfg = OPS["softmax"].space.complete(dict(regime="split", splits=4, block=16, num_warps=1))
    for n_rows, n_cols in ((3, 100), (300, 70), (2, 130)):
        x = torch.randn(n_rows, n_cols)
        y = torch.empty_like(x)
        load_variant("softmax", cfg).launch(x, y)
        torch.testing.assert_close(y, torch.softmax(x, -1))


def test_polled_partials_alternate_halves_and_never_hand_out_stale_words():
    """Host side of the persistent split's workspace: each launch gets the half the launch
    before did not write (all zero) and is told how many words of the other half to zero; a
    launch that raised before it was enqueued swaps nothing; a larger launch gets a fresh,
    zeroed workspace."""
    from flashtune.gen import row_sync

    device = torch.device("cpu")
    row_sync._PARTIALS.pop((device, 0), None)
    with row_sync.polled_partials(device, 10) as first:
        assert first.n_stale == 0 and not first.slots.any()
        first.slots[:10] = 7  # what a launch leaves: its partials
    with row_sync.polled_partials(device, 4) as second:
        assert second.stale.data_ptr() == first.slots.data_ptr() and second.n_stale == 10
        assert not second.slots.any()
        second.stale[:10] = 0  # what the kernel does
        second.slots[:4] = 7
    with pytest.raises(RuntimeError):
        with row_sync.polled_partials(device, 4) as failed:
            raise RuntimeError("compile error before the launch")
    with row_sync.polled_partials(device, 4) as third:
        assert third.slots.data_ptr() == failed.slots.data_ptr() == first.slots.data_ptr()
        assert third.n_stale == 4 and not third.slots.any()
    capacity = third.slots.numel()
    with row_sync.polled_partials(device, capacity + 1) as grown:
        assert grown.slots.numel() > capacity and grown.n_stale == 0 and not grown.slots.any()
    row_sync._PARTIALS.pop((device, 0), None)


# The aligned walk's regimes: one program per row, or a row over 4 programs (segments of 16
# columns, or of 32 for rows past 64: the first segment takes the edges).
ALIGNED_REGIMES = {"online": {}, "split": {"splits": 4}}


@pytest.mark.parametrize("regime", ALIGNED_REGIMES)
@pytest.mark.parametrize("op", FORWARD_OPS)
@pytest.mark.parametrize("dtype", (torch.float16, torch.float32))
def test_aligned_walk_any_lead_width_and_output_stride(op, dtype, regime, device):
    """align: rows walked from the 16-byte boundary before their start. Every lead (the row's
    offset from that boundary), widths shorter than, equal to and past a chunk with the lead
    added, a base pointer off a boundary (storage offset) and an output whose rows do not share
    x's lead (strided: its stores take the unvectorized path) all give torch's result."""
    cfg = OPS[op].space.complete(dict(regime=regime, block=16, num_warps=1, num_stages=2,
                                      align=True, **ALIGNED_REGIMES[regime]))
    ref_fn = torch.log_softmax if OPS[op].log else torch.softmax
    tol = dict(rtol=2e-3, atol=4e-3) if dtype == torch.float16 else dict(rtol=1e-5, atol=1e-6)
    module = load_variant(op, cfg)
    for cols in (1, 7, 8, 9, 15, 16, 17, 31, 40, 65, 101):
        for pad, offset in ((0, 0), (3, 0), (5, 3)):
            stride = cols + pad
            storage = (torch.randn(6 * stride + offset) * 3).to(device=device, dtype=dtype)
            x = storage[offset:].as_strided((6, cols), (stride, 1))
            for y in (torch.empty(6, cols, device=device, dtype=dtype),
                      torch.empty(6, cols + 1, device=device, dtype=dtype)[:, :cols]):
                y.fill_(float("nan"))
                module.launch(x, y)
                torch.testing.assert_close(y.float(), ref_fn(x.double(), -1).float(), **tol,
                                           msg=lambda m: f"cols={cols} pad={pad} offset={offset}: {m}")


@pytest.mark.parametrize("regime", ALIGNED_REGIMES)
@pytest.mark.parametrize("op", BACKWARD_OPS)
@pytest.mark.parametrize("dtype", (torch.float16, torch.float32))
def test_backward_aligned_walk_any_lead_width_and_strides(op, dtype, regime, device):
    """The backward's aligned walk: every lead of y's rows, widths around a chunk, a base off a
    16-byte boundary, and dy / dx rows that do not share y's lead (their loads and stores take
    the unvectorized path) all give torch's dx."""
    cfg = OPS[op].space.complete(dict(regime=regime, block=16, num_warps=1, num_stages=2,
                                      align=True, lane_stats=True, **ALIGNED_REGIMES[regime]))
    log = OPS[op].log
    tol = dict(rtol=4e-3, atol=8e-3) if dtype == torch.float16 else dict(rtol=1e-5, atol=1e-5)
    module = load_variant(op, cfg)

    def rows_of(cols, pad, offset, values):
        stride = cols + pad
        storage = torch.zeros(6 * stride + offset, dtype=dtype, device=device)
        view = storage[offset:].as_strided((6, cols), (stride, 1))
        view.copy_(values)
        return view

    for cols in (1, 7, 8, 9, 15, 16, 17, 31, 40, 65, 101):
        x = torch.randn(6, cols, dtype=torch.float64) * 3
        y64 = torch.log_softmax(x, -1) if log else torch.softmax(x, -1)
        g64 = torch.randn(6, cols, dtype=torch.float64)
        for (pad, offset), (dpad, doffset), (xpad, xoffset) in (
                ((0, 0), (0, 0), (0, 0)), ((3, 0), (3, 0), (3, 0)), ((5, 3), (0, 0), (1, 0)),
                ((0, 0), (1, 5), (0, 1))):
            y = rows_of(cols, pad, offset, y64.to(dtype))
            dy = rows_of(cols, dpad, doffset, g64.to(dtype))
            dx = rows_of(cols, xpad, xoffset, torch.full((6, cols), float("nan"), dtype=torch.float64))
            module.launch(y, dy, dx)
            yd, gd = y.double(), dy.double()
            if log:
                want = gd - yd.exp() * gd.sum(-1, keepdim=True)
            else:
                want = yd * (gd - (gd * yd).sum(-1, keepdim=True))
            torch.testing.assert_close(dx.double(), want, **tol,
                                       msg=lambda m: f"cols={cols} y={pad, offset} dy={dpad, doffset} "
                                                     f"dx={xpad, xoffset}: {m}")


def test_persistent_grid_is_capped_at_the_programs_that_fit(monkeypatch):
    """A persistent launch asks for programs_per_sm programs per SM; once its first launch
    shows fewer fit on an SM (registers per warp in units of 256, threads, shared memory),
    later launches ask for that many, so no second, empty wave of programs trails the work.
    A launch result that is not a compiled CUDA kernel changes nothing."""
    from types import SimpleNamespace

    from flashtune.gen import row_sync

    props = SimpleNamespace(regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                            shared_memory_per_multiprocessor=228 * 1024)
    monkeypatch.setattr(row_sync, "sm_count", lambda index: 132)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(row_sync, "_RESIDENT", {})
    x = torch.zeros(2, 2)
    kernel = object()
    assert row_sync.persistent_grid(kernel, x, 8, 10**6) == 8 * 132  # not launched yet
    row_sync.note_resident(kernel, x, None)  # nothing known: unchanged
    assert row_sync.persistent_grid(kernel, x, 8, 10**6) == 8 * 132
    compiled = SimpleNamespace(n_regs=80, metadata=SimpleNamespace(num_warps=4, shared=0))
    row_sync.note_resident(kernel, x, compiled)  # 80 regs -> 2560 per warp: 6 programs of 4 warps
    assert row_sync.persistent_grid(kernel, x, 8, 10**6) == 6 * 132
    assert row_sync.persistent_grid(kernel, x, 4, 10**6) == 4 * 132  # asks for fewer than fit
    assert row_sync.persistent_grid(kernel, x, 8, 100) == 100  # fewer items than programs
    assert row_sync.persistent_grid(object(), x, 8, 10**6) == 8 * 132  # another kernel
    other = object()
    row_sync.note_resident(other, x, SimpleNamespace(
        n_regs=32, metadata=SimpleNamespace(num_warps=16, shared=100 * 1024)))
    assert row_sync.persistent_grid(other, x, 8, 10**6) == 2 * 132  # shared memory: 2 fit
    row_sync.note_resident(other, x, compiled)  # learned once per kernel, dtype and device
    assert row_sync.persistent_grid(other, x, 8, 10**6) == 2 * 132


def test_one_launch_bound_takes_the_programs_that_fit_and_one_entry_per_kernel(monkeypatch):
    """The persistent one-launch bound (2 x splits <= programs per SM x SMs) counts the
    programs that fit once the kernel's first launch has shown them, not the programs asked
    for. The fast launch path's per-plan stand-ins (which wrap the JITFunction as `fn`, as the
    JITFunction wraps the Python function) share the kernel's one entry."""
    from types import SimpleNamespace

    from flashtune.gen import row_sync

    props = SimpleNamespace(regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                            shared_memory_per_multiprocessor=228 * 1024)
    monkeypatch.setattr(row_sync, "sm_count", lambda index: 132)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(row_sync, "_RESIDENT", {})
    x = SimpleNamespace(is_cuda=True, device=SimpleNamespace(index=0), dtype=torch.float32)

    def python_function():
        pass

    jit = SimpleNamespace(fn=python_function)
    stand_in = SimpleNamespace(fn=jit)
    assert row_sync.one_launch(x, 256, 8, stand_in)  # nothing learned yet: 512 <= 8 x 132
    assert not row_sync.one_launch(x, 256)  # no persistent grid: 256 > 132 / 4
    # 200 registers, 8 warps: 6400 registers a warp, 51200 a program: 1 program fits
    row_sync.note_resident(stand_in, x, SimpleNamespace(
        n_regs=200, metadata=SimpleNamespace(num_warps=8, shared=0)))
    assert not row_sync.one_launch(x, 256, 8, jit)  # the stand-in's entry is the kernel's
    assert row_sync.one_launch(x, 64, 8, jit)  # 128 <= 1 x 132
    assert row_sync.persistent_grid(SimpleNamespace(fn=jit), x, 8, 10**6) == 132
    assert len(row_sync._RESIDENT) == 1


def test_early_twins_of_the_paired_default_name_the_kernel_they_run():
    """The tuner's early twins of an fp32 long-row default (paired loads): the per-lane and
    per-vector statistics forms drop paired loads (they take plain statistics only), and a
    twin whose segments span several chunks, or that asks for pipelining, is named as the plain
    persistent kernel it runs. Every twin passes fitting_configs' rules."""
    from flashtune.gen.softmax_space import chunk_twins, statistics_twins

    problem = SoftmaxProblem(16, 1_048_576, "float32")
    base = default_config("softmax", problem, sm_count=132)
    assert base["paired_loads"]
    stats = statistics_twins("softmax", problem, sm_count=132)
    assert {(c["lane_stats"], c["vector_stats"]) for c in stats} == {(True, False), (False, True)}
    assert not any(c["paired_loads"] for c in stats)
    chunks = chunk_twins("softmax", problem, sm_count=132)
    assert chunks
    for c in chunks:
        if c["paired_loads"]:
            assert c["splits"] * c["block"] >= problem.n_cols and c["num_stages"] == 1
    assert any(not c["paired_loads"] and c["block"] == base["block"] // 2 for c in chunks)


@pytest.mark.parametrize("op", ["softmax", "log_softmax_backward"])
def test_split_rows_strided_past_int32_in_elements(op, tmp_path):
    """A row stride of 2**31 + 1024 elements arrives in grains (8 fp16 elements: 2**28 + 128,
    an int32), and the kernel must multiply it back in 64 bits: in 32 the second row's start
    wrapped to 2**31 - 1024 elements before the first (a segfault, or another row's data).
    The storage is a sparse file mapped shared, so only the pages touched take memory; x sits
    2**31 elements in, so a wrapped start still lands inside it (zeros there)."""
    if not loader.interpreter_mode():
        pytest.skip("interpreter only: on a GPU the views' storage is not a mapped file")
    stride, n_cols = 2**31 + 1024, 1024
    size = 2**31 + stride + n_cols
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as f:
        f.truncate(2 * size)
    flat = torch.from_file(str(path), shared=True, size=size, dtype=torch.float16)

    def view():
        return flat.as_strided((2, n_cols), (stride, 1), storage_offset=2**31)

    cfg = OPS[op].space.complete(dict(regime="split", splits=4, block=64, num_warps=1))
    x = torch.randn(2, n_cols, dtype=torch.float16) * 3
    if op == "softmax":
        src = view()
        src.copy_(x)
        out = torch.empty(2, n_cols, dtype=torch.float16)
        load_variant(op, cfg).launch(src, out)
        expected = torch.softmax(x.double(), -1)
    else:
        y = torch.log_softmax(x.double(), -1).to(torch.float16)
        y_view = view()
        y_view.copy_(y)
        dy = torch.randn(2, n_cols, dtype=torch.float16)
        out = torch.empty(2, n_cols, dtype=torch.float16)
        load_variant(op, cfg).launch(y_view, dy, out)
        yd, dyd = y.double(), dy.double()
        expected = dyd - torch.exp(yd) * dyd.sum(-1, keepdim=True)
    atol = 1e-4 if op == "softmax" else 2e-2
    torch.testing.assert_close(out.double(), expected, atol=atol, rtol=2e-2)
