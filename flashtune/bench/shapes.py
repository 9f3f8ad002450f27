"""The benchmark cases (the README's tables, `flashtune tune`'s default set), the --quick subset and the interpreter's tiny set.

Softmax cases are (rows, cols); attention cases are named (B, H, N, D, causal flags).
Only plain data here: no torch import, so the CLI and the report can read it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

SOFTMAX_SHAPES = ((65536, 128), (16384, 1024), (8192, 4096), (4096, 16384), (1024, 65536),
                  (128, 262144), (16, 1048576), (4096, 50257))
SOFTMAX_DTYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    n: int
    head_dim: int
    causal: tuple[bool, ...]  # which causal flags the benchmark runs

    @property
    def name(self) -> str:
        ragged = "ragged-" if self.n & (self.n - 1) else ""
        return f"{ragged}d{self.head_dim}-b{self.batch}-h{self.heads}-n{self.n}"


ATTENTION_SHAPES = (
    AttentionShape(32, 32, 1024, 64, (False, True)),
    AttentionShape(8, 32, 4096, 64, (False, True)),
    AttentionShape(2, 32, 16384, 64, (False, True)),
    AttentionShape(32, 16, 1024, 128, (False, True)),
    AttentionShape(8, 16, 4096, 128, (False, True)),
    AttentionShape(2, 16, 16384, 128, (False, True)),
    AttentionShape(2, 16, 4096, 256, (False, True)),
    AttentionShape(4, 32, 1000, 128, (True,)),
)
ATTENTION_DTYPES = ("float16", "bfloat16")

# --quick: one small, one mid and one wide softmax, and 16x1048576, the shape furthest from
# its goal (README "Where we lose"): a quick run must not read as if every shape met it.
# Attention: the head dims 64/128 at two lengths.
QUICK_SOFTMAX_SHAPES = ((16384, 1024), (1024, 65536), (4096, 50257), (16, 1048576))
QUICK_SOFTMAX_DTYPES = ("float16", "float32")
QUICK_ATTENTION_SHAPES = (ATTENTION_SHAPES[1], ATTENTION_SHAPES[4], ATTENTION_SHAPES[5])
QUICK_ATTENTION_DTYPES = ("float16",)

# --interpret: CPU tensors through Triton's interpreter. Tiny, so the smoke run stays fast;
# a column count that is not a power of two and a ragged causal length keep the masks honest.
INTERPRET_SOFTMAX_SHAPES = ((4, 128), (3, 1000))
INTERPRET_SOFTMAX_DTYPES = SOFTMAX_DTYPES
INTERPRET_ATTENTION_SHAPES = (AttentionShape(1, 2, 64, 32, (False, True)),
                              AttentionShape(1, 2, 40, 16, (True,)))
# Triton's interpreter returns garbage for tl.dot on bf16 operands (an interpreter bug, not a
# kernel one): bf16 attention is a GPU-only case.
INTERPRET_ATTENTION_DTYPES = ("float16",)


@dataclass(frozen=True)
class CaseSet:
    softmax_shapes: tuple
    softmax_dtypes: tuple
    attention_shapes: tuple
    attention_dtypes: tuple


def case_set(mode: str) -> CaseSet:
    """``mode``: "full", "quick" or "interpret"."""
    if mode == "full":
        return CaseSet(SOFTMAX_SHAPES, SOFTMAX_DTYPES, ATTENTION_SHAPES, ATTENTION_DTYPES)
    if mode == "quick":
        return CaseSet(QUICK_SOFTMAX_SHAPES, QUICK_SOFTMAX_DTYPES, QUICK_ATTENTION_SHAPES,
                       QUICK_ATTENTION_DTYPES)
    if mode == "interpret":
        return CaseSet(INTERPRET_SOFTMAX_SHAPES, INTERPRET_SOFTMAX_DTYPES,
                       INTERPRET_ATTENTION_SHAPES, INTERPRET_ATTENTION_DTYPES)
    raise ValueError(f"mode must be 'full', 'quick' or 'interpret', got {mode!r}")


def softmax_label(rows: int, cols: int) -> str:
    return f"{rows}x{cols}"
