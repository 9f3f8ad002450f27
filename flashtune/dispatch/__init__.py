"""Runtime dispatch: which tuned config runs a softmax problem, and the pre-bound launch plans.

- ``choice(op, shape, dtype, device=None)``: what the dispatcher picks for a softmax problem
  (a ``Choice``: config, how it was chosen, bucket); the CLI's ``source --dispatch`` prints it.
- ``attention_choice(problem, device=None)``: the same for an ``AttentionProblem``
  (``flashtune.attention`` uses it through ``flashtune.dispatch.attention.choose``).
- ``reset()``: re-read the environment (FLASHTUNE_DISABLE, FLASHTUNE_LOG, TRITON_INTERPRET,
  FLASHTUNE_DB, FLASHTUNE_CACHE_DIR) and forget tables, decisions and plans. TRITON_INTERPRET
  only works as set before Triton was imported: Triton fixes then whether its own functions
  are interpreted, and kernels loaded after a later change fail in Triton.
"""

from __future__ import annotations

from ..gen.notices import DispatchWarning
from .attention import choice as attention_choice
from .chooser import Choice, Dispatcher, resolve_device
from .runtime import RUNTIME, reset
from .table import WinnerTable

__all__ = ["attention_choice", "Choice", "Dispatcher", "DispatchWarning", "RUNTIME", "WinnerTable", "choice", "reset"]


def choice(op: str, shape: tuple[int, int], dtype: str, device=None) -> Choice:
    """The dispatcher's pick for a (rows, cols) problem of ``dtype`` ("float16", ...)."""
    from ..gen.softmax_space import MAX_COLS, OPS, SoftmaxProblem

    if op not in OPS:
        raise ValueError(f"op must be one of {sorted(OPS)}, got {op!r}")
    if (not isinstance(shape, (tuple, list)) or len(shape) != 2
            or not all(type(n) is int and n >= 1 for n in shape)):
        raise ValueError(f"shape must be (rows, cols) of positive ints, got {shape!r}")
    if shape[1] > MAX_COLS:
        # What the ops do with such rows (int32 column offsets): no kernel, no decision.
        raise ValueError(f"shape: rows of {shape[1]} columns are computed by torch, not by a "
                         f"flashtune kernel (at most {MAX_COLS} columns)")
    if dtype not in ("float16", "bfloat16", "float32"):
        raise ValueError(f"dtype must be 'float16', 'bfloat16' or 'float32', got {dtype!r}")
    device = resolve_device(device, RUNTIME.settings.interpreter)
    return RUNTIME.dispatcher.choice(op, SoftmaxProblem(shape[0], shape[1], dtype), device)
