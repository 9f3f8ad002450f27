"""What the tuner tunes: (op, problem) pairs, the default sets and the ``op:dtype:RxC`` syntax."""

from __future__ import annotations

from dataclasses import dataclass

from ..gen.registry import OPS
from ..gen.softmax_space import SoftmaxProblem, problem_bucket

DTYPES = ("float16", "bfloat16", "float32")
FORWARD_OPS = ("softmax", "log_softmax")

# The softmax shapes of the benchmark set (rows x cols).
DEFAULT_SHAPES = (
    (65536, 128), (16384, 1024), (8192, 4096), (4096, 16384),
    (1024, 65536), (128, 262144), (16, 1048576), (4096, 50257),
)
# Tiny shapes for the Triton interpreter on the CPU (CI): the whole pipeline, seconds not hours.
INTERPRET_SHAPES = ((8, 100), (4, 1000))
INTERPRET_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class TuneProblem:
    op: str
    problem: SoftmaxProblem

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}; expected one of {sorted(OPS)}")
        if self.problem.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.problem.dtype!r}; expected one of {list(DTYPES)}")
        if self.problem.n_rows < 1 or self.problem.n_cols < 1:
            raise ValueError("problem rows and columns must be >= 1")

    @property
    def dtype(self) -> str:
        return self.problem.dtype

    def bucket(self) -> dict:
        return problem_bucket(self.problem)

    def label(self) -> str:
        p = self.problem
        return f"{self.op}:{p.dtype}:{p.n_rows}x{p.n_cols}"

    def key(self):
        """The cache key of this problem (ProblemKey of flashtune.cache)."""
        from ..cache import ProblemKey

        return ProblemKey.make(self.op, self.dtype, self.bucket())


def parse_problem(text: str) -> TuneProblem:
    """``softmax:float16:4096x50257`` -> TuneProblem (ValueError naming the part that is wrong)."""
    parts = text.strip().split(":")
    if len(parts) != 3:
        raise ValueError(f"--problem must look like OP:DTYPE:ROWSxCOLS "
                         f"(e.g. softmax:float16:4096x50257), got {text!r}")
    op, dtype, shape = parts
    dims = shape.lower().split("x")
    if len(dims) != 2 or not all(d.strip().isdigit() for d in dims):
        raise ValueError(f"--problem shape must be ROWSxCOLS like 4096x50257, got {shape!r}")
    rows, cols = (int(d) for d in dims)
    return TuneProblem(op, SoftmaxProblem(rows, cols, dtype))


def parse_ops(text: str) -> tuple[str, ...]:
    ops = tuple(o.strip() for o in text.split(",") if o.strip())
    unknown = [o for o in ops if o not in OPS]
    if unknown or not ops:
        raise ValueError(f"--ops: unknown op(s) {unknown}; expected a comma list of {sorted(OPS)}")
    return ops


def parse_dtypes(text: str) -> tuple[str, ...]:
    dtypes = tuple(d.strip() for d in text.split(",") if d.strip())
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown or not dtypes:
        raise ValueError(f"--dtypes: unknown dtype(s) {unknown}; expected a comma list of {list(DTYPES)}")
    return dtypes


def default_problems(ops=("softmax",), dtypes=DTYPES, interpret: bool = False) -> list[TuneProblem]:
    """The default tuning set: every op x dtype x shape (tiny shapes under the interpreter)."""
    shapes = INTERPRET_SHAPES if interpret else DEFAULT_SHAPES
    return [TuneProblem(op, SoftmaxProblem(r, c, dt)) for op in ops for dt in dtypes for r, c in shapes]
