"""Fast kernel launches: skip Triton's per-call ``JITFunction.run`` once a kernel is compiled.

``kernel[grid](*args, **kwargs)`` costs about 6 us of Python in ``JITFunction.run`` on every call
(argument specialization, cache-key hashing, knob reads, launch metadata) before Triton's
launcher runs, more than half of flashtune's per-call budget. ``accelerate(launch)`` returns a
copy of a generated module's ``launch`` function whose ``@triton.jit`` kernels are replaced by
``FastKernel`` stand-ins (in a copy of the module's globals: the module itself is untouched, no
template change). A ``FastKernel``:

1. checks the call against the guards of the kernels it captured (``make_guard``): same
   device, argument types, dtypes, 16-byte alignment of every pointer, int values and keyword
   arguments (constexprs and options such as num_warps). That is at least as strict as every
   property Triton specializes a compilation on, so a guard never admits a call that Triton
   would give another kernel;
2. when no guard admits it, launches normally (``kernel[grid](...)``, which compiles if needed
   and returns the ``CompiledKernel``) and keeps that kernel's launcher, function handle and
   packed metadata under a new guard;
3. when a guard admits it, calls the launcher directly with exactly the arguments
   ``JITFunction.run`` passes: ``run(grid_0, grid_1, grid_2, stream, function,
   packed_metadata, launch_metadata, enter_hook, exit_hook, *all_params_in_order)``, with
   ``None`` for the metadata and hooks (what Triton's launchers accept when no launch hook is
   installed: they call a hook only when it is not None).

The normal launch is used whenever the fast one could differ: a launch hook (profiler) is
installed, the kernel has pre-run hooks or reads globals Triton re-checks each launch, the grid
is not a tuple, an argument has a type no guard handles, or no guard admits the call. Enabled
only where the installed Triton matches what this module was written against (``support()``:
a CUDA target, not the interpreter, Triton 3.x from 3.3 on, and ``JITFunction.run`` still
launching through the call above). A failure inside the fast path falls back to the normal
launch and turns the fast path off for the process, with one warning.

The copied launch function also sees ``triton.cdiv`` without its ``constexpr_function`` wrapper
when called on two ints (same function, same result; see ``_HostTriton``).

Not seen after a kernel's capture: Triton knobs that only change compilation (e.g.
``knobs.runtime.debug`` set at run time) and a switch of ``driver.active``; call
``flashtune.dispatch.reset()`` after changing them (new plans, new stand-ins).
``FLASHTUNE_FAST_LAUNCH=0`` (or false/no/off) turns the fast path off for plans built
afterwards.
"""

from __future__ import annotations

import dis
import functools
import inspect
import re
import sys
import types
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable

import torch

from ..gen.notices import DispatchWarning
from ..once import warn_at_user
from .settings import as_set, env_flag

ENV_SWITCH = "FLASHTUNE_FAST_LAUNCH"
MIN_VERSION = (3, 3)  # knobs.runtime hooks and "*bound_args.values()" launches start here

# JITFunction.run must still launch like this (whitespace removed) for the fast path to copy it.
_RUN_NEEDLES = (
    "device=driver.active.get_current_device()",
    "stream=driver.active.get_current_stream(device)",
    "kernel.run(grid_0,grid_1,grid_2,stream,kernel.function,kernel.packed_metadata,launch_metadata,"
    "knobs.runtime.launch_enter_hook,knobs.runtime.launch_exit_hook,*bound_args.values())",
    "returnkernel",
)
_Tensor = torch.Tensor
# JITFunction attributes the stand-in reads (present in every 3.x from MIN_VERSION on).
_JIT_FIELDS = ("pre_run_hooks", "used_global_vals", "arg_names", "params")


class FastLaunchWarning(DispatchWarning):
    """The fast launch path failed once and was turned off; kernels launch the normal way."""


@dataclass(frozen=True)
class Support:
    """What the fast path binds from the installed Triton, once."""
    jit_cls: type                      # triton.runtime.jit.JITFunction
    compiled_cls: type                 # triton.compiler.compiler.CompiledKernel
    get_device: Callable[[], int]      # driver.active.get_current_device
    get_stream: Callable[[int], int]   # driver.active.get_current_stream
    knobs: Any                         # the triton.knobs module (hooks are read per call)
    hook_chain_cls: type | None        # knobs.HookChain where hooks are chains, else None
    version: str


