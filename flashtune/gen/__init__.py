"""Variant spaces, validation, rendering and loading of generated kernels."""

from .registry import OPS, op_spec
from .space import Config, ConfigError, Param, VariantSpace
from .variants import (
    current_family_hash,
    load_variant,
    render_variant,
    run_variant,
    source_path,
    template_family_hash,
    validate_config,
)

__all__ = [
    "OPS", "op_spec", "Config", "ConfigError", "Param", "VariantSpace", "current_family_hash",
    "load_variant",
    "render_variant", "run_variant", "source_path", "template_family_hash", "validate_config",
]
