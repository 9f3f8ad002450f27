"""From (op, raw config) to a runnable kernel: validate, render, write, load, launch.

Tests, the tuner and the dispatcher all go through ``run_variant``.
"""

from __future__ import annotations

import functools
import hashlib
import re
from types import ModuleType
from typing import Any, Mapping

import torch

from . import loader, render
from .registry import FAMILY_MODULES, TEMPLATE_FAMILIES, op_spec
from .space import Config


def validate_config(op: str, raw: Mapping[str, Any]) -> Config:
    """The only door from stored or typed-in data to a template (raises ConfigError)."""
    return op_spec(op).space.validate(raw)


def render_variant(op: str, config: Mapping[str, Any]) -> render.RenderedVariant:
    spec = op_spec(op)
    config = spec.space.validate(config)
    return _render_cached(op, config)


@functools.lru_cache(maxsize=4096)
def _render_cached(op: str, config: Config) -> render.RenderedVariant:
    spec = op_spec(op)
    return render.render(spec.template(config), op, config, spec.render_context())


def load_variant(op: str, config: Mapping[str, Any]) -> ModuleType:
    """The imported module of a variant (rendered and loaded once per process)."""
    return loader.load(render_variant(op, config))


def source_path(op: str, config: Mapping[str, Any]):
    return loader.source_path(render_variant(op, config))


def written_source(op: str, config: Mapping[str, Any]):
    """Where the variant's source file is (written if not yet), None if only in memory."""
    return loader.written_source(render_variant(op, config))


@functools.lru_cache(maxsize=None)
def template_family_hash(op: str) -> str:
    """What a tuned winner must carry to be served: the hash of the op's template files, of
    the flashtune modules its kernels import and, from a space's second revision on, of that
    revision. A winner chosen from an older space (fewer configs to pick from) is then a
    winner of another family, as after a template change: kept in the database, not served,
    re-tuned by the next `flashtune tune`; and an older flashtune sees the new winners the
    same way instead of as invalid rows."""
    # op_spec first: an op that is not one of ours is its ValueError naming the op, not a
    # bare KeyError from the tables below.
    revision = op_spec(op).space.revision
    templates = render.template_family_hash(TEMPLATE_FAMILIES[op], FAMILY_MODULES[op])
    if revision == 1:  # the hash before spaces had revisions: their winners stay current
        return templates
    return hashlib.sha256(f"{templates}\0space revision {revision}".encode()).hexdigest()[:16]


def of_another_family(op: Any, family_hash: Any) -> bool:
    """Whether a stored row's (op, family_hash) reads as tuned on other templates than today's:
    a family hash as flashtune writes them (16 hex digits) that is not the op's, or an op this
    version lacks (one of another flashtune version). A hash of any other form was edited
    outside flashtune, not tuned on other templates, and is not called so in messages."""
    if not (isinstance(family_hash, str) and _FAMILY_HASH.fullmatch(family_hash)):
        return False
    current = current_family_hash(op)
    return current is None or family_hash != current


_FAMILY_HASH = re.compile(r"[0-9a-f]{16}")


def current_family_hash(op: Any) -> str | None:
    """Today's template family hash of ``op``; None for anything that is not an op of this
    version (an op of another flashtune version, or garbage read from a database)."""
    if not isinstance(op, str) or op not in TEMPLATE_FAMILIES:
        return None
    return template_family_hash(op)


def run_variant(op: str, config: Mapping[str, Any], *tensors: torch.Tensor) -> None:
    """Launch one variant on prepared 2-D tensors (outputs last), e.g. (x, y) for a forward.

    No shape handling here: see ``flashtune.gen.softmax_ops`` for the user-facing wrappers.
    """
    load_variant(op, config).launch(*tensors)
