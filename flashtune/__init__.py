"""flashtune: auto-tuned Triton softmax and attention kernels.

The public API is deliberately thin and imports its machinery lazily, so ``import flashtune``
costs almost nothing (and never imports optuna). Where torch is already imported, it registers
the ``torch.ops.flashtune.*`` ops (see below).

``flashtune.softmax`` and ``flashtune.log_softmax`` are ``flashtune.ops.softmax`` and
``flashtune.ops.log_softmax``, bound on first access (module ``__getattr__``): a forwarding
wrapper here would cost about a microsecond per call (a tenth of the call budget).
"""

from __future__ import annotations

import sys as _sys

__version__ = "0.1.0"

__all__ = ["softmax", "log_softmax", "attention", "__version__"]

_LAZY_OPS = ("softmax", "log_softmax")
_LAZY_ATTENTION = ("attention",)  # flashtune.attention_op.attention (imports torch)


if "torch" in _sys.modules:
    # torch is loaded anyway: register torch.ops.flashtune.* now (about 0.1 s more), so that
    # `import torch, flashtune` is enough for torch.export.load of a program that calls them,
    # and for direct op calls. (Imported before torch, flashtune registers them on the first
    # access to flashtune.softmax / log_softmax / attention, or with `import flashtune.ops`
    # and `import flashtune.attention_op`.)
    from . import attention_op as _attention_op  # noqa: E402,F401
    from .dispatch import library as _library  # noqa: E402,F401


def __getattr__(name: str):
    if name in _LAZY_OPS:
        from . import ops

        value = getattr(ops, name)
        globals()[name] = value  # later look-ups are plain module attributes
        return value
    if name in _LAZY_ATTENTION:
        from . import attention_op

        value = getattr(attention_op, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flashtune' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_OPS) | set(_LAZY_ATTENTION))