class _State:
    failed: str | None = None   # the first failure's description; the fast path is off
    support: Support | None = None
    reason: str = "not checked yet"
    checked: bool = False


_STATE = _State()


# -- detection --------------------------------------------------------------------------------
def parse_version(text: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def run_source_matches(source: str) -> bool:
    """Does this JITFunction.run source launch the way the fast path reproduces?"""
    flat = "".join(source.split())
    return all(needle in flat for needle in _RUN_NEEDLES)


def _detect() -> tuple[Support | None, str]:
    try:
        import triton
        from triton import knobs
        from triton.compiler.compiler import CompiledKernel
        from triton.runtime import jit as jit_mod
        from triton.runtime.driver import driver
    except Exception as err:  # an older or a reorganized Triton
        return None, f"Triton internals not found ({type(err).__name__}: {err})"
    version = getattr(triton, "__version__", "?")
    parsed = parse_version(version)
    if parsed is None or parsed[0] != 3 or parsed < MIN_VERSION:
        return None, f"Triton {version} is not a 3.x release from {MIN_VERSION[0]}.{MIN_VERSION[1]} on"
    from ..gen.loader import interpreter_mode

    if interpreter_mode():
        return None, "TRITON_INTERPRET=1 (the interpreter has no compiled kernels)"
    jit_cls = getattr(jit_mod, "JITFunction", None)
    try:
        source = inspect.getsource(jit_cls.run)
    except Exception as err:
        return None, f"cannot read JITFunction.run ({type(err).__name__})"
    if not run_source_matches(source):
        return None, f"Triton {version}: JITFunction.run launches differently than expected"
    if not (isinstance(inspect.getattr_static(CompiledKernel, "run", None), property)
            and callable(getattr(CompiledKernel, "launch_metadata", None))):
        return None, f"Triton {version}: CompiledKernel has no run property / launch_metadata"
    runtime = getattr(knobs, "runtime", None)
    if runtime is None or not all(hasattr(runtime, h) for h in ("launch_enter_hook", "launch_exit_hook")):
        return None, f"Triton {version}: knobs.runtime has no launch hooks"
    try:
        active = driver.active
        backend = active.get_current_target().backend
        get_device, get_stream = active.get_current_device, active.get_current_stream
    except Exception as err:
        return None, f"no active Triton driver ({type(err).__name__}: {err})"
    if backend != "cuda":  # other backends specialize pointers on more than alignment
        return None, f"Triton backend {backend!r} (the fast path is written for 'cuda')"
    raw_get_device = getattr(torch._C, "_cuda_getDevice", None)
    if get_device is torch.cuda.current_device and raw_get_device is not None \
            and torch.cuda.is_initialized():
        # torch.cuda.current_device() is _lazy_init() (done: CUDA is initialized) plus this call.
        get_device = raw_get_device
    chain = getattr(knobs, "HookChain", None)
    default_hook = runtime.launch_enter_hook
    if chain is None and isinstance(getattr(default_hook, "calls", None), list):
        chain = type(default_hook)  # hooks are chains of callables, defined elsewhere
    return Support(jit_cls=jit_cls, compiled_cls=CompiledKernel, get_device=get_device,
                   get_stream=get_stream, knobs=knobs, hook_chain_cls=chain,
                   version=version), "enabled"


def support() -> Support | None:
    """The bound Triton internals, or None where the fast path must not run (see status())."""
    if not _STATE.checked:
        try:
            _STATE.support, _STATE.reason = _detect()
        except Exception as err:  # detection itself must never break a launch
            _STATE.support, _STATE.reason = None, f"detection failed ({type(err).__name__}: {err})"
        _STATE.checked = True
    return _STATE.support


def _switched_off() -> bool:
    return not env_flag(ENV_SWITCH, default=True)


def status() -> str:
    """One line: whether fast launches are on, and why not if they are off."""
    if _switched_off():
        return f"off ({as_set(ENV_SWITCH)})"
    support()
    if _STATE.failed:
        return f"off after a failure: {_STATE.failed}"
    if _STATE.support is None:
        return f"off: {_STATE.reason}"
    return f"on (Triton {_STATE.support.version})"


def _reset_for_tests(support_obj: Support | None = None, reason: str = "test") -> None:
    _STATE.failed = None
    _STATE.support = support_obj
    _STATE.reason = reason
    _STATE.checked = support_obj is not None


def _fail(err: BaseException, where: str) -> None:
    if _STATE.failed is None:
        _STATE.failed = f"{where}: {type(err).__name__}: {err}"
        warn_at_user(f"flashtune: the fast kernel launch failed ({_STATE.failed}); launching "
                     "through Triton's normal path from now on", FastLaunchWarning)


# -- guards -----------------------------------------------------------------------------------
_NOT_CAPTURABLE = object()  # an entry whose kernel must always launch the normal way
_KW_TYPES = (int, float, bool, str, type(None))  # keyword values a guard compares
MAX_ENTRIES = 8   # per stand-in: a plan's launches differ only in pointer alignment
MAX_MISSES = 64   # captures after which a stand-in that keeps missing stops trying


def make_guard(device: int, args: tuple, kwargs: dict) -> Callable | None:
    """A predicate ``guard(device, args, kwargs)``: may this call reuse the kernel this one ran?

    True only for the same device and a call with the same argument types (torch.Tensor, int,
    float, bool, None; keyword values int, float, bool, str, None), the same dtypes, the same
    16-byte alignment of every tensor's data_ptr(), the same int, bool and keyword values, and
    the same keyword names. That is at least as strict as everything Triton specializes a
    compilation on: pointer and int divisibility by 16, int == 1, int width (exact values are
    stricter; a plan's ints are fixed, so this costs no compilations), dtypes, constexpr values
    and options such as num_warps (floats go to kernels as fp32, never specialized on value).
    None when an argument is outside these types: such calls always launch the normal way.

    Generated code: one short-circuit expression over the arguments, no key tuple to build and
    hash (a generic loop over the arguments costs about 1 us per call).
    """
    env: dict[str, Any] = {"_T": _Tensor, "_DEV": device, "_MISSING": object()}
    conds = []
    for i, a in enumerate(args):
        t = type(a)
        if t is _Tensor:
            env[f"_D{i}"] = a.dtype
            aligned = not a.data_ptr() & 15
            conds += [f"type(a{i}) is _T", f"a{i}.dtype is _D{i}",
                      f"{'not ' if aligned else ''}(a{i}.data_ptr() & 15)"]
        elif t is int:  # identity first: small ints and code constants are shared objects
            env[f"_V{i}"] = a
            conds.append(f"(a{i} is _V{i} or (type(a{i}) is int and a{i} == _V{i}))")
        elif t is bool or a is None:
            env[f"_V{i}"] = a
            conds.append(f"a{i} is _V{i}")
        elif t is float:
            conds.append(f"type(a{i}) is float")
        else:
            return None
    for j, (name, v) in enumerate(kwargs.items()):
        t = type(v)
        if t not in _KW_TYPES:
            return None
        env[f"_KT{j}"], env[f"_KV{j}"] = t, v
        get = f"kw.get({name!r}, _MISSING)"
        # A call site passes the same constant objects each time: identity admits at once.
        conds.append(f"{get} is _KV{j}" if t is bool or v is None else
                     f"((k{j} := {get}) is _KV{j} or (type(k{j}) is _KT{j} and k{j} == _KV{j}))")
    lines = ["def guard(device, args, kw):",
             f"    if len(args) != {len(args)} or len(kw) != {len(kwargs)} or device != _DEV:",
             "        return False"]
    if args:
        lines.append("    " + "".join(f"a{i}, " for i in range(len(args))) + "= args")
    lines.append(f"    return {' and '.join(conds) if conds else 'True'}")
    # The source holds only argument indices, builtin names and repr()'d keyword names; the
    # values it compares with live in env.
    exec("\n".join(lines), env)
    return env["guard"]


def _tail_getter(names: tuple, kwargs: dict, params: list) -> Callable[[dict], tuple] | None:
    """Values of the parameters not passed positionally, in signature order, from kwargs."""
    if all(n in kwargs for n in names):
        if not names:
            return lambda kw: ()
        if len(names) == 1:
            name = names[0]
            return lambda kw: (kw[name],)
        return itemgetter(*names)
    defaults = []
    for name, p in zip(names, params):
        default = getattr(p, "default", inspect.Parameter.empty)
        if name not in kwargs and default is inspect.Parameter.empty:
            return None
        defaults.append((name, default))
    return lambda kw: tuple(kw[n] if n in kw else d for n, d in defaults)


# -- the kernel stand-in ----------------------------------------------------------------------
class FastKernel:
    """Stands in for one ``@triton.jit`` kernel: ``fk[grid](*args, **kwargs)`` like Triton."""

    __slots__ = ("fn", "sup", "entries", "fast_calls", "normal_calls", "misses", "gave_up")

    def __init__(self, fn, sup: Support):
        self.fn = fn
        self.sup = sup
        # ((guard, (run, function, packed_metadata, tail, kernel) | _NOT_CAPTURABLE), ...);
        # a tuple, replaced whole, so a concurrent launch iterates a consistent one.
        self.entries: tuple = ()
        self.fast_calls = 0     # launches that skipped JITFunction.run (tests, benchmarks)
        self.normal_calls = 0
        self.misses = 0
        self.gave_up = False    # kept missing (ever-new ints?): always the normal launch

    def __getattr__(self, name):  # anything else (warmup, cache_key, ...) is the kernel's
        return getattr(self.fn, name)

    def __getitem__(self, grid):
        return functools.partial(self._launch, grid)

    def _normal(self, grid, args, kwargs):
        self.normal_calls += 1
        return self.fn[grid](*args, **kwargs)

    def _launch(self, grid, *args, **kwargs):
        sup = self.sup
        try:
            runtime = sup.knobs.runtime
            enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
            chain = sup.hook_chain_cls
            if (_STATE.failed is not None or self.gave_up or self.fn.pre_run_hooks
                    or type(grid) is not tuple or not 0 < len(grid) < 4
                    # a launch hook (a profiler) wants Triton's launch metadata: normal path
                    or (enter is not None and (type(enter) is not chain or enter.calls))
                    or (leave is not None and (type(leave) is not chain or leave.calls))):
                hit = _NOT_CAPTURABLE
            else:
                device = sup.get_device()
                for guard, hit in self.entries:
                    if guard(device, args, kwargs):
                        break
                else:
                    hit = None
        except Exception as err:
            _fail(err, "matching the call")
            hit = _NOT_CAPTURABLE
        if hit is None:
            return self._capture(device, grid, args, kwargs)
        if hit is _NOT_CAPTURABLE:
            return self._normal(grid, args, kwargs)
        run, function, metadata, tail, kernel = hit
        n = len(grid)
        try:
            run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, sup.get_stream(device),
                function, metadata, None, None, None, *args, *tail(kwargs))
        except Exception as err:
            # Triton's launchers raise before the kernel runs (argument parsing, pointer checks)
            # or on a CUDA error of the launch itself (we pass no exit hook), so launching again
            # the normal way does not run it twice; it also re-raises a genuine error (e.g. an
            # earlier illegal memory access) to the caller.
            _fail(err, "launching")
            return self._normal(grid, args, kwargs)
        self.fast_calls += 1
        return kernel

    def _capture(self, device, grid, args, kwargs):
        kernel = self._normal(grid, args, kwargs)  # compiles if needed; errors are the user's
        try:
            guard = make_guard(device, args, kwargs)
            entry = self._entry(kernel, device, args, kwargs) if guard is not None else None
        except Exception as err:
            _fail(err, "capturing the compiled kernel")
            return kernel
        self.misses += 1
        if self.misses > MAX_MISSES and self.misses > self.fast_calls:
            self.gave_up = True
        if entry is not None:
            entries = self.entries if len(self.entries) < MAX_ENTRIES else ()
            self.entries = entries + ((guard, entry),)
        return kernel

    def _entry(self, kernel, device, args, kwargs):
        """What a hit needs, or None to try again next time (e.g. an async-compile future)."""
        if type(kernel) is not self.sup.compiled_cls or getattr(kernel, "function", None) is None:
            return None
        if self.sup.get_device() != device:  # the launch switched devices: do not guess
            return None
        fn = self.fn
        if fn.used_global_vals:  # Triton re-checks these globals on every launch: keep its path
            return _NOT_CAPTURABLE
        names = tuple(fn.arg_names)
        if len(args) > len(names) or any(n in kwargs for n in names[:len(args)]):
            return None
        tail = _tail_getter(names[len(args):], kwargs, fn.params[len(args):])
        if tail is None:
            return None
        run = kernel.run  # the launcher (the normal launch has built it)
        return (run, kernel.function, kernel.packed_metadata, tail, kernel)


