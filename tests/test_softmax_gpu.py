"""The full softmax variant matrix on a GPU: semantics x dtypes, plus warps, stages, L2 hints.

Run with ``pytest -m gpu``. Interpreter runs ignore warps and stages, so only this file checks
that every launch configuration computes the same function.
"""

from __future__ import annotations

import zlib

import pytest
import torch

from flashtune.gen.softmax_space import HOLDING_REGIMES, OPS, SoftmaxProblem, problem_misfit

from softmax_cases import (BACKWARD_OPS, DTYPES, FORWARD_OPS, coop_block, make_config,
                           next_pow2, run_case)

pytestmark = pytest.mark.gpu

ROW_SHAPES = ((33, 1000), (7, 4000), (3000, 100))
LOOP_SHAPES = ((33, 1000), (5, 12345), (2, 70001))


def _semantic(op, regime):
    fwd = OPS[op].direction == "fwd"
    forms = [{"exp2": True}, {"exp2": False}] if fwd else [{}]
    if regime == "row":
        shapes = [{"rows_per_program": r} for r in (1, 4)]
    elif regime == "coop":
        # block None: the smallest tile that holds a segment of the test row (see coop_block)
        # the first is the launch sweep's base; 128 and 256 > SMs / 4 on an H100/H200: two launches
        shapes = [{"splits": s} for s in (16, 2, 32, 128, 256)]
    elif regime == "online":
        shapes = [{"block": b, "lane_stats": ls} for b in (256, 4096) for ls in (False, True)]
        shapes += [{"block": b, "align": True, "lane_stats": ls} for b in (256, 4096)
                   for ls in (False, True)]
        if not fwd:  # the backward default's form for rows of odd width
            shapes.append({"block": 16384, "align": True, "lane_stats": True})
        if fwd:
            shapes += [{"block": 1024, "max_pass": True}, {"block": 1024, "resident": 4096},
                       {"block": 1024, "resident": 4096, "lane_stats": True},
                       {"block": 1024, "resident": 8192, "max_pass": True}]
            shapes.append({"block": 1024, "align": True, "max_pass": True})
            shapes += [{"block": b, "vector_stats": True} for b in (256, 16384)]
            shapes += [{"block": 1024, "resident": 4096, "vector_stats": True},
                       {"block": 1024, "align": True, "vector_stats": True}]
    else:
        shapes = [{"block": b, "splits": s, "lane_stats": ls}
                  for b in (256, 4096) for s in (2, 16) for ls in (False, True)]
        # the aligned walk (two launches: the test rows' odd widths load whole vectors)
        shapes += [{"block": 4096, "splits": s, "lane_stats": ls, "align": True}
                   for s in (2, 16) for ls in (False, True)]
        if fwd:
            shapes.append({"block": 1024, "splits": 4, "max_pass": True})
            shapes += [{"block": 1024, "splits": 4, "vector_stats": True},
                       {"block": 4096, "splits": 32, "vector_stats": True, "fused": True}]
            # fused: one launch (32 <= SMs / 4 on an H100/H200), with the row barrier
            shapes += [{"block": b, "splits": s, "lane_stats": ls, "fused": True}
                       for b in (256, 4096) for s in (2, 32) for ls in (False, True)]
            shapes += [{"block": 1024, "splits": 4, "vector_stats": True, "align": True},
                       {"block": 1024, "splits": 4, "max_pass": True, "align": True},
                       {"block": 4096, "splits": 32, "fused": True, "align": True}]
            shapes.append({"block": 1024, "splits": 4, "max_pass": True, "fused": True})
    return [dict(s, **f) for s in shapes for f in forms]


def _launch_sweep(regime):
    """num_warps sweep at 2 stages, num_stages sweep at 8 warps, both L2 hints."""
    if regime in HOLDING_REGIMES:
        return [{"num_warps": w, "num_stages": 1} for w in (1, 2, 4, 8, 16, 32)]
    sweep = [{"num_warps": w, "num_stages": 2, "l2_hint": True} for w in (1, 2, 4, 8, 16, 32)]
    sweep += [{"num_warps": 8, "num_stages": s, "l2_hint": True} for s in (1, 3, 4)]
    sweep.append({"num_warps": 8, "num_stages": 2, "l2_hint": False})
    return sweep


