"""``flashtune source OP [--param value ...] [--shape RxC --dtype D]``: print generated source.

Without tunables and with ``--shape``, the heuristic default for that shape is shown; any
tunable given on the command line overrides it. Values pass the variant space's validation.
"""

from __future__ import annotations

import argparse
import sys

from ..gen import OPS, op_spec, render_variant, validate_config
from ..gen.softmax_space import SoftmaxProblem, default_config, problem_misfit

_DTYPES = ("float16", "bfloat16", "float32")


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _parse_shape(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected ROWSxCOLS like 4096x50257, got {text!r}")
    rows, cols = (int(p) for p in parts)
    if rows < 1 or cols < 1:
        raise argparse.ArgumentTypeError("rows and columns must be >= 1")
    return rows, cols


def register(sub) -> None:
    p = sub.add_parser("source", help="print the generated Triton source of a variant",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op", choices=sorted(OPS), help="op whose kernel to show")
    p.add_argument("--shape", type=_parse_shape, default=(4096, 4096),
                   help="problem ROWSxCOLS for the default config (default 4096x4096)")
    p.add_argument("--dtype", choices=_DTYPES, default="float16")
    p.add_argument("--path", action="store_true", help="also print where the source file lives")
    p.add_argument("--dispatch", action="store_true",
                   help="start from the config the runtime dispatcher picks for --shape/--dtype "
                        "on this device (tuned exact/nearest bucket or default; said on stderr)")
    # One option per tunable of any op; each op's space says which ones it takes.
    seen: set[str] = set()
    for spec in OPS.values():
        for param in spec.space.params:
            if param.name in seen:
                continue
            seen.add(param.name)
            parse = _parse_bool if param.kind is bool else param.kind
            p.add_argument(f"--{param.name.replace('_', '-')}", dest=param.name, type=parse,
                           default=None, help=f"{param.doc}; one of {list(param.exhaustive)}")
    p.set_defaults(run=run)


def run(args) -> int:
    spec = op_spec(args.op)
    problem = SoftmaxProblem(args.shape[0], args.shape[1], args.dtype)
    if args.dispatch:
        from ..dispatch import choice

        picked = choice(args.op, args.shape, args.dtype)
        print(f"# dispatch: {picked.describe()}", file=sys.stderr)
        config = picked.config.as_dict()
    elif args.regime is None:
        config = default_config(spec, problem).as_dict()
    else:  # another regime: start from the plain defaults, not the shape's heuristic
        config = {param.name: param.default for param in spec.space.params}
    given = {name: getattr(args, name, None) for name in config}
    config.update({k: v for k, v in given.items() if v is not None})
    stray = [n for n in _all_param_names() if getattr(args, n, None) is not None and n not in config]
    if stray:
        raise ValueError(f"{args.op} has no tunable(s) {stray}; it takes {list(spec.space.names)}")
    validated = validate_config(args.op, config)
    misfit = problem_misfit(validated, problem)
    variant = render_variant(args.op, validated)
    sys.stdout.write(variant.source)
    if misfit:
        print(f"# note: this config cannot run shape {args.shape[0]}x{args.shape[1]}: {misfit}",
              file=sys.stderr)
    if args.path:
        from ..gen import source_path

        print(f"# source file: {source_path(args.op, validated)}", file=sys.stderr)
    return 0


def _all_param_names() -> list[str]:
    return sorted({p.name for spec in OPS.values() for p in spec.space.params})
