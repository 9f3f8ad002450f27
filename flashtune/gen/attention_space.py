"""The attention family: the flash-attention forward op, its variant space, problems, defaults.

One op, ``attention_fwd``: out = softmax(Q K^T * scale [+ causal mask]) V per (batch, head),
optionally with the row log-sum-exp. Causal masking is bottom-right aligned (query r sees keys
c <= r + Nk - Nq, the FlashAttention convention); a query row that sees no key gets output 0
and LSE -inf.

The functions mirror ``softmax_space`` (``default_config``, ``problem_misfit``,
``problem_bucket``, ``fitting_configs``) so the tuner and the dispatcher treat both alike.
Hopper-only tunables (``tma``, ``warp_specialize``) are valid members of the space (a stored
config stays readable everywhere) but ``fitting_configs`` offers them only where
``hopper_features`` says the device and the installed Triton support them.

``pv_acc`` (the P.V tile product's accumulator) has one value, "fp32". An "fp16" value (the tile
product summed in fp16, with p scaled by 1 / BLOCK_N so the sum could not overflow) was taken
out: on peaked attention (one key whose score is g above the others, common in LLMs, whose
"sink" keys often carry a near-zero value) the others' weights exp(-g) / BLOCK_N fall into
fp16's subnormal range, are rounded coarsely or to zero while the fp32 normaliser still counts
them: output relative error 9e-2 at g = 11 and 1.0 at g = 14 (fp32: 1e-3, 4e-3). The tuner's
gate checks random inputs only, so it could crown it, and it measured no faster than fp32 on
H100/H200. The tunable stays, so stored configs (which carry the key) keep validating; a
stored "fp16" is now out of the space and refused like any other out-of-space value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from .space import Config, Param, VariantSpace

HEAD_DIM_MAX = 256
HEAD_DIM_STEP = 8  # 16-byte rows in fp16/bf16: what TMA and vector loads need
PV_ACC = ("fp32",)  # no "fp16": silently inaccurate on peaked attention (module docstring)
HOPPER_FEATURES = ("tma", "warp_specialize")

# Resource bounds used to prune configs that cannot compile or would spill heavily.
SMEM_LIMIT = 232448  # bytes of shared memory per block on H100/H200 (227 KiB)
REGS_PER_THREAD_LIMIT = 256  # fp32 accumulator + score tile values per thread


def _warps_have_rows(cfg: Mapping[str, Any]) -> str | None:
    # The MMA gives each warp at least 16 query rows; more warps only replicate work.
    if cfg["num_warps"] * 16 > cfg["BLOCK_M"]:
        return "num_warps * 16 must not exceed BLOCK_M"
    return None


SPACE = VariantSpace(
    "attention_fwd",
    (
        Param("BLOCK_M", int, (16, 32, 64, 128, 256), 128, "query rows per program tile"),
        Param("BLOCK_N", int, (16, 32, 64, 128, 256), 64, "keys per inner-loop step"),
        Param("num_warps", int, (1, 2, 4, 8, 16), 4, "warps per program"),
        Param("num_stages", int, (1, 2, 3, 4, 5), 3, "software pipelining depth of the key loop"),
        Param("exp2", bool, (False, True), True,
              "exp(x) as exp2(x * log2 e) with log2 e folded into the softmax scale"),
        Param("pv_acc", str, PV_ACC, "fp32",
              "P.V tile product accumulated in fp32 (the only value: fp16 accumulation lost "
              "small weights on peaked attention, see the module docstring)"),
        Param("persistent", bool, (False, True), False,
              "one program per SM looping over (head, query-tile) work items, heaviest first"),
        Param("tma", bool, (False, True), False,
              "load Q, K, V and store O through device-side tensor descriptors (Hopper TMA)"),
        Param("warp_specialize", bool, (False, True), False,
              "tl.range(..., warp_specialize=True) on the key loop (Hopper and newer)"),
    ),
    (_warps_have_rows,),
)


@dataclass(frozen=True)
class AttentionOp:
    name: str

    space = SPACE
    family = "attention"
    direction = "fwd"

    def template(self, config: Mapping[str, Any]) -> str:
        """The template file that renders this op with this (validated) config."""
        return "attention_fwd_persistent.py.jinja" if config["persistent"] else "attention_fwd.py.jinja"

    def render_context(self) -> dict[str, Any]:
        return {"direction": self.direction}


OPS = {op.name: op for op in (AttentionOp("attention_fwd"),)}

TEMPLATE_FAMILY = (
    "_attention_common.py.jinja",
    "attention_fwd.py.jinja",
    "attention_fwd_persistent.py.jinja",
)
FAMILY_MODULES: tuple[str, ...] = ()  # the rendered kernels import no flashtune module


@dataclass(frozen=True)
class AttentionProblem:
    """What an attention kernel is asked to do. ``heads`` counts query heads."""

    batch: int
    heads: int
    kv_heads: int
    nq: int
    nk: int
    head_dim: int
    causal: bool
    dtype: str  # "float16" | "bfloat16"


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def block_d(head_dim: int) -> int:
    """Head dims that are not powers of two are padded (masked loads) to the next one."""
    return max(16, _next_pow2(head_dim))


def head_dim_supported(head_dim: int) -> bool:
    return HEAD_DIM_STEP <= head_dim <= HEAD_DIM_MAX and head_dim % HEAD_DIM_STEP == 0


def problem_bucket(problem: AttentionProblem) -> dict[str, Any]:
    """Cache-key fields of a problem (the dtype is kept as a separate key field).

    Lengths and batch*heads round up to powers of two; a config that fits a bucket's largest
    problem fits all its problems (``problem_misfit`` depends only on these fields and dtype).
    """
    return {
        "head_dim": problem.head_dim,
        "nq_bucket": _next_pow2(problem.nq),
        "nk_bucket": _next_pow2(problem.nk),
        "bh_bucket": _next_pow2(problem.batch * problem.heads),
        "causal": bool(problem.causal),
    }


def resource_misfit(config: Mapping[str, Any], head_dim: int) -> str | None:
    """Why a config would not compile or would spill badly at this head dim, or None."""
    bd = block_d(head_dim)
    bm, bn, warps = config["BLOCK_M"], config["BLOCK_N"], config["num_warps"]
    regs = (bm * bd + bm * bn) // (32 * warps)
    if regs > REGS_PER_THREAD_LIMIT:
        return f"accumulator + score tile need {regs} values per thread (> {REGS_PER_THREAD_LIMIT})"
    smem = 2 * (bm * bd + 2 * max(1, config["num_stages"]) * bn * bd)
    if smem > SMEM_LIMIT:
        return f"Q tile + {config['num_stages']} K/V stages need {smem} bytes of shared memory"
    return None


def problem_misfit(config: Config, problem: AttentionProblem) -> str | None:
    """Why a valid config cannot run this problem, or None if it can."""
    if not head_dim_supported(problem.head_dim):
        return f"head dim {problem.head_dim} is not supported"
    return resource_misfit(config, problem.head_dim)


def hopper_features(device: Any = None) -> frozenset[str]:
    """Hopper tunables this device and the installed Triton support (empty off CUDA)."""
    import torch  # lazily: this module is imported on light paths (registry, CLI)

    if not torch.cuda.is_available():
        return frozenset()
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    device = torch.device(device)
    if device.type != "cuda" or torch.cuda.get_device_capability(device) < (9, 0):
        return frozenset()
    if getattr(torch.version, "hip", None):
        return frozenset()
    return triton_features()


def triton_features() -> frozenset[str]:
    """Hopper tunables the installed Triton can express (whatever the device)."""
    import triton
    import triton.language as tl

    found = set()
    if hasattr(tl, "make_tensor_descriptor") and hasattr(triton, "set_allocator"):
        found.add("tma")
    # warp_specialize is not offered: on an H200 with Triton 3.6.0 (2026-11-21) our kernel with
    # tl.range(..., warp_specialize=True) failed to compile (NVGPUWarpSpecialization pass) at
    # BLOCK_M=64 / 4 warps, and with TMA loads it returned NaN at BLOCK_M=64 (Nq < Nk, bnhd).
    # A variant that can silently compute garbage stays out of the space until a Triton
    # version is checked again (the tunable remains, pinned to False by the feature check).
    return frozenset(found)


def default_config(op: str | AttentionOp, problem: AttentionProblem, sm_count: int = 132) -> Config:
    """A heuristic config that runs this problem well enough without tuning.

    No Hopper tunables here: they are left to the tuner, which checks them on the device.
    """
    op = OPS[op] if isinstance(op, str) else op
    bd = block_d(problem.head_dim)
    if bd <= 64:
        bm, bn, warps, stages = 128, 64, 4, 3
    elif bd <= 128:
        # Key tiles of 128: 2-4% faster than 64 on an H100 at N 4096-16384 (2026-11-21).
        bm, bn, warps, stages = 128, 128, 8, 3
    else:
        # Head dim 256: 487 TFLOP/s vs 395 for 64 x 32 tiles with 4 warps (H100, fp16,
        # 2 x 16 x 4096, sixth session).
        bm, bn, warps, stages = 128, 64, 8, 2
    bm = min(bm, max(16, _next_pow2(problem.nq)))
    bn = min(bn, max(16, _next_pow2(problem.nk)))
    # Fill the GPU: smaller query tiles when there are too few (head, tile) work items.
    bh = max(1, problem.batch * problem.heads)
    while bm > 64 and bh * -(-problem.nq // bm) < sm_count:
        bm //= 2
    warps = max(1, min(warps, bm // 16))
    raw = dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages, exp2=True,
               pv_acc="fp32", persistent=False, tma=False, warp_specialize=False)
    while resource_misfit(raw, problem.head_dim) and raw["num_stages"] > 1:
        raw["num_stages"] -= 1
    while resource_misfit(raw, problem.head_dim) and raw["BLOCK_N"] > 16:
        raw["BLOCK_N"] //= 2
    return op.space.validate(raw)


def fitting_configs(op: str | AttentionOp, problem: AttentionProblem,
                    features: frozenset[str] | None = None) -> Iterator[Config]:
    """EXHAUSTIVE set for one problem: every config of the space that can run it here.

    ``features``: the Hopper tunables to offer (default: what ``hopper_features()`` finds on
    the current device; empty on CPU and before Hopper).
    """
    op = OPS[op] if isinstance(op, str) else op
    if features is None:
        features = hopper_features()
    max_m = max(16, _next_pow2(problem.nq))
    max_n = max(16, _next_pow2(problem.nk))
    for config in op.space.exhaustive():
        if config["BLOCK_M"] > max_m or config["BLOCK_N"] > max_n:
            continue  # a tile larger than the sequence only adds masked rows
        if any(config[name] and name not in features for name in HOPPER_FEATURES):
            continue
        if problem_misfit(config, problem) is not None:
            continue
        yield config