def _cases():
    for op in FORWARD_OPS + BACKWARD_OPS:
        for regime in OPS[op].regimes:
            holds = regime in HOLDING_REGIMES
            for dtype in DTYPES:
                for knobs in _semantic(op, regime):
                    launch = {"num_warps": 4, "num_stages": 1 if holds else 2, "l2_hint": not holds}
                    yield op, regime, dict(knobs, **launch), dtype
            # the widest tile of the regime, so every warp count has work
            base = next(k for k in _semantic(op, regime) if k.get("block", 4096) == 4096)
            for launch in _launch_sweep(regime):
                yield op, regime, dict(base, **launch), torch.float16


CASES = [pytest.param(*c, id=f"{c[0]}-{c[1]}-" + "-".join(f"{k}={v}" for k, v in c[2].items())
                      + f"-{str(c[3])[6:]}") for c in _cases()]


@pytest.mark.parametrize("op,regime,knobs,dtype", CASES)
def test_gpu_variant(op, regime, knobs, dtype, record_variant):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{op}{regime}{knobs}{dtype}".encode()))
    ran = 0
    for rows, cols in ROW_SHAPES if regime == "row" else LOOP_SHAPES:
        raw = make_config(op, regime, knobs, cols)
        if regime == "coop":
            raw["block"] = coop_block(cols, raw["splits"])
        if regime in HOLDING_REGIMES and raw["num_warps"] > 1:
            # at least 32 elements per warp in the tile
            raw["num_warps"] = min(raw["num_warps"], max(1, raw["block"] * raw["rows_per_program"] // 32))
        config = OPS[op].space.validate(raw)
        if problem_misfit(config, SoftmaxProblem(rows, cols, str(dtype)[6:])):
            continue
        x = (torch.randn(rows, cols, generator=gen) * 3).to(device="cuda", dtype=dtype)
        acc = run_case(op, x, config)
        torch.cuda.synchronize()
        assert acc.ok, f"{config} on {rows}x{cols}: {acc}"
        record_variant(op, dtype, config)
        ran += 1
    assert ran >= 1


@pytest.mark.parametrize("rows_per_program", (128, 512))
@pytest.mark.parametrize("num_warps", (1, 2, 4, 8))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("op", FORWARD_OPS + BACKWARD_OPS)
def test_gpu_narrow_row_tiles(op, dtype, num_warps, rows_per_program, record_variant):
    """Rows of 1 to 8 columns in tiles of their own width (below 16 columns: the narrow rows'
    defaults), with the launch sweep the interpreter cannot check; contiguous rows (whole
    vectors where the width allows) and a padded row stride (element by element)."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"narrow{op}{dtype}{num_warps}".encode()))
    for cols in (1, 2, 3, 4, 5, 8):
        if num_warps * 32 > next_pow2(cols) * rows_per_program:
            continue  # fewer elements than threads: the space rejects it
        config = OPS[op].space.validate(make_config(
            op, "row", {"block": None}, cols, rows_per_program=rows_per_program,
            num_warps=num_warps))
        x = (torch.randn(3001, cols + 1, generator=gen) * 3).to(device="cuda", dtype=dtype)
        for view in (x[:, :cols].contiguous(), x[:, :cols]):
            acc = run_case(op, view, config)
            torch.cuda.synchronize()
            assert acc.ok, f"{config} on {tuple(view.shape)} stride {view.stride()}: {acc}"
        record_variant(op, dtype, config)


# --- coop and fused split regimes: the one-launch row barrier ---------------------------------
ONE_LAUNCH_REGIMES = ("coop", "fused split", "persistent split", "paired split",
                      "fused split, aligned", "persistent split, aligned",
                      "paired split, aligned")
WHOLE_CHUNK_PERSISTENT = "persistent split, one chunk per segment"


def _one_launch(regime, splits, n_cols, num_warps=8):
    """The config of a one-launch regime; ", aligned": the aligned walk (rows of odd width)."""
    regime, aligned = regime.removesuffix(", aligned"), regime.endswith(", aligned")
    if regime == "coop":
        raw = make_config("softmax", "coop", {"splits": splits}, n_cols, num_warps=num_warps)
        raw["block"] = coop_block(n_cols, splits)
        raw["num_warps"] = max(1, min(num_warps, raw["block"] // 32))
    elif regime in ("paired split", WHOLE_CHUNK_PERSISTENT):
        # segments of one chunk (at most 16384), so at least cols / 16384 splits; paired loads,
        # or the plain persistent loop (with 50257 columns over 8 splits, chunks of 8192 leave
        # the last segment empty)
        paired = regime == "paired split"
        splits = max(splits, next_pow2(-(-n_cols // 16384)))
        block = max(16, next_pow2(-(-n_cols // splits)))
        knobs = {"splits": splits, "fused": True, "block": block,
                 "programs_per_sm": 8 if paired else 2, "paired_loads": paired}
        raw = make_config("softmax", "split", knobs, n_cols,
                          num_warps=max(1, min(16, block // 512)), num_stages=1, l2_hint=True)
    else:
        block = min(1024, max(16, next_pow2(-(-n_cols // splits))))  # fits the problem
        knobs = {"splits": splits, "fused": True, "block": block, "lane_stats": True,
                 "programs_per_sm": 2 if regime == "persistent split" else 0}
        raw = make_config("softmax", "split", knobs, n_cols,
                          num_warps=max(1, min(num_warps, block // 32)), num_stages=1,
                          l2_hint=True)
    raw["align"] = aligned
    return OPS["softmax"].space.validate(raw)


@pytest.mark.parametrize("regime", ONE_LAUNCH_REGIMES)
@pytest.mark.parametrize("rows,cols,splits", [(16, 1_048_576, 32), (4096, 50257, 4),
                                              (3001, 777, 8), (1, 32768 * 128, 128)])
def test_one_launch_repeated_launches_gpu(regime, rows, cols, splits):
    """Many waves of programs, launched back to back: every launch must find its counters
    zeroed by the one before (a stale counter would release a row early: wrong results)."""
    from flashtune.gen.softmax_ops import softmax_forward

    config = _one_launch(regime, splits, cols)
    for i in range(3):
        x = (torch.randn(rows, cols, device="cuda") * (1 + 3 * i)).half()
        out = softmax_forward(x, -1, config=config)
        # Compared in slices of rows: a float64 reference of 4096 x 50257 at once (with its
        # temporaries, about 8 GiB) ran parallel test shards out of GPU memory.
        for lo in range(0, rows, 256):
            ref = torch.softmax(x[lo:lo + 256].double(), -1)
            torch.testing.assert_close(out[lo:lo + 256].double(), ref, rtol=0, atol=2e-3,
                                       msg=f"launch {i}, rows from {lo}")


@pytest.mark.parametrize("splits", (8, 64))
@pytest.mark.parametrize("polls", (0, 2))
@pytest.mark.parametrize("regime", ONE_LAUNCH_REGIMES + (WHOLE_CHUNK_PERSISTENT,))
def test_one_launch_give_up_path_is_bit_identical_gpu(regime, polls, splits, monkeypatch):
    """A program that stops waiting (MAX_POLLS polls: partners starved of SMs by other work)
    computes its partners' (m, d) from x itself. Forced here (MAX_POLLS 0, or 2: some programs
    find their row complete, others give up, racing their partners' publishing):
    the output must equal a normal launch's bit for bit, and the launch must leave its
    counters zeroed for the next one. (Each warp polls the words itself: before the persistent
    kernels made the give-up decision one for the whole program, warps that disagreed took
    different branches, and an H200 gave NaN rows or hung here.) 64 splits: the persistent
    kernel's 64 words over 8 warps' 256 threads (copies in groups of warps), the paired and
    one-chunk kernels' over 2 warps (a word per thread); coop and the fused split run that
    many as two launches. Row sums catch a partial left out of a row's merge, which a
    per-element tolerance on rows of 50257 columns would not."""
    from flashtune.gen import row_sync
    from flashtune.gen.softmax_ops import softmax_forward

    config = _one_launch(regime, splits, 50257)
    x = (torch.randn(300, 50257, device="cuda") * 4).half()
    x[7] = float("-inf")
    x[11, 1000] = float("nan")
    normal = softmax_forward(x, -1, config=config)
    monkeypatch.setattr(row_sync, "MAX_POLLS", polls)
    forced = softmax_forward(x, -1, config=config)
    torch.testing.assert_close(forced, normal, rtol=0, atol=0, equal_nan=True)
    assert forced[7].isnan().all() and forced[11].isnan().all()  # as torch: an all -inf row, NaN
    monkeypatch.undo()
    again = softmax_forward(x, -1, config=config)
    torch.testing.assert_close(again, normal, rtol=0, atol=0, equal_nan=True)
    ok = torch.ones(300, dtype=torch.bool, device=x.device)
    ok[[7, 11]] = False
    torch.testing.assert_close(normal[ok].double(), torch.softmax(x[ok].double(), -1),
                               rtol=0, atol=2e-3)
    sums = normal[ok].double().sum(-1)
    assert (sums - 1).abs().max().item() < 2e-3, f"row sums {sums.min().item()}..{sums.max().item()}"


@pytest.mark.parametrize("regime", ONE_LAUNCH_REGIMES)
def test_one_launch_four_streams_and_a_graph_gpu(regime):
    """Launches on four streams at once use separate counters and do not starve each other
    (the largest one-launch splits); a captured graph replays."""
    from flashtune.gen.softmax_ops import softmax_forward

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # the one-launch bounds of row_sync.one_launch: programs_per_sm x SMs / 2 (2 and 8 programs
    # per SM here), SMs / 4 without a persistent grid; at most the space's 256
    limit = {"persistent split": sms, "paired split": 4 * sms,
             "persistent split, aligned": sms,
             "paired split, aligned": 4 * sms}.get(regime, sms // 4)
    splits = min(256, 1 << (limit.bit_length() - 1))  # the largest power of two for one launch
    config = _one_launch(regime, splits, 40000)
    xs = [torch.randn(512, 40000, device="cuda") for _ in range(4)]
    streams = [torch.cuda.Stream() for _ in range(4)]
    outs = [None] * 4
    torch.cuda.synchronize()
    for _ in range(5):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                outs[i] = softmax_forward(xs[i], -1, config=config)
    torch.cuda.synchronize()
    for x, out in zip(xs, outs):
        torch.testing.assert_close(out, torch.softmax(x, -1))

    x = torch.randn(64, 40000, device="cuda")
    softmax_forward(x, -1, config=config)  # warm up (compile) outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = softmax_forward(x, -1, config=config)
    for scale in (1.0, 7.0):
        x.copy_(torch.randn_like(x) * scale)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, torch.softmax(x, -1))


@pytest.mark.parametrize("regime", ONE_LAUNCH_REGIMES)
def test_one_launch_rows_of_minus_inf_and_nan_gpu(regime):
    from flashtune.gen.softmax_ops import softmax_forward

    x = torch.randn(64, 9000, device="cuda")
    x[3] = float("-inf")
    x[5, :4500] = float("-inf")  # whole segments of -inf in a finite row
    x[7, 100] = float("nan")
    for log in (False, True):
        out = softmax_forward(x, -1, log=log, config=_one_launch(regime, 8, 9000))
        torch.testing.assert_close(out, (torch.log_softmax if log else torch.softmax)(x, -1),
                                   equal_nan=True)


@pytest.mark.parametrize("regime", ONE_LAUNCH_REGIMES)
def test_one_launch_two_graphs_replayed_at_once_gpu(regime):
    """Graphs captured on torch's shared capture stream own their counters: two replayed at
    once on two streams, and one replayed after an eager call that grows the cached counters."""
    from flashtune.gen.softmax_ops import softmax_forward

    config = _one_launch(regime, 16, 20000)
    xs = [torch.randn(rows, 20000, device="cuda") for rows in (64, 5000)]
    for x in xs:
        softmax_forward(x, -1, config=config)  # compile outside the capture
    graphs, outs = [], []
    for x in xs:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs.append(softmax_forward(x, -1, config=config))
        graphs.append(graph)
    streams = [torch.cuda.Stream() for _ in graphs]
    torch.cuda.synchronize()
    for _ in range(3):
        for graph, stream in zip(graphs, streams):
            with torch.cuda.stream(stream):
                graph.replay()
    torch.cuda.synchronize()
    for x, out in zip(xs, outs):
        torch.testing.assert_close(out, torch.softmax(x, -1))
    softmax_forward(torch.randn(20000, 20000, device="cuda"), -1, config=config)  # grows the cache
    xs[0].copy_(torch.randn_like(xs[0]) * 5)
    graphs[0].replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(outs[0], torch.softmax(xs[0], -1))


def test_persistent_split_back_to_back_launches_of_other_sizes_gpu():
    """The persistent split's polled partials: launches of different sizes back to back on one
    stream, never synchronized in between. Each launch zeroes the words the launch before
    wrote, also past its own items (a small launch after a large one), so no launch may read a
    stale word as a published partial: every output must be torch's, and the half the next
    launch writes must be all zero at the end."""
    from flashtune.gen import row_sync
    from flashtune.gen.softmax_ops import softmax_forward

    shapes = [(64, 262144), (3, 140000), (128, 262144), (5, 200000), (1, 131072)]
    xs, outs = [], []
    for round_ in range(3):
        for i, (rows, cols) in enumerate(shapes):
            x = torch.randn(rows, cols, device="cuda", dtype=torch.float16) * (1 + round_)
            x[0, : cols // 3] = float("-inf")
            # the plain and the paired persistent kernels alternate on one workspace
            config = _one_launch(("persistent split", "paired split")[(i + round_) % 2], 16, cols)
            xs.append(x)
            outs.append(softmax_forward(x, -1, config=config))
    torch.cuda.synchronize()
    for x, out in zip(xs, outs):
        torch.testing.assert_close(out.double(), torch.softmax(x.double(), -1), rtol=0, atol=2e-3)
    state = row_sync._PARTIALS[(xs[0].device, torch.cuda.current_stream().cuda_stream)]
    assert not state.words[state.half].any(), "stale partials left for the next launch"
    assert state.tickets.tolist() == [0, 0]


def test_workspace_key_is_the_current_stream_gpu():
    """The one-launch workspaces are keyed by the current stream's handle, read through torch's
    raw binding on the launch path: it must name the same stream as torch.cuda.current_stream,
    on the default stream and inside a side stream, so launches on two streams never share a
    workspace."""
    from flashtune.gen import row_sync

    device = torch.device("cuda", torch.cuda.current_device())
    assert row_sync._stream_key(device) == (device, torch.cuda.current_stream().cuda_stream)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert row_sync._stream_key(device) == (device, side.cuda_stream)
    assert side.cuda_stream != torch.cuda.current_stream().cuda_stream


@pytest.mark.parametrize("op", ["softmax", "softmax_backward"])
def test_two_launch_splits_from_two_threads_on_one_stream_gpu(op):
    """Two threads on the default stream, each running a split of two launches (statistics,
    then output) on its own rows: a partials workspace shared per stream would let one
    thread's first launch land between the other's two and overwrite its partials."""
    import threading

    from flashtune.gen import load_variant

    cfg = OPS[op].space.complete(dict(regime="split", splits=8, block=1024, num_warps=4,
                                      l2_hint=True))
    module = load_variant(op, cfg)
    failures = []

    def work(seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn(4, 40000, device="cuda", generator=gen) * (1 + seed)
        y = torch.softmax(x, -1)
        dy = torch.randn(4, 40000, device="cuda", generator=gen)
        out = torch.empty_like(x)
        args = (x, out) if op == "softmax" else (y, dy, out)
        expected = y if op == "softmax" else y * (dy - (dy * y).sum(-1, keepdim=True))
        errors = []
        for _ in range(200):
            module.launch(*args)
            errors.append((out - expected).abs().max())  # after this thread's launches
        worst = torch.stack(errors).max().item()
        if worst > 1e-5:
            failures.append((seed, worst))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