class _HostTriton:
    """``triton`` as a fast launch function sees it: ``triton.cdiv`` on two ints calls the plain
    function inside Triton's ``constexpr_function`` wrapper (the wrapper costs about 2 us per
    host call in Triton 3.9: it imports and unwraps its arguments); the rest is Triton's own."""

    def __init__(self, module, raw_cdiv):
        self._module = module
        wrapped = module.cdiv

        def cdiv(x, y):
            if type(x) is int and type(y) is int:
                return raw_cdiv(x, y)
            return wrapped(x, y)
        self.cdiv = cdiv

    def __getattr__(self, name):
        return getattr(self._module, name)


def host_triton(module):
    """A _HostTriton for ``module`` where its cdiv wraps a plain function, else None."""
    cdiv = getattr(module, "cdiv", None)
    raw = getattr(cdiv, "fn", None)
    if (isinstance(raw, types.FunctionType) and not isinstance(cdiv, types.FunctionType)
            and raw(7, 2) == 4 and raw(8, 2) == 4 and raw(0, 3) == 0):
        return _HostTriton(module, raw)
    return None


# -- launch functions -------------------------------------------------------------------------
def _writes_globals(fn: types.FunctionType) -> bool:
    """A launch that assigns module globals must keep the module's own dict."""
    def codes(code):
        yield code
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from codes(const)
    return any(ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")
               for code in codes(fn.__code__) for ins in dis.get_instructions(code))


