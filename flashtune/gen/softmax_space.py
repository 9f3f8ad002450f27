"""The softmax op family: its ops, variant spaces, problem shapes and heuristic defaults.

Ops: ``softmax`` and ``log_softmax`` forward, ``softmax_backward`` and ``log_softmax_backward``
(dx from y and dy). Forward ops share one space, backward ops another (no exp form there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from .space import Config, Param, VariantSpace

POW2 = lambda lo, hi: tuple(1 << i for i in range(lo.bit_length() - 1, hi.bit_length()))  # noqa: E731

BACKWARD_REGIMES = ("row", "online", "split")
# coop: the split regime in one launch, each program holding its segment (forward only).
FORWARD_REGIMES = BACKWARD_REGIMES + ("coop",)
REGIMES = FORWARD_REGIMES  # every regime of some op
MAX_TILE = 65536  # elements held on chip by one program in the row regime
# Tiles narrower than 16 columns exist in the row regime only (rows of 1 to 8 columns: see
# NARROW_ROW_TILES); the chunk loops and the coop segments keep at least 16.
MIN_LOOP_BLOCK = 16
MAX_SEGMENT = 32768  # elements held on chip by one program in the coop regime
MAX_CHUNK = 16384  # chunk size of the online and split loops
HOLDING_REGIMES = ("row", "coop")  # no chunk loop: the program's elements stay in registers
SPLITTING_REGIMES = ("split", "coop")  # one row over `splits` programs
ALIGNING_REGIMES = ("online", "split")  # chunk loops that can walk a row from a 16-byte boundary
# A held tile (row, coop) lives in registers, at most 255 per thread: past 128 fp32 elements
# per thread it spills. (The row regime's best 65536-column config, 16 warps, holds 128.)
MAX_HELD_PER_THREAD = 128
MAX_FUSED_SPLITS = 32  # fused split: one launch needs splits <= SMs / 4 (33 on 132 SMs)
# Persistent fused split: one launch where splits <= programs_per_sm x SMs / 2 (row_sync), so
# on GPUs of 128 SMs or more up to this many splits per program per SM.
PERSISTENT_SPLITS_PER_PROGRAM = 64
PROGRAMS_PER_SM = (0, 2, 4, 8)  # persistent fused split (0: one program per segment)
MAX_PROGRAMS = 2**31 - 1  # a launch grid's first axis (rows x splits; rows / rows per program)
# Column offsets are int32 in the kernels: a row's offsets, plus a tile past its end and the
# split regimes' rounding of segments (splits x block <= 2**22), must stay below 2**31.
MAX_COLS = 2**31 - 2**23


# Rows of 1 to 8 columns: a tile exactly as wide as the row's next power of two (not 16, where
# a row of 5 columns kept 5 of every 16 lanes busy), and more rows per program.
# block: (rows_per_program, num_warps). H100, twenty-third session (scripts and logs in
# benchmarks/results/session23_2026-11-23), us against torch.softmax and the 16-column tiles
# before: 200000 x 1 fp16 4.8 (4.8; 6.7); 200000 x 2 fp16 5.6 (6.2; 7.7); 1000000 x 2 fp16
# 7.6 (9.5; 20.1); 200000 x 3 fp16 6.4 (7.3; 12.4); 200000 x 4 bf16 5.6 (6.7; 7.6). Tiles of
# 8 (narrow_log.py, the kernels' own launch): softmax / log_softmax 1000000 x 5 fp16 19.1 /
# 25.4 (torch 26.1 / 27.7); 200000 x 5 fp16 8.0 / 9.1 (8.9 / 9.8); 200000 x 7 bf16 8.0 / 8.7
# (9.9 / 10.1); 128 rows per program took 21.2 / 29.4 on 1000000 x 5.
NARROW_ROW_TILES = {1: (512, 2), 2: (512, 4), 4: (128, 4), 8: (64, 2)}


# Knobs a regime does not use are pinned, so that no two configs render the same kernel. One
# small constraint per rule, in the order validate reports them: the walk of the space
# (VariantSpace._walk) settles each rule as soon as the few knobs it reads are chosen, where one
# function reading a dozen knobs stayed open, and was asked again, down to the last knob (most
# of the forward walk's 4.3 s). Each rule reads its knobs in the walk's order (the space's
# order of tunables), so that it is settled as early as it can be.
def _rows_outside_row(cfg: Mapping[str, Any]) -> str | None:
    if cfg["regime"] != "row" and cfg["rows_per_program"] != 1:
        return "rows_per_program must be 1 outside the row regime"
    return None


def _splits_of_regime(cfg: Mapping[str, Any]) -> str | None:
    regime = cfg["regime"]
    if regime in SPLITTING_REGIMES and cfg["splits"] < 2:
        return f"the {regime} regime needs splits >= 2"
    if regime not in SPLITTING_REGIMES and cfg["splits"] != 1:
        return "splits must be 1 outside the split and coop regimes"
    return None


def _holding_has_no_stages(cfg: Mapping[str, Any]) -> str | None:
    regime = cfg["regime"]
    if regime in HOLDING_REGIMES and cfg["num_stages"] != 1:
        return f"the {regime} regime has no loop to pipeline: num_stages must be 1"
    return None


def _holding_has_no_loop_stats(cfg: Mapping[str, Any]) -> str | None:
    regime = cfg["regime"]
    if regime in HOLDING_REGIMES and (cfg["lane_stats"] or cfg["l2_hint"]
                                      or cfg.get("vector_stats", False)
                                      or cfg.get("max_pass", False)):
        return (f"l2_hint, lane_stats, vector_stats and max_pass apply to chunk loops only "
                f"({regime} regime: False)")
    return None


def _resident_online_only(cfg: Mapping[str, Any]) -> str | None:
    if cfg["regime"] != "online" and cfg.get("resident", 0):
        return "resident columns exist only in the online regime (0 otherwise)"
    return None


def _align_of_loops(cfg: Mapping[str, Any]) -> str | None:
    if cfg["regime"] not in ALIGNING_REGIMES and cfg.get("align", False):
        return "align applies to the online and split regimes only (False otherwise)"
    return None


def _align_without_resident(cfg: Mapping[str, Any]) -> str | None:
    if cfg.get("resident", 0) and cfg.get("align", False):
        return "align walks the row from its first chunk: resident must be 0"
    return None


def _fused_split_only(cfg: Mapping[str, Any]) -> str | None:
    if cfg["regime"] != "split" and cfg.get("fused", False):
        return "fused applies to the split regime only (False otherwise)"
    return None


def _persistent_is_fused(cfg: Mapping[str, Any]) -> str | None:
    if not cfg.get("fused", False) and cfg.get("programs_per_sm", 0):
        return "programs_per_sm applies to the fused split regime only (0 otherwise)"
    return None


def _paired_is_persistent(cfg: Mapping[str, Any]) -> str | None:
    if not cfg.get("programs_per_sm", 0) and cfg.get("paired_loads", False):
        return "paired_loads applies to the persistent split only (programs_per_sm > 0)"
    return None


def _paired_plain_stats(cfg: Mapping[str, Any]) -> str | None:
    if ((cfg["lane_stats"] or cfg.get("vector_stats", False) or cfg.get("max_pass", False))
            and cfg.get("paired_loads", False)):
        return ("paired_loads takes one chunk's plain statistics: lane_stats, vector_stats "
                "and max_pass must be False")
    return None


def _one_stats_form(cfg: Mapping[str, Any]) -> str | None:
    if cfg["lane_stats"] and cfg.get("max_pass", False):
        return "max_pass computes the sum against the final max: lane_stats must be False"
    if cfg.get("vector_stats", False) and (cfg["lane_stats"] or cfg.get("max_pass", False)):
        return "vector_stats is a loop statistics form of its own: lane_stats and max_pass must be False"
    return None


_REGIME_CANONICAL = (_rows_outside_row, _splits_of_regime, _holding_has_no_stages,
                     _holding_has_no_loop_stats, _resident_online_only, _align_of_loops,
                     _align_without_resident, _fused_split_only, _persistent_is_fused,
                     _paired_is_persistent, _paired_plain_stats, _one_stats_form)


def _tile_fits(cfg: Mapping[str, Any]) -> str | None:
    if cfg["regime"] != "row" and cfg["block"] < MIN_LOOP_BLOCK:
        return f"block must be >= {MIN_LOOP_BLOCK} outside the row regime"
    if cfg["regime"] == "row":
        if cfg["block"] * cfg["rows_per_program"] > MAX_TILE:
            return f"block * rows_per_program must be <= {MAX_TILE}"
    elif cfg["regime"] == "coop":
        if cfg["block"] > MAX_SEGMENT:
            return f"block must be <= {MAX_SEGMENT} in the coop regime"
    elif cfg["block"] > MAX_CHUNK:
        return f"block must be <= {MAX_CHUNK} in the {cfg['regime']} regime"
    return None


def _threads_have_work(cfg: Mapping[str, Any]) -> str | None:
    # Fewer elements than threads only replicates work: prune before compiling.
    if cfg["num_warps"] > 1 and cfg["num_warps"] * 32 > cfg["block"] * cfg["rows_per_program"]:
        return "num_warps * 32 must not exceed the tile's element count (unless one warp)"
    return None


_REGIME_DOC = ("row: whole row on chip; online: two-pass chunk scan; split: row over several "
               "programs; coop: row over several programs in one launch (forward)")
_COMMON = (
    Param("block", int, POW2(1, MAX_TILE), 1024,
          f"tile length along the row (power of two; >= {MIN_LOOP_BLOCK} outside the row regime)"),
    Param("rows_per_program", int, POW2(1, 512), 1, "rows per program (row regime)"),
    Param("splits", int, POW2(1, 256), 1, "programs per row (split and coop regimes)"),
    Param("num_warps", int, POW2(1, 32), 4, "warps per program"),
    Param("num_stages", int, (1, 2, 3, 4), 1, "software pipelining depth of chunk loops"),
    Param("lane_stats", bool, (False, True), False, "keep loop statistics per lane, reduce once at the end"),
    Param("l2_hint", bool, (False, True), False,
          "evict_last on the first pass, evict_first on the last (and on forward output stores)"),
)

_CONSTRAINTS = _REGIME_CANONICAL + (_tile_fits, _threads_have_work)
# 2: row tiles below 16 columns and up to 512 rows per program (twenty-third session). Winners
# tuned before could not pick them (rows of 1-8 columns kept a 16-column tile, up to 2.8x
# slower than the new default), so they are winners of another family now (VariantSpace).
SPACE_REVISION = 4
# 3: 16-bit rows of 8 mod 16 columns are a grain of their own (row_grain 8) and take the
# aligned walk (session 36, _whole_width): winners tuned before were filed with rows of 16 and
# could not pick it (2.2x slower there), so they are winners of another family too.
# 4: the split regime walks rows of odd width aligned too (session 37); its winners for such
# rows were tuned without it.
_ALIGN = Param("align", bool, (False, True), False,
               "online and split: walk each row from the 16-byte boundary at or before its "
               "start, so rows of odd width load and store whole 16-byte vectors (the partial "
               "vectors at both ends apart)")

FORWARD_SPACE = VariantSpace(
    "softmax_fwd",
    (Param("regime", str, FORWARD_REGIMES, "row", _REGIME_DOC),) + _COMMON + (
        Param("exp2", bool, (False, True), True, "exp(x) as exp2(x * log2 e)"),
        Param("vector_stats", bool, (False, True), False,
              "online and split: loop statistics per 16-byte vector, reduced inside each thread "
              "(one exp per element and no barrier in the loop), merged once at the end"),
        Param("max_pass", bool, (False, True), False,
              "loop statistics as a max-only pass then a sum pass (3 reads, no rescaling)"),
        Param("resident", int, (0, 256, 1024, 4096, 8192, 16384, 32768), 0,
              "online: leading columns held in registers across the passes (read once)"),
        _ALIGN,
        Param("fused", bool, (False, True), False,
              "split: statistics, a wait for the row's other programs and the output in one "
              "launch, each program re-reading the segment it just read (from L2, mostly); "
              "two launches where SPLITS > SMs / 4"),
        Param("programs_per_sm", int, PROGRAMS_PER_SM, 0,
              "fused split: a persistent grid of this many programs per SM, each reading one "
              "(row, segment) item while finishing its previous one, so waits and writes "
              "overlap reads; one launch where SPLITS <= programs_per_sm x SMs / 2 (0: a "
              "program per segment)"),
        Param("paired_loads", bool, (False, True), False,
              "persistent split, where each segment is one chunk (splits x block >= columns; "
              "else the plain persistent loop): each turn loads the new item's chunk (from "
              "HBM) and the finished item's chunk (re-read from L2) together, so the two "
              "latencies overlap"),
    ),
    _CONSTRAINTS,
    revision=SPACE_REVISION,
)
BACKWARD_SPACE = VariantSpace(
    "softmax_bwd", (Param("regime", str, BACKWARD_REGIMES, "row", _REGIME_DOC),) + _COMMON
    + (_ALIGN,), _CONSTRAINTS, revision=SPACE_REVISION)


@dataclass(frozen=True)
class SoftmaxOp:
    name: str
    log: bool
    direction: str  # "fwd" | "bwd"

    @property
    def space(self) -> VariantSpace:
        return FORWARD_SPACE if self.direction == "fwd" else BACKWARD_SPACE

    @property
    def regimes(self) -> tuple[str, ...]:
        return FORWARD_REGIMES if self.direction == "fwd" else BACKWARD_REGIMES

    family = "softmax"

    def template(self, config: Mapping[str, Any]) -> str:
        """The template file that renders this op with this (validated) config."""
        prefix = "softmax" if self.direction == "fwd" else "softmax_bwd"
        return f"{prefix}_{config['regime']}.py.jinja"

    def render_context(self) -> dict[str, Any]:
        """Op-level template variables (besides the config's tunables)."""
        return {"log": self.log, "direction": self.direction}


OPS = {
    op.name: op
    for op in (
        SoftmaxOp("softmax", log=False, direction="fwd"),
        SoftmaxOp("log_softmax", log=True, direction="fwd"),
        SoftmaxOp("softmax_backward", log=False, direction="bwd"),
        SoftmaxOp("log_softmax_backward", log=True, direction="bwd"),
    )
}

TEMPLATE_FAMILY = ("_softmax_common.py.jinja", "_softmax_bwd_common.py.jinja") + tuple(
    f"softmax_{regime}.py.jinja" for regime in FORWARD_REGIMES) + tuple(
    f"softmax_bwd_{regime}.py.jinja" for regime in BACKWARD_REGIMES)
# The flashtune modules the rendered kernels import (coop and split: the row sync's host side).
FAMILY_MODULES = ("flashtune.gen.row_sync",)


@dataclass(frozen=True)
class SoftmaxProblem:
    """What a softmax kernel is asked to do: a (rows, cols) view and its dtype name."""

    n_rows: int
    n_cols: int
    dtype: str  # "float16" | "bfloat16" | "float32"


# The bucket field of rows that are not whole (see problem_bucket, _whole_width).
GRAIN_FIELD = "row_grain"


def problem_bucket(problem: SoftmaxProblem) -> dict[str, int]:
    """Cache-key fields of a problem: rows and columns rounded up to powers of two and, for rows
    that are not whole (a multiple of 16 elements for fp16/bf16, of one 16-byte vector for
    fp32: ``_whole_width``), ``row_grain``: the largest power of two that divides the row
    length (1 for odd widths, 2 for widths of 2 mod 4, and for 16-bit rows 4 for widths of 4
    mod 8 and 8 for widths of 8 mod 16).

    Every config that fits a bucket's largest problem fits all its problems (the row regime
    needs block >= n_cols, and n_cols <= the columns bucket).

    Why the grain is part of the key: the fastest config of rows that start on 16-byte
    boundaries says little about rows that do not, nor one grain about another. Odd widths
    load whole vectors only with the aligned walk (``align``), which the tuner offers for
    them alone: a winner tuned on 1024 x 65536 served 1024 x 50001 at 159 us against 83 us
    for its default (H100, seventeenth session, fp16 softmax). The row kernels load vectors
    of the grain (``_row_grain`` in the row templates), and narrow odd widths want other
    tiles than narrow even ones (H100, CUDA-graph replay: 200000 x 33 fp16 ran 17 us with its
    1-warp 512-element tiles against 35 us with the tiles of 200000 x 36's default). With
    the field, a problem takes only winners tuned on its own grain (exact, and nearest: a
    field the dispatcher matches exactly), else the default. Whole widths keep the
    two-field bucket. (16-bit widths of 8 mod 16 had it until session 36, where a winner of
    a width of 16 ran 2.2x slower on them than the aligned walk: _whole_width.)
    """
    bucket = {"rows_bucket": _next_pow2(problem.n_rows), "cols_bucket": _next_pow2(problem.n_cols)}
    grain = row_grain(problem)
    if grain < _whole_width(problem):
        bucket[GRAIN_FIELD] = grain
    return bucket


def row_grain(problem: SoftmaxProblem) -> int:
    """The largest power of two, up to ``_whole_width`` elements, that divides the row length:
    the vector width rows of a contiguous (rows, cols) tensor can be loaded with (up to one
    16-byte vector), and for 16-bit rows whether Triton sees the width as a multiple of 16."""
    whole = _whole_width(problem)
    lowest = problem.n_cols & -problem.n_cols
    return whole if lowest == 0 or lowest > whole else lowest


def bucket_problem(bucket: Mapping[str, Any], dtype: str) -> SoftmaxProblem:
    """The widest problem of a bucket, of the bucket's grain: rows and columns at the bucket's
    size, or the widest row length of that grain below it. What ``flashtune show`` compares
    defaults on, and what import checks a bucket against (a bucket no problem has is refused)."""
    n_cols = int(bucket["cols_bucket"])
    grain = bucket.get(GRAIN_FIELD)
    if grain is not None and int(grain) < n_cols:
        n_cols -= int(grain)  # a power of two times an odd number: exactly that grain
    return SoftmaxProblem(int(bucket["rows_bucket"]), n_cols, dtype)


def narrowest_problem(bucket: Mapping[str, Any], dtype: str) -> SoftmaxProblem:
    """The smallest problem of a bucket (one ``check_problem_key`` accepted): the fewest rows
    and the fewest columns of the bucket's grain. ``problem_misfit`` only grows with rows and
    columns, so a config that cannot run this problem runs none of the bucket's (what import
    checks a winner's config against). Not ``bucket_problem``: a winner tuned on a narrower
    problem than the widest may not fit that one (rows past the grid limit; columns past
    MAX_COLS in the widest columns bucket)."""
    rows, n_cols = int(bucket["rows_bucket"]), int(bucket["cols_bucket"])
    n_rows = rows // 2 + 1 if rows > 1 else 1
    # Rows without the grain field are whole (_whole_width): their lengths are multiples of it.
    step = int(bucket.get(GRAIN_FIELD, _whole_width(SoftmaxProblem(n_rows, n_cols, dtype))))
    # The first multiple of the grain past half the bucket (powers of two: an odd multiple of
    # the grain when the bucket is wider than two grains, else the grain itself).
    return SoftmaxProblem(n_rows, (n_cols // 2) // step * step + step, dtype)


def problem_misfit(config: Config, problem: SoftmaxProblem) -> str | None:
    """Why a valid config cannot run this problem, or None if it can."""
    if problem.n_cols > MAX_COLS:
        return (f"rows of {problem.n_cols} columns: the kernels' int32 column offsets take at "
                f"most {MAX_COLS}")
    if config["regime"] == "row" and config["block"] < problem.n_cols:
        return f"row regime with block {config['block']} cannot hold {problem.n_cols} columns"
    if config["regime"] == "split" and config["splits"] * config["block"] > _next_pow2(problem.n_cols) * 2:
        return "split regime with more segments than chunks of the row"
    if config["regime"] in SPLITTING_REGIMES and problem.n_rows * config["splits"] > MAX_PROGRAMS:
        return (f"{config['regime']} regime: {problem.n_rows} rows x {config['splits']} splits "
                f"programs exceed the grid limit of {MAX_PROGRAMS}")
    # One program per row (online) or per rows_per_program rows (row): past the grid limit
    # the launch fails on the GPU.
    rows_each = config["rows_per_program"] if config["regime"] == "row" else 1
    if config["regime"] in ("row", "online") and _cdiv(problem.n_rows, rows_each) > MAX_PROGRAMS:
        return (f"{config['regime']} regime: {_cdiv(problem.n_rows, rows_each)} programs (one "
                f"per {rows_each} row(s)) exceed the grid limit of {MAX_PROGRAMS}")
    if config["regime"] == "coop" and _cdiv(problem.n_cols, config["splits"]) > config["block"]:
        return (f"coop regime with {config['splits']} segments of block {config['block']} "
                f"cannot hold {problem.n_cols} columns")
    return None


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _row_tile(op: SoftmaxOp, block: int, n_cols: int, elem_bytes: int) -> tuple[int, int]:
    """The row regime's default (rows_per_program, num_warps) for a tile of ``block`` columns."""
    if block in NARROW_ROW_TILES:
        return NARROW_ROW_TILES[block]
    # From 9 columns: several rows per program, a tile of about 2048 elements (fp32 forward:
    # 1024, i.e. 4 KB per program, and half the warps: fp32 against torch.softmax, thirteenth
    # session, H200 / H100: 32768 x 256 1.09x / 1.09x against 1.03x / 1.03x with 2048-element
    # tiles; 65536 x 128 1.04x / 1.06x against 1.07x / 1.05x, 16384 x 1024 1.09x / 1.03x
    # against 1.06x / 1.04x, within noise).
    tile = 1024 if elem_bytes == 4 and op.direction == "fwd" else 2048  # backward: not measured
    rows = max(1, min(64, tile // block, MAX_TILE // block))
    # About 8 to 16 elements per thread.
    warps = max(1, min(32, block * rows // 512))
    if op.direction == "fwd" and elem_bytes == 4 and block == 128:
        # fp32 rows of 65 to 128 columns: one warp for the 8-row tile (softmax and
        # log_softmax; timed on softmax). Eighteenth session, us against 2 warps
        # (torch.softmax): H200 65536 x 128 20.9 against 21.3 (21.6),
        # 200000 x 128 52.7 against 54.7 (54.2); H100, seventeenth session's grid,
        # 200000 x 128 72.7 against 74.0 (74.2), 200000 x 100 58.1 against 61.4 (60.7).
        warps = 1
    if op.direction == "fwd" and n_cols % 2 and 32 <= block <= (512 if elem_bytes == 2 else 128):
        # Odd widths load element by element (no vector divides the row stride): tiles
        # of 512 elements and one warp. H100, seventeenth session, fp16 / fp32 in us against
        # the tiles above (torch.softmax): 200000 x 33 21.8 / 24.5 against 38.6 / 37.6
        # (31.6 / 31.8); 200000 x 63 26.3 / 39.0 against 40.2 / 44.8 (32.4 / 40.8);
        # 200000 x 127 42.4 / 73.2 against 66.4 / 74.8 (53.8 / 75.6); fp16 131586 x 255
        # 57.3 against 68.8 (61.1), 65664 x 511 53.3 against 55.7 (64.6). fp32 from 255
        # columns on keeps the tiles above (102.0 against 95.4 us).
        rows, warps = max(1, 512 // block), 1
    return rows, warps


def default_config(op: str | SoftmaxOp, problem: SoftmaxProblem, sm_count: int = 132) -> Config:
    """A heuristic config that runs this problem well enough without tuning."""
    op = OPS[op] if isinstance(op, str) else op
    elem_bytes = _elem_bytes(problem)
    n_cols = max(problem.n_cols, 1)
    row_limit = 32768 if elem_bytes == 2 else 16384
    raw: dict[str, Any]
    # Rows per program enough for the online regime: rows that fill the GPU, or (forward) odd
    # widths from 32 rows on and not too long, where the split regime's element-wise loads
    # lose (below).
    many_rows = problem.n_rows >= sm_count or (
        op.direction == "fwd" and _online_beats_split_on_odd_rows(problem, n_cols, elem_bytes))
    if (op.direction == "fwd" and elem_bytes == 2 and many_rows
            and n_cols >= 16384):
        # fp16/bf16, many long rows: per-vector statistics (no barrier in the loop, one exp
        # per element). H200, 2026-11-21 (tenth session), fp16 / bf16 in us (% of copy):
        # 1024 x 65536 77.7 / 76.7 (81% / 82%) with chunks of 16384 and 32 warps, against 85.6 /
        # 87.8 for the per-lane default before; 4096 x 50257 239.5 / 246.2 (81% / 79%) vs 280.7
        # / 281.5; 4096 x 16384 69.4 / 69.2 (91%) with chunks of 8192 and 16 warps vs 73.5 /
        # 72.4 for the row regime. fp32 stays as below (per-lane 158 us vs 171 us per-vector
        # on 1024 x 65536).
        long_row = n_cols > row_limit
        raw = dict(regime="online", block=16384 if long_row else 8192, rows_per_program=1,
                   splits=1, num_warps=32 if long_row else 16, num_stages=1, lane_stats=False,
                   vector_stats=True, l2_hint=True)
    elif n_cols <= row_limit:
        block = _next_pow2(n_cols)
        rows, warps = _row_tile(op, block, n_cols, elem_bytes)
        raw = dict(regime="row", block=block, rows_per_program=rows, splits=1,
                   num_warps=warps, num_stages=1, lane_stats=False, l2_hint=False)
    elif many_rows:
        # Forward: per-lane statistics, 16 warps in chunks of 8192 (fp32: 32 warps, chunks of
        # 16384): on an H100, 2026-11-21, fp16 4096 x 50257 337 us (81% of copy) vs 353 us for
        # the per-chunk statistics, 1024 x 65536 112 us vs 125 us; fp32 (sixth session) 648 us
        # vs 696 us for chunks of 8192 and 202 us vs 236 us (fp16 with chunks of 16384 and 32
        # warps: 401 us and 115 us, slower). Backward: unchanged (not re-measured).
        if op.direction == "fwd":
            raw = dict(regime="online", block=8192 if elem_bytes == 2 else 16384,
                       rows_per_program=1, splits=1, num_warps=16 if elem_bytes == 2 else 32,
                       num_stages=2, lane_stats=True, l2_hint=True)
            if elem_bytes == 4 and not _rows_aligned(problem):
                # fp32 rows of odd width take the aligned walk (below), where per-vector
                # statistics beat per-lane ones. H200, thirteenth session: 4096 x 50257 492 us
                # (79% of copy) against 537 us, 1000 x 33333 96 us against 107 us. Rows that
                # start aligned keep per-lane statistics (1024 x 65536: 158 us against 170).
                raw.update(lane_stats=False, vector_stats=True, num_stages=1)
        else:
            # Backward: chunks of 16384, 32 warps, per-lane statistics. H100, fourteenth
            # session, against the old default (chunks of 4096, 8 warps, 2 stages, per-chunk
            # statistics) and torch's backward: log_softmax 4096 x 50257 fp16 558 us vs 672
            # (torch 559), fp32 990 vs 1496 (torch 1161); softmax 1024 x 65536 fp16 158 vs 226
            # (torch 322). Within 1.5% of the best of 29 configs on each of 12 cases (both
            # ops, fp16 and fp32, 4096 x 50257, 1024 x 65536 and 2048 x 40000).
            raw = dict(regime="online", block=16384, rows_per_program=1, splits=1,
                       num_warps=32, num_stages=1, lane_stats=True, l2_hint=True)
            if elem_bytes == 2 and not _rows_aligned(problem) and n_cols <= 65536:
                # fp16/bf16 rows of odd width (the aligned walk, below) up to 65536 columns:
                # chunks of 8192. Sixteenth session, log_softmax / softmax backward against
                # torch's, fp16: H200 1000 x 33333 1.19x / 1.83x (0.97x / 1.51x with 16384),
                # 2048 x 40001 1.34x / 1.99x (1.14x / 1.75x), 4096 x 50257 1.25x / 1.78x (1.11x
                # / 1.71x); H100 1.27x / 1.89x, 1.33x / 1.97x, 1.25x / 1.76x (4096 x 50257
                # softmax: 1.99x with 16384). Longer rows keep 16384 (512 x 100003: H200 1.20x
                # against 1.10x, H100 1.27x against 1.11x).
                raw["block"] = 8192
    else:
        # Few rows, long rows: aim for about 4 programs per SM.
        splits = 2
        while splits < 256 and problem.n_rows * splits < 4 * sm_count and splits * 4096 * 2 <= n_cols:
            splits *= 2
        raw = dict(regime="split", block=4096, rows_per_program=1, splits=splits,
                   num_warps=8, num_stages=2, lane_stats=False, l2_hint=True)
        if op.direction == "fwd":
            # One launch (fused), at most SMs / 4 programs per row so it may wait on them, in
            # chunks of 8192: fp16 on an H100, 2026-11-21, 38.9 us vs 41.2 us (16 x 1048576) and
            # 66.8 us vs 78.5 us (128 x 262144) for the two-launch default. (Per-lane
            # statistics: 46.9 us and 72.3 us.)
            one_launch_splits = _prev_pow2(sm_count // 4)
            raw.update(fused=True, block=8192, num_stages=1,
                       splits=max(2, min(splits, one_launch_splits)))
            if n_cols >= 16 * 8192:
                # Rows of 16 chunks or more: the persistent grid (2 programs per SM for fp32,
                # 4 for fp16/bf16), segments of one or two chunks, up to SMs / 2 per row.
                # H100, eighth session (partials polled, no counters): 128 x 262144 fp16
                # 54 us (62 us before with counters; 65 us for the fused split), fp32 98 us
                # vs 109 us (fused, 32 per row); 16 x 1048576 fp16 34 us vs 36 us, fp32
                # 65 us vs 67 us. fp32 with 4 programs per SM: 116 us on 128 x 262144.
                raw.update(programs_per_sm=4 if elem_bytes == 2 else 2, splits=max(2, min(
                    _prev_pow2(sm_count // 2), _prev_pow2(n_cols // 8192))))
                if elem_bytes == 4:
                    # fp32: a segment of one chunk where it fits in 16384 (fp16/bf16 keep two
                    # chunks of 8192: 27.6 us against 30.3 on 16 x 1048576, H200). Eleventh
                    # session, 16 x 1048576 fp32: H200 45.0 us (70% of copy) against 52.9 us
                    # (60%) for two chunks of 8192; H100 57.5 us (78%) against 65.1 us (69%).
                    # 128 x 262144 keeps its one chunk of 8192 (H100: 97.5 us against 99.2
                    # with chunks of 16384; H200: 82.1 against 78.7).
                    seg = _cdiv(n_cols, raw["splits"])
                    raw["block"] = max(8192, min(16384, _next_pow2(seg)))
                raw.update(_paired_split(n_cols, elem_bytes, sm_count))
            elif elem_bytes == 4:
                # fp32 wants about 16 programs per SM, and segments of at most two chunks:
                # H100, sixth session: 128 x 262144 109 us (82% of copy; 32 programs per row)
                # vs 134 us with 8. fp16 gained nothing from more programs (69 us vs 65 us).
                while (raw["splits"] < one_launch_splits
                       and problem.n_rows * raw["splits"] < 16 * sm_count
                       and raw["splits"] * 2 * 8192 <= n_cols):
                    raw["splits"] *= 2
        if problem_misfit(op.space.complete(raw), problem):
            raw["splits"] = 2
            raw["block"] = 1024
    if op.direction == "fwd":
        raw["exp2"] = True
        raw["max_pass"] = False
        raw.setdefault("vector_stats", False)
        raw["resident"] = 0
        raw.setdefault("fused", False)
        raw.setdefault("programs_per_sm", 0)
        raw.setdefault("paired_loads", False)
    # Rows of odd width start off 16-byte boundaries: only the aligned walk keeps vectors.
    # (Backward, sixteenth session: 16-bit log_softmax 0.73-1.04x torch without it, 1.19-1.34x
    # with it; fp32 gains less, and H200 fp32 softmax backward ran 3-5% slower with it on
    # 4096 x 50257 and 2048 x 40001, faster on 1000 x 33333 and 512 x 100003. The split
    # regime has it since session 37: see SPACE_REVISION 4.)
    raw["align"] = _aligned_walk_pays(raw["regime"], problem)
    return op.space.validate(raw)


def _aligned_walk_pays(regime: str, problem: SoftmaxProblem) -> bool:
    """Whether the aligned walk (``align``) gives this regime whole vectors its rows lack. The
    online kernels see only what Triton's launcher specializes (_whole_width); the split ones
    take row lengths and strides in grains (_row_grain in their templates), whole vectors
    wherever the width is a multiple of one. Elsewhere it only adds the edges' masked loads.

    By width alone, not by a view's strides: a strided or offset view of a whole width (rows
    off 16-byte boundaries) walked aligned gets vector loads of x, but y, packed, no longer
    shares x's lead and is stored element by element, which costs more than x's element-wise
    loads. H100, session 38 (`view_grain_probe.txt`), us, without / with the walk: fp16
    1024 x 65536 stride 65537 120.7 / 133.1, 4096 x 65536 offset 1 458.7 / 702.3, fp32
    16 x 1048576 stride 1048577 53.8 / 67.3, fp16 backward (dy strided) 178.5 / 204.1; only
    the fp16 split forward gained (16 x 1048576 48.0 / 43.0)."""
    if regime == "online":
        return not _rows_aligned(problem)
    if regime == "split":
        return problem.n_cols % _vector(problem) != 0
    return False


def _online_beats_split_on_odd_rows(problem: SoftmaxProblem, n_cols: int, elem_bytes: int) -> bool:
    """Forward rows of odd width, too few to fill the GPU (one program per row) but 32 or more,
    and not too long: the online regime (one program per row) beats the split regime there.
    Both walk such rows aligned (the split since session 37; before, its element-by-element
    loads lost up to 3<<17 fp16 columns). H100, session 37 (`call2_odd_rows_regime.txt`), us,
    online against the aligned split, fp16: 32 x 65537 11.5 / 12.3, 100 x 65537 15.0 / 24.9,
    64 x 131071 21.8 / 25.1, 120 x 131071 32.4 / 35.9, 64 x 100003 18.0 / 21.8; the split wins
    past 2**17 columns: 33 x 131073 17.4 / 15.5, 32 x 262143 33.1 / 23.0, 120 x 262145 72.0 /
    58.4, 96 x 393215 90.4 / 66.7. fp32: 100 x 65537 27.2 / 32.8, 64 x 100003 30.3 / 31.3;
    the split wins at 131071 (64 rows 38.7 / 36.9, 120 rows 69.5 / 63.6)."""
    limit = 1 << 17 if elem_bytes == 2 else 7 << 14
    return problem.n_rows >= 32 and not _rows_aligned(problem) and n_cols <= limit


def statistics_twins(op: str | SoftmaxOp, problem: SoftmaxProblem, sm_count: int = 132) -> list[Config]:
    """The default config with each other loop-statistics form (per lane, per vector, per
    chunk), for the tuner to try early: which form wins depends on the GPU and the dtype (H200,
    tenth session: per-vector statistics 8-13% faster for fp16 on 4096 x 50257 and 1024 x 65536,
    per-lane 7% faster for fp32 on 1024 x 65536), and a TPE search of a few dozen trials does
    not reliably reach a flip of one knob. Empty for regimes without a chunk loop."""
    op = OPS[op] if isinstance(op, str) else op
    base = default_config(op, problem, sm_count)
    if op.direction != "fwd" or base["regime"] not in ("online", "split"):
        return []
    forms = ({"lane_stats": True, "vector_stats": False}, {"lane_stats": False, "vector_stats": True},
             {"lane_stats": False, "vector_stats": False})
    variants = []
    for form in forms:
        raw = dict(base.as_dict(), max_pass=False, **form)
        if form["lane_stats"] or form["vector_stats"]:
            raw["paired_loads"] = False  # paired loads take plain statistics only
        variants.append(raw)
    return _twins(op, base, problem, variants)


def chunk_twins(op: str | SoftmaxOp, problem: SoftmaxProblem, sm_count: int = 132) -> list[Config]:
    """The default config with its chunk twice or half as long, and with the other pipelining
    depth (1 <-> 2), where the space and the problem allow: the tuner tries them early, as it
    does the statistics twins. The two GPUs disagree on these knobs and a short TPE search does
    not reliably reach them: on 128 x 262144 fp32 the persistent split with chunks of 16384 ran
    78.7 us on an H200 against 82.1 us for the default's 8192 (eleventh session; the H100
    prefers 8192), and a 16-trial tune on an H200 (fourteenth session) never tried it. Empty
    for regimes without a chunk loop."""
    op = OPS[op] if isinstance(op, str) else op
    base = default_config(op, problem, sm_count)
    if base["regime"] not in ("online", "split"):
        return []
    raw = base.as_dict()
    return _twins(op, base, problem, [dict(raw, block=raw["block"] * 2),
                                      dict(raw, block=raw["block"] // 2),
                                      dict(raw, num_stages=2 if raw["num_stages"] == 1 else 1)])


def _twins(op: SoftmaxOp, base: Config, problem: SoftmaxProblem, variants: list[dict]) -> list[Config]:
    """The variants of ``base`` (raw knob dicts) that differ from it, are in the space and can
    run ``problem``, validated."""
    twins = []
    for raw in variants:
        if raw.get("paired_loads") and _paired_twin_of_plain(raw, problem):
            raw = dict(raw, paired_loads=False)  # name the plain persistent kernel it runs
        if raw != base.as_dict() and op.space.is_valid(raw):
            config = op.space.validate(raw)
            if problem_misfit(config, problem) is None:
                twins.append(config)
    return twins


def _paired_split(n_cols: int, elem_bytes: int, sm_count: int) -> dict[str, Any]:
    """fp32 long rows: the persistent split with paired loads (segments of one chunk of 4096,
    4 warps, 8 programs per SM asked for, 5 fit), where it was measured to win; else nothing
    (the caller's persistent default stays).

    Nineteenth session, default before against paired, us through each kernel's launch()
    (do_bench medians, L2 flushed; `benchmarks/results/session19_2026-11-22`), H100 / H200:
    16 x 1048576 57.9 -> 51.9 / 45.7 -> 42.2 (H100 77% -> 86% of copy); 32 x 524288 59.9 ->
    52.3 / 50.9 -> 42.6; 64 x 524288 107.1 -> 97.2 / 91.8 -> 76.0; 128 x 262144 97.5 -> 96.8
    / 82.0 -> 76.5.
    - fp16/bf16 (chunks of 8192, 4 warps, 4 per SM) tie or lose by up to 3.5%: H100 128 x
      262144 53.7 -> 53.5, H200 46.0 -> 46.0 (bf16 45.7 -> 46.4), H200 64 x 524288 48.1 ->
      49.2. They keep the plain persistent split; the tuner may still pick paired loads.
    - Rows whose chunk count falls well short of a power of two leave many segments empty
      (100 x 150000: 37 of 64 used) and ran slower paired (H100 50.7 -> 51.9): at most a
      quarter of the segments may be empty.
    Segments of one chunk need splits >= chunks per row (a power of two, at most the space's
    256); the split count must also allow one launch (splits <= programs_per_sm x SMs / 2)."""
    if elem_bytes != 4:
        return {}
    block, num_warps, programs = 4096, 4, 8
    fit = 5  # programs that fit on an SM under the 96-register cap: what the one-launch bound sees
    chunks = _cdiv(n_cols, block)
    splits = max(2, _next_pow2(chunks))
    if splits > 256 or 2 * splits > fit * sm_count or 4 * chunks < 3 * splits:
        return {}
    return dict(paired_loads=True, block=block, num_warps=num_warps, programs_per_sm=programs,
                splits=splits)


def _paired_twin_of_plain(config: Mapping[str, Any], problem: SoftmaxProblem) -> bool:
    """A paired-loads config that is a twin of its plain one on this problem: its segments span
    several chunks (launch() runs the plain persistent kernel), or it asks for pipelining the
    paired kernel has no chunk loop for."""
    return config["splits"] * config["block"] < problem.n_cols or config["num_stages"] != 1


def _prev_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n.bit_length() - 1)


def _elem_bytes(problem: SoftmaxProblem) -> int:
    return 4 if problem.dtype == "float32" else 2


def _vector(problem: SoftmaxProblem) -> int:
    """Elements per 16-byte vector."""
    return 16 // _elem_bytes(problem)


def _whole_width(problem: SoftmaxProblem) -> int:
    """The multiple of which a row length must be for the loop kernels (online, split) to load
    whole 16-byte vectors without the aligned walk (``align``). fp32: one vector (4). fp16 and
    bf16: 16, not one vector's 8. Triton's launcher specializes an integer argument on
    divisibility by 16 only, so a width of 8 mod 16 tells the kernel nothing: its masks and
    row starts are taken element by element. H200, session 36, 16-bit 2670 x 50264 ran
    360 us against 164 us with the aligned walk and 158 us for 50272; fp32 4096 x 50264 ran
    as fast as 50272 (180 us) without it."""
    return 16 if _elem_bytes(problem) == 2 else _vector(problem)


def _rows_aligned(problem: SoftmaxProblem) -> bool:
    """Every row of a contiguous (rows, cols) tensor starts on a 16-byte boundary that the
    loop kernels can see (see _whole_width)."""
    return problem.n_cols % _whole_width(problem) == 0


def fitting_configs(op: str | SoftmaxOp, problem: SoftmaxProblem) -> Iterator[Config]:
    """EXHAUSTIVE set for one problem: every config of the space that can run it."""
    op = OPS[op] if isinstance(op, str) else op
    row_block = _next_pow2(problem.n_cols)
    for config in op.space.exhaustive():
        if problem_misfit(config, problem) is not None:
            continue
        if config["regime"] == "row" and config["block"] != row_block:
            continue  # a larger tile than the row only adds masked lanes
        if config.get("resident", 0) * 2 > row_block:
            continue  # hold at most half the row: the rest must stream for this regime to pay
        if config["regime"] == "coop" and config["block"] >= 2 * _cdiv(problem.n_cols, config["splits"]):
            continue  # over half of every tile masked: fewer splits or a smaller block does better
        if (config["regime"] in HOLDING_REGIMES and config["block"] * config["rows_per_program"]
                > MAX_HELD_PER_THREAD * 32 * config["num_warps"]):
            continue  # more elements per thread than registers: spills, and a long ptxas run
        if config.get("programs_per_sm", 0):
            if config["splits"] > config["programs_per_sm"] * PERSISTENT_SPLITS_PER_PROGRAM:
                continue  # one launch would need more than 128 SMs: the unfused twin
            if config["programs_per_sm"] * config["num_warps"] > 64:
                continue  # more warps than an SM holds (64): the twin with fewer programs
            if config.get("paired_loads", False) and (
                    2 * config["block"] > MAX_HELD_PER_THREAD * 32 * config["num_warps"]):
                continue  # two chunks live per turn: past 128 elements per thread they spill
            if config.get("paired_loads", False) and _paired_twin_of_plain(config, problem):
                continue
        elif config.get("fused", False) and config["splits"] > MAX_FUSED_SPLITS:
            continue  # never one launch on GPUs of up to 4 * 64 SMs: the unfused config's twin
        if config.get("align", False) and not _aligned_walk_pays(config["regime"], problem):
            continue  # the rows load whole vectors already: the aligned walk only adds edges
        yield config
