"""Which cache keys (dtype and problem bucket) an op's problems can have.

The dispatcher and the tuner only ever build buckets with ``problem_bucket`` of the op's space;
a winner imported from a file must have a key of that form too, or it is dead weight that no
problem can reach (and a mixed-type bucket would break ``flashtune show``'s sorting).
"""

from __future__ import annotations

from typing import Any, Mapping

from . import attention_space, softmax_space

SOFTMAX_DTYPES = ("float16", "bfloat16", "float32")
ATTENTION_DTYPES = ("float16", "bfloat16")
# A bucket is a power of two no smaller than its problem's size; 2**62 is past any tensor.
MAX_BUCKET = 2**62


def op_dtypes(op: str) -> tuple[str, ...]:
    if op in softmax_space.OPS:
        return SOFTMAX_DTYPES
    if op in attention_space.OPS:
        return ATTENTION_DTYPES
    raise ValueError(f"unknown op {op!r}; expected one of "
                     f"{sorted([*softmax_space.OPS, *attention_space.OPS])}")


def check_problem_key(op: str, dtype: Any, bucket: Any) -> None:
    """Raise ValueError/TypeError unless (dtype, bucket) is a key ``problem_bucket`` can give."""
    dtypes = op_dtypes(op)
    if dtype not in dtypes:
        raise ValueError(f"{op}: dtype must be one of {list(dtypes)}, got {dtype!r}")
    if not isinstance(bucket, Mapping):
        raise TypeError(f"bucket must be an object, got {type(bucket).__name__}")
    if op in softmax_space.OPS:
        _check_softmax_bucket(dtype, bucket)
        return
    _check_fields(bucket, ("bh_bucket", "causal", "head_dim", "nk_bucket", "nq_bucket"))
    head_dim = bucket["head_dim"]
    if type(head_dim) is not int or not attention_space.head_dim_supported(head_dim):
        raise ValueError(f"bucket head_dim must be a multiple of {attention_space.HEAD_DIM_STEP} "
                         f"in [{attention_space.HEAD_DIM_STEP}, {attention_space.HEAD_DIM_MAX}], "
                         f"got {head_dim!r}")
    for name in ("bh_bucket", "nk_bucket", "nq_bucket"):
        _check_pow2(bucket, name, MAX_BUCKET)
    if type(bucket["causal"]) is not bool:
        raise TypeError(f"bucket causal must be true or false, got {bucket['causal']!r}")


def bucket_misfit(op: str, dtype: str, bucket: Mapping[str, Any],
                  config: Mapping[str, Any]) -> str | None:
    """Why a valid config runs no problem of this bucket (checked by ``check_problem_key``),
    or None when it runs some. The dispatcher takes a winner only for problems it fits, so a
    winner that fits none of its bucket's is dead weight, as a bucket no problem has is."""
    if op in softmax_space.OPS:
        return softmax_space.problem_misfit(config, softmax_space.narrowest_problem(bucket, dtype))
    # An attention config's misfit depends on the head dim alone, one value per bucket.
    problem = attention_space.AttentionProblem(
        bucket["bh_bucket"], 1, 1, bucket["nq_bucket"], bucket["nk_bucket"], bucket["head_dim"],
        bucket["causal"], dtype)
    return attention_space.problem_misfit(config, problem)


def _check_softmax_bucket(dtype: str, bucket: Mapping[str, Any]) -> None:
    grain = softmax_space.GRAIN_FIELD
    _check_fields(bucket, ("cols_bucket", "rows_bucket", grain) if grain in bucket
                  else ("cols_bucket", "rows_bucket"))
    _check_pow2(bucket, "rows_bucket", MAX_BUCKET)
    # problem_bucket rounds columns up: the widest row a kernel takes, rounded up
    _check_pow2(bucket, "cols_bucket", 1 << (softmax_space.MAX_COLS - 1).bit_length())
    if grain in bucket:
        _check_pow2(bucket, grain, 8)  # below a 16-bit row's whole width (16)
    # The widest problem of the bucket's grain must give this very bucket: refuses a grain no
    # row length of these columns has (fp16 columns bucket 4 with grain 2), a grain of a whole
    # vector (problem_bucket leaves such rows without the field), and rows of fewer than one
    # vector without the field.
    expected = softmax_space.problem_bucket(softmax_space.bucket_problem(bucket, dtype))
    if expected != dict(bucket):
        raise ValueError(f"bucket {dict(bucket)} is no {dtype} problem's bucket (problems of "
                         f"those columns have buckets like {expected})")


def _check_fields(bucket: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    if sorted(bucket) != sorted(fields):
        raise ValueError(f"bucket must have exactly the fields {list(fields)}, "
                         f"got {sorted(map(str, bucket))}")


def _check_pow2(bucket: Mapping[str, Any], name: str, largest: int) -> None:
    value = bucket[name]
    if type(value) is not int or not 1 <= value <= largest or value & (value - 1):
        raise ValueError(f"bucket {name} must be a power of two in [1, {largest}], got {value!r}")
