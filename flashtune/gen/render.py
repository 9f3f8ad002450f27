"""Render Triton source from the package's Jinja templates.

Templates are package files read with importlib.resources; the environment uses
``jinja2.StrictUndefined`` so a missing variable is an error, never an empty string. Only a
validated ``Config`` reaches ``render``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Mapping

import jinja2

from .space import Config

TEMPLATE_PACKAGE = "flashtune.templates"


def _read_template(name: str) -> str:
    return resources.files(TEMPLATE_PACKAGE).joinpath(name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_read_template),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _read_module(name: str) -> str:
    """The source of the flashtune module ``name`` (dotted), read as the templates are."""
    package, _, leaf = name.rpartition(".")
    return resources.files(package).joinpath(f"{leaf}.py").read_text(encoding="utf-8")


def template_family_hash(names: tuple[str, ...], modules: tuple[str, ...] = ()) -> str:
    """Hash of a family's template files and of the flashtune ``modules`` its rendered kernels
    import (row_sync: one launch or two, the persistent grid, the wait bound): a change to
    either invalidates its tuned winners. Without modules, the templates' hash alone (what
    it was before modules counted: a family that imports none keeps its winners)."""
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(_read_template(name).encode())
        digest.update(b"\0")
    for name in sorted(modules):
        digest.update(f"module {name}".encode())
        digest.update(b"\0")
        digest.update(_read_module(name).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def variant_hash(op: str, config: Config, source: str) -> str:
    """Stable across processes and machines: depends only on op, parameters and source text."""
    params = json.dumps({"op": op, "config": config.as_dict()}, sort_keys=True)
    return hashlib.sha256(params.encode() + b"\0" + source.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RenderedVariant:
    op: str
    config: Config
    source: str
    hash: str

    @property
    def module_name(self) -> str:
        regime = self.config["regime"] if "regime" in self.config else "kernel"
        return f"{self.op}_{regime}_{self.hash}"


def render(template: str, op: str, config: Config, extra: Mapping[str, Any]) -> RenderedVariant:
    """Render one variant. ``extra`` holds op-level facts (e.g. ``log``, ``direction``)."""
    if not isinstance(config, Config):
        raise TypeError("render() takes a validated Config (see VariantSpace.validate)")
    context = dict(config.as_dict())
    context.update(extra)
    context["op"] = op
    context["kernel_name"] = f"_{op}_{config['regime']}" if "regime" in config else f"_{op}"
    source = environment().get_template(template).render(**context)
    if not source.endswith("\n"):
        source += "\n"
    return RenderedVariant(op, config, source, variant_hash(op, config, source))
