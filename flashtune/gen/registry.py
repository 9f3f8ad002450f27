"""The op families flashtune knows, looked up by op name.

An explicit table (not a hidden registry filled by imports): each family module lists its ops.
An op spec provides ``space`` (its VariantSpace), ``family`` (a name), ``template(config)`` (the
template file for a validated config) and ``render_context()`` (op-level template variables).
"""

from __future__ import annotations

from . import attention_space, softmax_space

OPS = dict(softmax_space.OPS)
OPS.update(attention_space.OPS)

# Template files whose content decides each op's kernels (for the cache key).
TEMPLATE_FAMILIES = {name: softmax_space.TEMPLATE_FAMILY for name in softmax_space.OPS}
TEMPLATE_FAMILIES.update({name: attention_space.TEMPLATE_FAMILY for name in attention_space.OPS})
# flashtune modules that rendered kernels import (their code runs with the kernels): part of
# the cache key too.
FAMILY_MODULES = {name: softmax_space.FAMILY_MODULES for name in softmax_space.OPS}
FAMILY_MODULES.update({name: attention_space.FAMILY_MODULES for name in attention_space.OPS})


def op_spec(op: str):
    try:
        return OPS[op]
    except (KeyError, TypeError):  # TypeError: an unhashable op (a list), named like any other
        raise ValueError(f"unknown op {op!r}; expected one of {sorted(OPS)}") from None
