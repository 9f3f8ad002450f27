"""``flashtune source OP [--param value ...] [--shape RxC --dtype D]``: print generated source.

Without tunables and with ``--shape``, the heuristic default for that shape is shown; any
tunable given on the command line overrides it. Values pass the variant space's validation.
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from ..gen import OPS, op_spec, render_variant, validate_config
from .options import ascii_int

_DTYPES = ("float16", "bfloat16", "float32")


def _parse_bool(text: str) -> bool:
    # The FLASHTUNE_* switches' words (imported here: the dispatch package is not light).
    from ..dispatch.settings import bool_word

    value = bool_word(text)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"expected true or false (1/true/yes/on or 0/false/no/off), got {text!r}")
    return value


def _parse_dims(text: str) -> tuple[int, ...]:
    parts = text.lower().split("x")
    # ASCII digits only, as `tune --problem` takes: str.isdigit also accepts digits int()
    # refuses ("²") and other scripts' digits ("٣"), which int() reads.
    if not all(p.strip().isascii() and p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected positive integers joined by x (ROWSxCOLS, or BxHxNxD for attention), got {text!r}")
    return tuple(int(p) for p in parts)


def register(sub) -> None:
    p = sub.add_parser("source", help="print the generated Triton source of a variant",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op", choices=sorted(OPS), help="op whose kernel to show")
    p.add_argument("--shape", type=_parse_dims, default=None,
                   help="problem for the default config: ROWSxCOLS for the softmax ops (default "
                        "4096x4096), BxHxNxD for attention_fwd (default 2x16x4096x128)")
    p.add_argument("--causal", action="store_true", help="attention_fwd: a causal problem")
    p.add_argument("--dtype", choices=_DTYPES, default="float16", help="(default float16)")
    p.add_argument("--path", action="store_true",
                   help="also write the source file where the runtime keeps it; print its path")
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
            # ints: ASCII digits, no sign (no tunable is negative)
            parse = {bool: _parse_bool, int: ascii_int}.get(param.kind, param.kind)
            p.add_argument(f"--{param.name.replace('_', '-')}", dest=param.name, type=parse,
                           default=None, help=f"{param.doc}; one of {list(param.exhaustive)}")
    p.set_defaults(run=run)


# The SM count the default config is shown for on a machine without a GPU.
ASSUMED_SM_COUNT = 132


def _this_device():
    """Where kernels run here (DeviceInfo): its SM count is what the runtime's defaults use
    (the interpreter's: the CPU count; capability "cpu"). Defect: `source` showed the
    defaults of a 132-SM GPU on every GPU, so on an A100 (108 SMs) 128 x 262144 fp16 showed
    a split kernel where the runtime ran the online one."""
    from ..cache import DeviceInfo

    return DeviceInfo.current()


def _problem(op: str, args):
    """The problem --shape/--dtype/--causal describe, and the family's functions for it."""
    if op_spec(op).family == "attention":
        from ..gen import attention_space as family

        shape = args.shape or (2, 16, 4096, 128)
        if len(shape) != 4:
            raise ValueError(f"--shape for {op} is BxHxNxD, got {'x'.join(map(str, shape))}")
        if args.dtype == "float32":
            raise ValueError(f"{op} takes --dtype float16 or bfloat16")
        b, h, n, d = shape
        return family.AttentionProblem(b, h, h, n, n, d, args.causal, args.dtype), family
    from ..gen import softmax_space as family

    if args.causal:  # a store_true flag: ignored silently, it would seem to have been applied
        raise ValueError(f"--causal applies to attention_fwd only, not {op}")
    shape = args.shape or (4096, 4096)
    if len(shape) != 2:
        raise ValueError(f"--shape for {op} is ROWSxCOLS, got {'x'.join(map(str, shape))}")
    return family.SoftmaxProblem(shape[0], shape[1], args.dtype), family


def _check_shape(op: str, problem, shape: tuple[int, ...]) -> None:
    """A --shape no flashtune call can have (more elements than a tensor holds, a head dim the
    kernel lacks, rows past the kernels' int32 offsets) is a usage error naming --shape, as
    `tune --problem` refuses it: the heuristic would still pick a config and print its source."""
    from ..tuner.families import family

    text = "x".join(map(str, shape))
    if math.prod(shape) >= 2**63:  # torch counts elements in an int64
        raise ValueError(f"--shape {text}: no tensor has that many elements")
    try:
        family(op).check(problem)
    except ValueError as err:
        raise ValueError(f"--shape {text}: {err}") from None


def run(args) -> int:
    spec = op_spec(args.op)
    problem, family = _problem(args.op, args)
    if args.shape is not None:  # the defaults are possible problems
        _check_shape(args.op, problem, args.shape)
    # --regime on a softmax op: the heuristic's or the dispatcher's other knobs belong to their
    # own regime (e.g. rows per program), so another regime starts from the plain defaults.
    regime = getattr(args, "regime", None) if spec.family == "softmax" else None
    plain = _plain_defaults(spec, regime)
    origin = "the default config"  # where the tunables not given come from (refusals say it)
    notes: list[str] = []
    if args.dispatch:
        from ..dispatch import RUNTIME, attention_choice, choice
        from ..dispatch.settings import as_set

        here = _no_kernels_here(args.op, spec.family, RUNTIME.settings.interpreter)
        # Without kernels here the pick below is the interpreter's: say so on each line.
        under = "" if here is None else "with TRITON_INTERPRET=1, "
        if here is not None:
            print(f"# dispatch: {here}", file=sys.stderr)
        if RUNTIME.disabled:
            # FLASHTUNE_DISABLE=1: no tuned winner runs (the dispatcher's pick would name one)
            config = family.default_config(spec, problem, _this_device().sm_count).as_dict()
            runs = ("the heuristic default config (the database is not read)"
                    if spec.family == "attention" else
                    "torch's op runs, no flashtune kernel; below: the heuristic default's source")
            print(f"# dispatch: {under}{as_set('FLASHTUNE_DISABLE')}: {runs}", file=sys.stderr)
        else:
            if spec.family == "attention":
                picked = attention_choice(problem)
            else:
                picked = choice(args.op, (problem.n_rows, problem.n_cols), args.dtype)
            print(f"# dispatch: {under}{picked.describe()}", file=sys.stderr)
            config = picked.config.as_dict()
            origin = "the dispatcher's pick"
    else:
        here = _this_device()
        sm_count = here.sm_count
        if here.capability == "cpu":  # no GPU (or TRITON_INTERPRET=1)
            sm_count = ASSUMED_SM_COUNT
            notes.append(f"# note: no GPU here: the default config for a GPU of {sm_count} SMs "
                         "(an H100's or H200's; the split regime's choices depend on it)")
        config = family.default_config(spec, problem, sm_count).as_dict()
    if regime is not None and regime != config["regime"]:
        # the pick's other knobs are its own regime's: start from the plain defaults
        if args.dispatch:
            print(f"# --regime {regime} differs from the picked {config['regime']!r}: starting "
                  "from the space's plain defaults instead", file=sys.stderr)
        config, origin = plain, "the default config"
    given = {name: getattr(args, name, None) for name in config}
    config.update({k: v for k, v in given.items() if v is not None})
    stray = [n for n in _all_param_names() if getattr(args, n, None) is not None and n not in config]
    if stray:
        raise ValueError(f"{args.op} has no tunable(s) {stray}; it takes {list(spec.space.names)}")
    try:
        validated = validate_config(args.op, config)
    except ValueError as err:
        raise ValueError(_with_defaults_named(err, config, given, origin)) from None
    misfit = family.problem_misfit(validated, problem)
    variant = render_variant(args.op, validated)
    print(variant.source, end="")  # print: a closed stdout (None) is skipped, as for every command
    for note in notes:  # after the source: a reader gone away (| head) stops it quietly first
        print(note, file=sys.stderr)
    if misfit:
        print(f"# note: this config cannot run that problem: {misfit}", file=sys.stderr)
    if args.path:
        from ..gen.loader import write_source

        # Written as the runtime writes it (same file, or the fallback folder when the cache
        # folder cannot be written): a path to a file that is not there yet is no help.
        print(f"# source file: {write_source(variant)}", file=sys.stderr)
    return 0


def _no_kernels_here(op: str, family: str, interpreter: bool) -> str | None:
    """What the runtime does on this machine when it runs no flashtune kernel (no CUDA GPU and
    TRITON_INTERPRET unset: README's "What runs where"), or None where kernels run. The
    dispatcher's pick is then the interpreter's: without this line --dispatch printed "on
    triton-interpreter" and a kernel, though torch computed CPU softmax."""
    import torch

    if interpreter or torch.cuda.is_available():
        return None
    if family == "attention":
        runs = ("flashtune.attention of CPU tensors raises ValueError (it needs CUDA tensors, "
                "or TRITON_INTERPRET=1 for Triton's interpreter)")
    else:
        runs = f"torch computes {op} of CPU tensors, no flashtune kernel runs"
    return (f"no CUDA GPU here and TRITON_INTERPRET=1 is not set: {runs}; below: the source "
            "Triton's interpreter would run with TRITON_INTERPRET=1")


def _with_defaults_named(err: ValueError, config: dict, given: dict, origin: str) -> str:
    """The validation error, naming the tunables it speaks of that the user did not give:
    --BLOCK-M 64 alone was told "num_warps * 16 must not exceed BLOCK_M", though the
    num_warps=8 there came from ``origin`` (the default config, or --dispatch's pick), not
    from the command line."""
    text = str(err)
    taken = [name for name, value in config.items() if given.get(name) is None
             and re.search(rf"\b{re.escape(name)}\b", text)]
    if not taken or all(value is None for value in given.values()):
        return text
    shown = ", ".join(f"{name}={config[name]!r}" for name in taken)
    options = ", ".join("--" + name.replace("_", "-") for name in taken)
    return f"{text} (not given, so {origin}'s: {shown}; set {options} to change them)"


def _plain_defaults(spec, regime: str | None) -> dict:
    """The space's defaults, in ``regime`` where one is named. Their splits=1 is the other
    regimes' value: a splitting regime (split, coop) starts from the smallest splits it takes,
    so that naming only the regime works; a --splits given is applied (and judged) after."""
    plain = {param.name: param.default for param in spec.space.params}
    if regime is not None and "splits" in plain:
        plain["splits"] = next(
            (n for n in spec.space.param("splits").exhaustive
             if spec.space.is_valid({**plain, "regime": regime, "splits": n})),
            plain["splits"])  # none: the regime itself is wrong, which validation then says
    return plain


def _all_param_names() -> list[str]:
    return sorted({p.name for spec in OPS.values() for p in spec.space.params})
