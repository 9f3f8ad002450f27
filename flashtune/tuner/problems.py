"""What the tuner tunes: (op, problem) pairs, the default sets and the ``--problem`` syntax.

``--problem`` text:
- softmax family: ``OP:DTYPE:ROWSxCOLS``, e.g. ``softmax:float16:4096x50257``;
- attention: ``attention_fwd:DTYPE:BxHxNxD[:causal]``, e.g. ``attention_fwd:bfloat16:4x32x1000x128:causal``
  (batch, heads, sequence length of queries and keys, head dim; non-causal without the suffix).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..gen.attention_space import AttentionProblem
from ..gen.registry import OPS
from ..gen.softmax_space import SoftmaxProblem
from .families import family

DTYPES = ("float16", "bfloat16", "float32")
FORWARD_OPS = ("softmax", "log_softmax")
ATTENTION_OPS = ("attention_fwd",)

# The softmax shapes of the benchmark set (rows x cols).
DEFAULT_SHAPES = (
    (65536, 128), (16384, 1024), (8192, 4096), (4096, 16384),
    (1024, 65536), (128, 262144), (16, 1048576), (4096, 50257),
)
# Tiny shapes for the Triton interpreter on the CPU (CI): the whole pipeline, seconds not hours.
INTERPRET_SHAPES = ((8, 100), (4, 1000))
INTERPRET_DTYPES = ("float32", "float16")
# Attention under the interpreter: (B, H, N, D, causal flags); a ragged N and an odd head
# count keep the masks honest (and give the three problems three cache buckets).
INTERPRET_ATTENTION_SHAPES = ((1, 2, 64, 16, (False, True)), (1, 3, 40, 16, (True,)))


def attention_shapes() -> tuple:
    """The attention shapes of the benchmark set as (B, H, N, D, causal flags)."""
    from ..bench.shapes import ATTENTION_SHAPES

    return tuple((s.batch, s.heads, s.n, s.head_dim, s.causal) for s in ATTENTION_SHAPES)


@dataclass(frozen=True)
class TuneProblem:
    op: str
    problem: Any  # SoftmaxProblem for the softmax family, AttentionProblem for attention_fwd

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}; expected one of {sorted(OPS)}")
        fam = family(self.op)
        fam.check(self.problem)
        if self.problem.dtype not in fam.dtypes:
            raise ValueError(f"{self.op}: unknown dtype {self.problem.dtype!r}; expected one of "
                             f"{list(fam.dtypes)}")

    @property
    def dtype(self) -> str:
        return self.problem.dtype

    def bucket(self) -> dict:
        return family(self.op).bucket(self.problem)

    def label(self) -> str:
        return f"{self.op}:{self.dtype}:{family(self.op).shape_text(self.problem)}"

    def key(self):
        """The cache key of this problem (ProblemKey of flashtune.cache)."""
        from ..cache import ProblemKey

        return ProblemKey.make(self.op, self.dtype, self.bucket())


# Tuning allocates the problem's tensors on the GPU: a shape past this many elements (2**36,
# 128 GiB in fp16) is a typo, refused before any work starts.
MAX_ELEMENTS = 1 << 36


def _dims(text: str, count: int, what: str, example: str) -> list[int]:
    """The sizes of a --problem shape; zero sizes are left to the family's own problem check."""
    dims = text.lower().split("x")
    if len(dims) != count or not all(d.strip().isascii() and d.strip().isdigit() for d in dims):
        raise ValueError(f"the shape must be {what} like {example}, got {text!r}")
    sizes = [int(d) for d in dims]
    numel = math.prod(sizes)
    if numel > MAX_ELEMENTS:
        raise ValueError(f"the shape {text!r} has {numel} elements; the tuner takes at most "
                         f"{MAX_ELEMENTS} (2**36)")
    return sizes


def parse_problem(text: str) -> TuneProblem:
    """``softmax:float16:4096x50257`` or ``attention_fwd:float16:4x32x1000x128:causal`` ->
    TuneProblem (ValueError naming --problem, the value given and the part that is wrong)."""
    try:
        return _parse_problem(text)
    except ValueError as err:
        # The problem classes' own messages ("problem rows and columns must be >= 1", "unknown
        # op ...") named neither the option nor which of several --problem values was wrong.
        raise ValueError(f"--problem {text!r}: {err}") from None


def _parse_problem(text: str) -> TuneProblem:
    parts = text.strip().split(":")
    if len(parts) > 1 and parts[0] not in OPS:
        # Named before the shape, whose expected form depends on the op: "attention:..." (the
        # public function's name) was told its shape must be ROWSxCOLS.
        raise ValueError(f"unknown op {parts[0]!r}; expected one of {sorted(OPS)}")
    if parts[0] in ATTENTION_OPS:
        if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "causal"):
            raise ValueError("an attention problem must look like attention_fwd:DTYPE:BxHxNxD"
                             "[:causal] (e.g. attention_fwd:float16:4x32x1000x128:causal)")
        op, dtype, shape = parts[:3]
        b, h, n, d = _dims(shape, 4, "BxHxNxD", "4x32x1000x128")
        return TuneProblem(op, AttentionProblem(b, h, h, n, n, d, len(parts) == 4, dtype))
    if len(parts) != 3:
        raise ValueError("a problem must look like OP:DTYPE:ROWSxCOLS "
                         "(e.g. softmax:float16:4096x50257) or attention_fwd:DTYPE:BxHxNxD[:causal]")
    op, dtype, shape = parts
    rows, cols = _dims(shape, 2, "ROWSxCOLS", "4096x50257")
    return TuneProblem(op, SoftmaxProblem(rows, cols, dtype))


def _comma_list(text: str, option: str, noun: str, known) -> tuple[str, ...]:
    """The names of a comma list, each once, in the order given."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise ValueError(f"{option}: empty; expected a comma list of {known}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{option}: unknown {noun}(s) {unknown}; expected a comma list of {known}")
    return names


def parse_ops(text: str) -> tuple[str, ...]:
    return _comma_list(text, "--ops", "op", sorted(OPS))


def parse_dtypes(text: str) -> tuple[str, ...]:
    return _comma_list(text, "--dtypes", "dtype", list(DTYPES))


def default_problems(ops=("softmax",), dtypes=DTYPES, interpret: bool = False) -> list[TuneProblem]:
    """The default tuning set: every op x dtype x shape (tiny shapes under the interpreter).

    Each op takes the dtypes its family supports (attention: float16 and bfloat16 of ``dtypes``).
    """
    out = []
    for op in ops:
        fam_dtypes = [dt for dt in dtypes if dt in family(op).dtypes]
        if op in ATTENTION_OPS:
            shapes = INTERPRET_ATTENTION_SHAPES if interpret else attention_shapes()
            out += [TuneProblem(op, AttentionProblem(b, h, h, n, n, d, causal, dt))
                    for dt in fam_dtypes for b, h, n, d, flags in shapes for causal in flags]
        else:
            shapes = INTERPRET_SHAPES if interpret else DEFAULT_SHAPES
            out += [TuneProblem(op, SoftmaxProblem(r, c, dt)) for dt in fam_dtypes for r, c in shapes]
    return out
