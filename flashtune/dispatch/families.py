"""What the dispatcher needs to know about each op family: bucket, misfit, default, naming.

The winner table, the chooser and the logging are written once; a family differs only in how
a problem is bucketed, when a stored config cannot run it, the heuristic default, which bucket
fields a "nearest" winner must share exactly (softmax: the row grain; attention: the head dim
and the causal flag; a config tuned for another head dim or masking says little), and how a
problem is named in logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..gen import attention_space, softmax_space


@dataclass(frozen=True)
class OpFamily:
    name: str
    bucket: Callable[[Any], dict]
    misfit: Callable[[Any, Any], "str | None"]  # (config, problem)
    default: Callable[..., Any]  # (op, problem, sm_count) -> Config
    same: tuple[str, ...]  # bucket fields a nearest bucket must match exactly
    describe: Callable[[Any], str]
    # (config, wanted bucket, tuned bucket) -> whether a winner of the tuned bucket may serve
    # the wanted one as "nearest"; the default keeps every winner that fits.
    transfers: Callable[[Any, dict, dict], bool] = lambda config, wanted, tuned: True


def _softmax_text(p) -> str:
    return f"{p.n_rows}x{p.n_cols}"


def _attention_text(p) -> str:
    heads = f"{p.heads}" if p.heads == p.kv_heads else f"{p.heads}/{p.kv_heads}"
    n = f"{p.nq}" if p.nq == p.nk else f"{p.nq}/{p.nk}"
    return f"B{p.batch} H{heads} N{n} D{p.head_dim}{' causal' if p.causal else ''}"


# Rows that keep every SM of an H100/H200 (132) busy with one program per row, as a rows
# bucket: the first bucket past 132 (its problems have 129 to 256 rows). Below it, a config
# with one program per row leaves SMs idle. (It was 128: on an H200, 2026-11-22, 128 x 262144
# fp32 then took 1024 x 65536's online winner as "nearest" and ran at 60% of copy, against
# 77-80% for the default persistent split.)
_FILLING_ROWS = 256


def _softmax_transfers(config, wanted: dict, tuned: dict) -> bool:
    """Whether a winner tuned for one bucket may serve another.

    A split or coop winner chose its splits for its own row count: rows x splits programs fill
    the GPU for that count only (a coop winner of 1024 rows measured 0.62x the heuristic
    default on 4096 rows, H100, 2026-11-21); it serves only buckets with the same rows. A
    winner with one program per row (or fewer) tuned where rows filled the GPU does not serve
    a bucket whose rows do not: there the default splits rows instead."""
    if config["regime"] in softmax_space.SPLITTING_REGIMES:
        return wanted["rows_bucket"] == tuned["rows_bucket"]
    if not _tile_suits_width(config, wanted["cols_bucket"]):
        return False
    return wanted["rows_bucket"] >= min(tuned["rows_bucket"], _FILLING_ROWS)


def _tile_suits_width(config, cols_bucket: int) -> bool:
    """A row-regime tile is sized to its rows (the tuner offers only the row's next power of
    two), and a chunk longer than the row masks most of its lanes: either one tuned for wider
    rows serves narrower ones badly. H100, sixteenth session: log_softmax backward 65536 x 128
    fp16 took 8192 x 4096's row winner (block 4096, one row per program) as "nearest" and ran
    136 us against 23 us for its default. (Row tiles narrower than 16 columns exist since the
    twenty-third session; a winner tuned before then on rows of 8 columns or fewer holds 16
    and serves only its own bucket.)"""
    if config["regime"] == "row":
        return config["block"] == cols_bucket
    return config["block"] <= max(softmax_space.MIN_LOOP_BLOCK, cols_bucket)


def _attention_transfers(config, wanted: dict, tuned: dict) -> bool:
    """A winner does not serve a bucket whose sequences are shorter than its tiles: the tuner
    offers only tiles up to the (16-padded) lengths (``attention_space.fitting_configs``), as a
    larger tile only adds masked rows or keys. A prefill winner's 128-row query tile would
    compute 128 rows of a decode step (Nq = 1) to keep one; the default sizes its tiles to the
    problem."""
    return (config["BLOCK_M"] <= max(16, wanted["nq_bucket"])
            and config["BLOCK_N"] <= max(16, wanted["nk_bucket"]))


# A softmax winner serves only problems of its own row grain (see softmax_space.problem_bucket).
SOFTMAX = OpFamily("softmax", softmax_space.problem_bucket, softmax_space.problem_misfit,
                   softmax_space.default_config, (softmax_space.GRAIN_FIELD,), _softmax_text,
                   _softmax_transfers)
ATTENTION = OpFamily("attention", attention_space.problem_bucket, attention_space.problem_misfit,
                     attention_space.default_config, ("head_dim", "causal"),
                     _attention_text, _attention_transfers)

_BY_OP = {**{op: SOFTMAX for op in softmax_space.OPS}, **{op: ATTENTION for op in attention_space.OPS}}


def family_of(op: str) -> OpFamily:
    try:
        return _BY_OP[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}; expected one of {sorted(_BY_OP)}") from None