def _global_names(code: types.CodeType) -> set[str]:
    """Names a function's code (nested code included) may load as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def accelerate(launch: Callable, sup: Support | None = None) -> Callable:
    """``launch`` with its module's @triton.jit kernels launched through FastKernel.

    Returns ``launch`` itself where the fast path does not apply (switched off, unsupported
    Triton, the interpreter, no kernels in its globals, a launch that writes globals).
    The result has ``fast_kernels`` (the stand-ins, for tests and benchmarks).
    """
    if _switched_off() or _STATE.failed is not None:
        return launch
    if sup is None:
        sup = support()
    if sup is None or not isinstance(launch, types.FunctionType) or _writes_globals(launch):
        return launch
    namespace = dict(launch.__globals__)
    stand_ins = []
    used = _global_names(launch.__code__)  # not the @triton.jit helpers kernels call
    for name, obj in namespace.items():
        if name in used and type(obj) is sup.jit_cls and all(hasattr(obj, a) for a in _JIT_FIELDS):
            namespace[name] = FastKernel(obj, sup)
            stand_ins.append(namespace[name])
    if not stand_ins:
        return launch
    triton_mod = sys.modules.get("triton")
    if triton_mod is not None and namespace.get("triton") is triton_mod:
        shim = host_triton(triton_mod)
        if shim is not None:
            namespace["triton"] = shim
    fast = types.FunctionType(launch.__code__, namespace, launch.__name__, launch.__defaults__,
                              launch.__closure__)
    fast.__kwdefaults__ = launch.__kwdefaults__
    fast.__doc__ = launch.__doc__
    fast.__qualname__ = launch.__qualname__
    fast.__module__ = launch.__module__
    fast.fast_kernels = tuple(stand_ins)
    return fast
