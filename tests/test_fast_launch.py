"""The fast launch path (flashtune.dispatch.fast_launch).

CPU tests drive ``FastKernel`` with a fake Triton (a JIT function that specializes like
Triton 3.x and launchers that record their arguments): the key must never let one key stand for
two compiled kernels, hits must pass the launcher what JITFunction.run passes, and every reason
to fall back must reach the normal launch. GPU tests (``-m gpu``) run flashtune.softmax through
the real fast path and check its captured kernels against Triton's own choice.
"""

from __future__ import annotations

import inspect
import itertools
import random
import types
import warnings

import pytest
import torch

import flashtune
from flashtune.dispatch import fast_launch as fl

HAS_CUDA = torch.cuda.is_available()


# -- a fake Triton ----------------------------------------------------------------------------
def triton_arg_spec(a):
    """Triton 3.x's specialization of one non-constexpr argument (type, attribute)."""
    if a is None:
        return ("constexpr", None)
    if isinstance(a, bool):
        return ("u1", None)
    if isinstance(a, int):
        if a == 1:
            return ("constexpr", 1)
        d = "D" if a % 16 == 0 else ""
        if -2**31 <= a <= 2**31 - 1:
            return ("i32", d)
        return ("u64", d) if 2**63 <= a <= 2**64 - 1 else ("i64", d)
    if isinstance(a, float):
        return ("fp32", None)
    if isinstance(a, torch.Tensor):
        return (str(a.dtype), "D" if a.data_ptr() % 16 == 0 else "")
    if isinstance(a, tuple):
        return tuple(triton_arg_spec(v) for v in a)
    raise TypeError(type(a))


class FakeParam:
    def __init__(self, name, constexpr=False, default=inspect.Parameter.empty):
        self.name, self.is_constexpr, self.default = name, constexpr, default


class FakeCompiled:
    def __init__(self, spec):
        self.spec = spec
        self.function = object()
        self.packed_metadata = (4, 1, 0)
        self.calls = []

    @property
    def run(self):
        return self._launch

    def _launch(self, *call):
        self.calls.append(call)


class FakeJIT:
    """Binds arguments, specializes them the way Triton does and keeps one kernel per key."""

    def __init__(self, params):
        self.params = params
        self.arg_names = [p.name for p in params]
        self.pre_run_hooks = []
        self.used_global_vals = {}
        self.cache = {}
        self.normal_launches = 0

    def bind(self, args, kwargs):
        full = list(args)
        for p in self.params[len(args):]:
            full.append(kwargs[p.name] if p.name in kwargs else p.default)
        return full

    def choose(self, args, kwargs, device=0):
        full = self.bind(args, kwargs)
        spec = tuple(("constexpr", repr(v)) if p.is_constexpr else triton_arg_spec(v)
                     for p, v in zip(self.params, full))
        options = tuple((k, repr(v)) for k, v in sorted(kwargs.items()) if k not in self.arg_names)
        key = (device, spec, options)
        return self.cache.setdefault(key, FakeCompiled(key)), full

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            kernel, full = self.choose(args, kwargs)
            self.normal_launches += 1
            n = len(grid)
            kernel.run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, STREAM,
                       kernel.function, kernel.packed_metadata, None, None, None, *full)
            return kernel
        return run


class HookChain:
    def __init__(self):
        self.calls = []


STREAM = 7777


def make_support(device=0):
    knobs = types.SimpleNamespace(runtime=types.SimpleNamespace(
        launch_enter_hook=HookChain(), launch_exit_hook=HookChain()))
    return fl.Support(jit_cls=FakeJIT, compiled_cls=FakeCompiled, get_device=lambda: device,
                      get_stream=lambda d: STREAM, knobs=knobs, hook_chain_cls=HookChain,
                      version="3.6.0")


ROW_PARAMS = [FakeParam(n) for n in ("x_ptr", "y_ptr", "n_rows", "n_cols", "sx", "sy")] + \
    [FakeParam("BLOCK", True), FakeParam("ROWS", True)]


@pytest.fixture(autouse=True)
def clean_state():
    fl._reset_for_tests(None)
    yield
    fl._reset_for_tests(None, reason="not checked yet")
    fl._STATE.checked = False


def row_call(fk, x, y, block=128, rows=4, grid=None, **extra):
    n_rows, n_cols = x.shape
    grid = ((n_rows + rows - 1) // rows,) if grid is None else grid
    return fk[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0), BLOCK=block, ROWS=rows,
                    num_warps=4, num_stages=1, **extra)


def offset_view(rows, cols, offset, dtype=torch.float16):
    """A (rows, cols) view starting ``offset`` elements into a fresh buffer."""
    base = torch.zeros(rows * cols + offset, dtype=dtype)
    return base[offset:].view(rows, cols)


# -- guards -----------------------------------------------------------------------------------
def same(call_a, call_b, dev_a=0, dev_b=0):
    """Does the guard made from call_a admit call_b? (a call: (args, kwargs))"""
    guard = fl.make_guard(dev_a, *call_a)
    assert guard is not None and guard(dev_a, *call_a), "a guard admits its own call"
    return guard(dev_b, *call_b)


def c(*args, **kwargs):
    return args, kwargs


def test_guard_separates_what_triton_specializes_on():
    x = torch.zeros(64, dtype=torch.float16)
    assert same(c(x), c(torch.zeros(64, dtype=torch.float16)))     # both 16-byte aligned
    assert not same(c(x), c(x[1:])) and not same(c(x[1:]), c(x))   # 2-byte offset
    assert same(c(x[1:]), c(x[3:]))                                 # both misaligned
    assert same(c(x[8:]), c(x))                                     # 16 bytes in: aligned again
    assert not same(c(x), c(x.float()))                             # dtype
    assert not same(c(1), c(2)) and not same(c(16), c(32))          # exact int values
    for a, b in [(True, 1), (1, True), (1.0, 1), (1, 1.0), (False, 0), (None, 0), (0, None),
                 (x, 0), (0, x)]:
        assert not same(c(a), c(b)), (a, b)                          # equal values, other types
    assert same(c(2.5), c(3.5))                                     # floats: not specialized
    assert not same(c(x, 5), c(5, x))
    assert not same(c(BLOCK=1), c(BLOCK=True)) and not same(c(BLOCK=64), c(ROWS=64))
    assert not same(c(BLOCK=64, ROWS=4), c(ROWS=64, BLOCK=4))
    assert same(c(BLOCK=64, ROWS=4), c(ROWS=4, BLOCK=64))            # keyword order is no matter
    assert not same(c(A=1, B=2), c(A=1)) and not same(c(A=1), c(A=1, B=2))
    assert not same(c(A=None), c(A=0)) and not same(c(A="x"), c(A="y"))
    assert not same(c(x, 1, 2), c(x, 1, 2, 3)) and not same(c(x, 1, 2), c(x, 1))
    assert not same(c(0, 0), c(0, 0), dev_b=1)
    assert same(c(), c()) and not same(c(), c(1))


def test_guard_refuses_types_outside_it():
    assert fl.make_guard(0, ("text",), {}) is None
    assert fl.make_guard(0, ((1, 2),), {}) is None
    assert fl.make_guard(0, (torch.nn.Parameter(torch.zeros(2)),), {}) is None  # a subclass
    assert fl.make_guard(0, (1,), {"BLOCK": [1]}) is None
    guard = fl.make_guard(0, (torch.zeros(4), 3), {"BLOCK": 16})
    for args, kw in [((torch.nn.Parameter(torch.zeros(4)), 3), {"BLOCK": 16}),
                     ((torch.zeros(4), 3), {"BLOCK": torch.tensor(16)}),
                     ((torch.zeros(4), torch.tensor(3)), {"BLOCK": 16})]:
        assert guard(0, args, kw) is False    # never raises, never admits


def test_guard_is_never_looser_than_triton_specialization():
    """Random argument lists: every call a guard admits has its capture's Triton specialization."""
    rnd = random.Random(0)
    buf = torch.zeros(4096, dtype=torch.float16)
    values = [0, 1, 2, 15, 16, 17, 32, 2**31 - 16, 2**31, 2**40, 2**63, -16, -1, True, False, 0.5,
              1.0, None]
    guards = []
    admitted = 0
    for _ in range(3000):
        args = []
        for _ in range(rnd.randint(1, 3)):
            if rnd.random() < 0.4:
                dtype = rnd.choice([torch.float16, torch.float32])
                args.append(buf.to(dtype)[rnd.randint(0, 40):])
            else:
                args.append(rnd.choice(values))
        args = tuple(args)
        spec = tuple(triton_arg_spec(a) for a in args)
        for guard, captured in guards:
            if guard(0, args, {}):
                assert captured == spec, args
                admitted += 1
                break
        else:
            guards.append((fl.make_guard(0, args, {}), spec))
    assert admitted > 1000 and len(guards) > 100


def test_model_of_triton_matches_installed_native_specializer():
    """The fake's per-argument rules are the installed Triton's (checked where it has them)."""
    try:
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.compiler import BaseBackend
    except ImportError:
        pytest.skip("this Triton has no native specializer")
    buf = torch.zeros(64, dtype=torch.float16)
    for a in [0, 1, 2, 16, 17, -16, 2**31 - 1, 2**31, 2**40, True, 1.5, buf, buf[1:], buf[8:]]:
        native = native_specialize_impl(BaseBackend, a, False, True, True)
        model = triton_arg_spec(a)
        if isinstance(a, torch.Tensor):
            assert native[1] == model[1]
        else:
            assert (native[0], native[1]) == model, a


# -- hits and misses --------------------------------------------------------------------------
def test_second_call_skips_triton_and_passes_the_same_launch_arguments():
    fake = FakeJIT(ROW_PARAMS)
    fk = fl.FastKernel(fake, make_support())
    x, y = torch.randn(8, 100).half(), torch.empty(8, 100).half()
    k1 = row_call(fk, x, y)
    k2 = row_call(fk, x, y)
    assert k1 is k2
    assert (fake.normal_launches, fk.fast_calls) == (1, 1)
    normal_call, fast_call = k1.calls
    assert fast_call == normal_call
    assert fast_call[:9] == (2, 1, 1, STREAM, k1.function, k1.packed_metadata, None, None, None)
    assert fast_call[9:] == (x, y, 8, 100, 100, 100, 128, 4)  # constexprs too, in order


def test_new_alignment_or_sizes_launch_normally_once_then_fast():
    fake = FakeJIT(ROW_PARAMS)
    fk = fl.FastKernel(fake, make_support())
    cases = [(offset_view(8, 64, 0), offset_view(8, 64, 0)),
             (offset_view(8, 64, 1), offset_view(8, 64, 0)),     # x misaligned
             (offset_view(8, 64, 0), offset_view(8, 64, 3)),     # y misaligned
             (offset_view(1, 64, 0), offset_view(1, 64, 0)),     # n_rows == 1 (a constexpr)
             (offset_view(8, 50, 0), offset_view(8, 50, 0))]     # n_cols % 16 != 0
    for x, y in cases:
        for _ in range(3):
            got = row_call(fk, x, y)
            want, _ = fake.choose((x, y, *x.shape, x.stride(0), y.stride(0)),
                                  dict(BLOCK=128, ROWS=4, num_warps=4, num_stages=1))
            assert got is want
    assert fake.normal_launches == len(cases)
    assert fk.fast_calls == 2 * len(cases)
    assert len({id(k) for k in fake.cache.values()}) == len(cases)


def test_keyword_values_and_options_choose_the_kernel():
    fake = FakeJIT(ROW_PARAMS)
    fk = fl.FastKernel(fake, make_support())
    x, y = torch.randn(4, 64).half(), torch.empty(4, 64).half()
    for block in (64, 128, 64, 128):
        assert row_call(fk, x, y, block=block).spec[1][6] == ("constexpr", repr(block))
    row_call(fk, x, y, grid=(4, 2, 3))
    assert len(fk.entries) == 2 and fake.normal_launches == 2
    assert row_call(fk, x, y, grid=(4, 2, 3)).calls[-1][:3] == (4, 2, 3)


def test_defaults_fill_parameters_not_passed():
    params = [FakeParam("x_ptr"), FakeParam("n"), FakeParam("BLOCK", True, default=32)]
    fake = FakeJIT(params)
    fk = fl.FastKernel(fake, make_support())
    x = torch.zeros(16)
    fk[(1,)](x, 16, num_warps=2)
    kernel = fk[(1,)](x, 16, num_warps=2)
    assert fk.fast_calls == 1 and kernel.calls[-1][9:] == (x, 16, 32)


@pytest.mark.parametrize("why", ["enter_hook", "exit_callable", "pre_run", "globals", "grid_list",
                                 "grid_empty", "odd_arg"])
def test_falls_back_to_the_normal_launch(why):
    sup = make_support()
    fake = FakeJIT(ROW_PARAMS)
    fk = fl.FastKernel(fake, sup)
    x, y = torch.randn(4, 64).half(), torch.empty(4, 64).half()
    grid = None
    if why == "enter_hook":
        sup.knobs.runtime.launch_enter_hook.calls.append(lambda md: None)
    elif why == "exit_callable":
        sup.knobs.runtime.launch_exit_hook = lambda md: None
    elif why == "pre_run":
        fake.pre_run_hooks.append(lambda *a, **k: None)
    elif why == "globals":
        fake.used_global_vals = {("G", 0): (1, {})}
    elif why == "grid_list":
        grid = [1]
    for _ in range(3):
        if why == "grid_empty":
            with pytest.raises(IndexError):  # Triton's own error, not a fast-path failure
                row_call(fk, x, y, grid=())
        elif why == "odd_arg":
            fk[(1,)](x, y, 4, 64, 64, 64, BLOCK=64, ROWS="four")  # a str constexpr value
            fk[(1,)](x, y, (4,), 64, 64, 64, BLOCK=64, ROWS=4)  # a tuple argument
        else:
            row_call(fk, x, y, grid=grid)
    assert fk.fast_calls == 0 if why != "odd_arg" else fk.fast_calls == 2
    assert fl._STATE.failed is None


def test_a_failing_launcher_warns_once_and_turns_the_fast_path_off():
    fake = FakeJIT(ROW_PARAMS)
    fk = fl.FastKernel(fake, make_support())
    other = fl.FastKernel(FakeJIT(ROW_PARAMS), fk.sup)
    x, y = torch.randn(4, 64).half(), torch.empty(4, 64).half()
    kernel = row_call(fk, x, y)
    row_call(other, x, y)

    def broken(*call):
        raise ValueError("launcher changed")
    fk.entries = tuple((guard, (broken,) + entry[1:]) for guard, entry in fk.entries)
    with pytest.warns(fl.FastLaunchWarning, match="launcher changed"):
        assert row_call(fk, x, y) is kernel           # still launched, the normal way
    assert fake.normal_launches == 2 and len(kernel.calls) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # no second warning
        row_call(fk, x, y)
        row_call(other, x, y)
    assert other.fast_calls == 0 and "launcher changed" in fl.status()
    assert fl.accelerate(_launch_module()[1].launch, make_support()) is _launch_module()[1].launch


def test_a_failing_match_falls_back_without_crashing():
    sup = make_support()
    sup_bad = fl.Support(**{**sup.__dict__, "get_device": lambda: 1 / 0})
    fk = fl.FastKernel(FakeJIT(ROW_PARAMS), sup_bad)
    x, y = torch.randn(4, 64).half(), torch.empty(4, 64).half()
    with pytest.warns(fl.FastLaunchWarning, match="ZeroDivisionError"):
        row_call(fk, x, y)
    assert fk.normal_calls == 1


def test_entries_are_bounded_and_a_stand_in_that_keeps_missing_gives_up():
    fake = FakeJIT([FakeParam("x_ptr"), FakeParam("n")])
    fk = fl.FastKernel(fake, make_support())
    x = torch.zeros(4)
    for n in range(fl.MAX_MISSES + 5):        # ever-new ints: every call a miss
        fk[(1,)](x, n)
        assert len(fk.entries) <= fl.MAX_ENTRIES
    assert fk.gave_up and fk.fast_calls == 0
    misses = fk.misses
    fk[(1,)](x, 3)
    assert fk.misses == misses and fake.normal_launches == fl.MAX_MISSES + 6


def test_a_plan_like_stand_in_keeps_hitting():
    fake = FakeJIT(ROW_PARAMS)
    fk = fl.FastKernel(fake, make_support())
    for i in range(200):  # a plan: fixed sizes, fresh buffers of changing alignment
        x, y = offset_view(4, 64, i % 3), offset_view(4, 64, i % 5)
        row_call(fk, x, y)
    assert not fk.gave_up and fake.normal_launches == 4 and fk.fast_calls == 196


# -- accelerate() -----------------------------------------------------------------------------
_LAUNCH_SRC = '''
import math
kern = None
def launch(x, y):
    """docs"""
    kern[(math.ceil(x.shape[0] / 4),)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0),
                                       BLOCK=64, ROWS=4, num_warps=4, num_stages=1)
'''

_MODULE = []


def _launch_module(src=_LAUNCH_SRC):
    if src is _LAUNCH_SRC and _MODULE:
        return _MODULE[0]
    mod = types.ModuleType("fake_variant")
    exec(src, mod.__dict__)
    fake = FakeJIT(ROW_PARAMS)
    mod.kern = fake
    if src is _LAUNCH_SRC:
        _MODULE.append((fake, mod))
    return fake, mod


def test_accelerate_copies_the_launch_without_touching_the_module():
    fake, mod = _launch_module(_LAUNCH_SRC + "\n")
    fast = fl.accelerate(mod.launch, make_support())
    assert fast is not mod.launch and mod.kern is fake and mod.launch.__globals__["kern"] is fake
    assert fast.__doc__ == "docs" and len(fast.fast_kernels) == 1
    x, y = torch.randn(8, 64).half(), torch.empty(8, 64).half()
    for _ in range(3):
        fast(x, y)
    mod.launch(x, y)
    assert fast.fast_kernels[0].fast_calls == 2 and fake.normal_launches == 2


@pytest.mark.skipif(HAS_CUDA, reason="drives the interpreter's kernel class")
@pytest.mark.parametrize("cols,launches", [(100, 1), (20000, 2)])  # row; split (two phases)
def test_accelerate_runs_a_real_generated_launch(monkeypatch, cols, launches):
    """A real variant's launch, copied with stand-ins for the kernels it launches (the
    interpreter's kernels never compile, so every launch is a normal one), not for the
    @triton.jit helpers those kernels call: same results, the module untouched, cdiv shimmed."""
    import triton
    from flashtune.gen import load_variant
    from flashtune.gen.softmax_space import SoftmaxProblem, default_config

    cfg = default_config("softmax", SoftmaxProblem(6, cols, "float32"))
    module = load_variant("softmax", cfg)
    kernels = {n: k for n, k in vars(module).items() if type(k).__name__ == "InterpretedFunction"}
    sup = fl.Support(**{**make_support().__dict__, "jit_cls": type(next(iter(kernels.values())))})
    monkeypatch.setattr(fl, "_JIT_FIELDS", ("arg_names", "pre_run_hooks"))
    # Interpreted variants' launch runs the module's under a lock (flashtune.gen.loader).
    launch = module.launch.__wrapped__
    fast = fl.accelerate(launch, sup)
    launched = [n for n in kernels if n.startswith("_softmax_")]  # the kernel, not helpers
    assert len(launched) == 1 and (cols == 100 or len(kernels) > 1)
    assert [k.__name__ for k in fast.fast_kernels] == launched
    assert all(getattr(module, n) is k for n, k in kernels.items())
    assert launch.__globals__["triton"] is triton
    assert isinstance(fast.__globals__["triton"], fl._HostTriton)
    x = torch.randn(6, cols)
    y = torch.full_like(x, float("nan"))
    fast(x, y)
    torch.testing.assert_close(y, torch.softmax(x, -1))
    assert sum(k.normal_calls for k in fast.fast_kernels) == launches


def test_accelerate_leaves_alone_what_it_cannot_speed_up(monkeypatch):
    sup = make_support()
    fake, mod = _launch_module(_LAUNCH_SRC.replace('"""docs"""', 'global kern\n    kern = kern'))
    assert fl.accelerate(mod.launch, sup) is mod.launch          # writes a global
    fake, mod = _launch_module(_LAUNCH_SRC + "\n\n")
    mod.kern = object()
    assert fl.accelerate(mod.launch, sup) is mod.launch          # no JIT function in its globals
    fake, mod = _launch_module(_LAUNCH_SRC + "\n\n\n")
    monkeypatch.setenv(fl.ENV_SWITCH, "0")
    assert fl.accelerate(mod.launch, sup) is mod.launch          # switched off
    assert "FLASHTUNE_FAST_LAUNCH=0" in fl.status()


@pytest.mark.parametrize("value, on", [("0", False), ("false", False), (" OFF ", False),
                                       ("no", False), ("1", True), ("True", True), ("", True)])
def test_switch_reads_the_usual_boolean_spellings(monkeypatch, value, on):
    """Defect: only "0" turned the fast path off; FLASHTUNE_FAST_LAUNCH=false left it on.
    Blank counts as unset (the default, on), as for FLASHTUNE_DB."""
    sup = make_support()
    fake, mod = _launch_module(_LAUNCH_SRC + "\n\n\n\n")
    monkeypatch.setenv(fl.ENV_SWITCH, value)
    assert (fl.accelerate(mod.launch, sup) is not mod.launch) is on
    assert (f"off ({fl.ENV_SWITCH}={value.strip()})" in fl.status()) is not on


def test_switch_of_unknown_value_warns_once_and_keeps_the_default(monkeypatch):
    sup = make_support()
    fake, mod = _launch_module(_LAUNCH_SRC + "\n\n\n\n\n")
    monkeypatch.setenv(fl.ENV_SWITCH, "offf")
    with pytest.warns(fl.DispatchWarning, match="FLASHTUNE_FAST_LAUNCH='offf'.*ignored"):
        assert fl.accelerate(mod.launch, sup) is not mod.launch
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fl.accelerate(mod.launch, sup) is not mod.launch  # once per value


# -- detection --------------------------------------------------------------------------------
def test_installed_triton_run_source_matches_the_launch_we_reproduce():
    from triton.runtime.jit import JITFunction

    assert fl.run_source_matches(inspect.getsource(JITFunction.run))
    older = "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, " \
            "launch_metadata, self.CompiledKernel.launch_enter_hook, " \
            "self.CompiledKernel.launch_exit_hook, *non_constexpr_vals)"
    assert not fl.run_source_matches(inspect.getsource(JITFunction.run).replace(
        "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())",
        older.split("launch_metadata, ")[1]))


def test_host_triton_cdiv_is_tritons_on_ints_and_forwards_the_rest():
    import triton

    shim = fl.host_triton(triton)
    if shim is None:
        pytest.skip("this Triton's cdiv is a plain function")
    for a, b in [(0, 4), (1, 4), (4, 4), (5, 4), (1000, 7), (2**40 + 1, 16)]:
        assert shim.cdiv(a, b) == triton.cdiv(a, b) == -(-a // b)
    assert shim.cdiv(triton.language.constexpr(9), 4) == 3       # not an int: Triton's own
    assert shim.jit is triton.jit and shim.language is triton.language


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_detection_binds_the_installed_triton(monkeypatch, backend):
    """Detection end to end on this Triton, with a fake driver standing in for the GPU."""
    import triton
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.driver import driver

    class FakeDriver:
        def get_current_target(self):
            return types.SimpleNamespace(backend=backend)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device):
            return 0

    monkeypatch.setattr(driver, "_active", FakeDriver())
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    sup, reason = fl._detect()
    if backend != "cuda":
        assert sup is None and "hip" in reason
        return
    assert sup is not None, reason
    assert sup.jit_cls is triton.runtime.jit.JITFunction and sup.compiled_cls is CompiledKernel
    assert sup.get_stream(0) == 0 and sup.knobs is triton.knobs
    hook = triton.knobs.runtime.launch_enter_hook
    assert hook is None or type(hook) is sup.hook_chain_cls  # an idle default hook passes
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert fl._detect()[0] is None


def test_version_parsing():
    assert fl.parse_version("3.6.0") == (3, 6)
    assert fl.parse_version("3.10.1+git1234") == (3, 10)
    assert fl.parse_version("nightly") is None


@pytest.mark.skipif(HAS_CUDA, reason="checks the interpreter's answer")
def test_interpreter_keeps_the_normal_launch():
    fl._STATE.checked = False
    assert fl.support() is None and "TRITON_INTERPRET" in fl.status()
    from flashtune.dispatch.plans import forward_plan
    from flashtune.gen.softmax_space import SoftmaxProblem, default_config

    x = torch.randn(4, 32)
    cfg = default_config("softmax", SoftmaxProblem(4, 32, "float32"))
    plan = forward_plan(x, 1, "softmax", cfg)
    assert not hasattr(plan.launch, "fast_kernels")
    torch.testing.assert_close(plan(x), torch.softmax(x, -1))


# -- GPU --------------------------------------------------------------------------------------
def _views(rows, cols, dtype, offset):
    base = torch.randn(rows * cols + offset, device="cuda", dtype=dtype)
    return base[offset:].view(rows, cols)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_gpu_softmax_fast_path_matches_torch(dtype):
    fl._reset_for_tests(None)
    fl._STATE.checked = False
    import flashtune.dispatch as dispatch

    dispatch.reset()
    assert fl.support() is not None, fl.status()
    shapes = [(1, 128), (4, 128), (7, 100), (33, 1000), (64, 4096), (3, 70000)]
    for (rows, cols), offset in itertools.product(shapes, (0, 1, 3, 8)):
        for op, ref in ((flashtune.softmax, torch.softmax), (flashtune.log_softmax, torch.log_softmax)):
            for _ in range(3):  # first call: plan + normal launch; then fast launches
                x = _views(rows, cols, dtype, offset)
                torch.testing.assert_close(op(x).float(), ref(x.float(), -1), atol=2e-3, rtol=2e-2)
    for _ in range(3):  # the other plan kinds: 3-D rows, and a strided reduction (dim 0)
        x3 = torch.randn(2, 3, 257, device="cuda", dtype=dtype)
        torch.testing.assert_close(flashtune.softmax(x3).float(), torch.softmax(x3.float(), -1),
                                   atol=2e-3, rtol=2e-2)
        xt = torch.randn(300, 5, device="cuda", dtype=dtype)[1:]
        torch.testing.assert_close(flashtune.softmax(xt, 0).float(),
                                   torch.softmax(xt.float(), 0), atol=2e-3, rtol=2e-2)
    assert fl._STATE.failed is None, fl.status()
    plans = dispatch.RUNTIME.plans["softmax"]
    fast = [k for plan in plans.values() for k in getattr(plan.launch, "fast_kernels", ())]
    assert fast, "no plan used the fast launch"
    assert sum(k.fast_calls for k in fast) >= len(shapes), [(k.fast_calls, k.normal_calls) for k in fast]


@pytest.mark.gpu
def test_gpu_captured_kernel_is_tritons_choice():
    """For varied alignment / sizes, the kernel a hit launches is the one Triton would pick."""
    fl._reset_for_tests(None)
    fl._STATE.checked = False
    from flashtune.gen import load_variant
    from flashtune.gen.softmax_space import SoftmaxProblem, default_config

    sup = fl.support()
    assert sup is not None, fl.status()
    cfg = default_config("softmax", SoftmaxProblem(8, 128, "float16"))
    if cfg["regime"] != "row":
        pytest.skip("default config is not the row regime")
    module = load_variant("softmax", cfg)
    jit = module._softmax_row
    fk = fl.FastKernel(jit, sup)
    kw = dict(BLOCK=cfg["block"], ROWS=cfg["rows_per_program"], num_warps=cfg["num_warps"],
              num_stages=cfg["num_stages"])
    for rows, cols, ox, oy in itertools.product((1, 2, 16, 33), (16, 100, 128), (0, 1, 8), (0, 5)):
        x, y = _views(rows, cols, torch.float16, ox), _views(rows, cols, torch.float16, oy)
        # the row kernel takes lengths in grains, as the module's launch() passes them
        grain = module._row_grain(8, cols, x.stride(0), y.stride(0))
        args = (x, y, rows, cols // grain, x.stride(0) // grain, y.stride(0) // grain)
        grid = ((rows + cfg["rows_per_program"] - 1) // cfg["rows_per_program"],)
        for _ in range(2):
            y.fill_(float("nan"))
            got = fk[grid](*args, **kw, GRAIN=grain)
            torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=2e-2)
        assert got is jit[grid](*args, **kw, GRAIN=grain), (rows, cols, ox, oy)
    assert fk.fast_calls > 0 and fl._STATE.failed is None, fl.status()


@pytest.mark.gpu
def test_gpu_backward_through_the_fast_path():
    fl._reset_for_tests(None)
    fl._STATE.checked = False
    import flashtune.dispatch as dispatch

    dispatch.reset()
    for (rows, cols), offset in itertools.product([(4, 128), (9, 3000)], (0, 1)):
        for _ in range(3):
            x = _views(rows, cols, torch.float32, offset).requires_grad_()
            g = torch.randn(rows, cols, device="cuda")
            flashtune.softmax(x).backward(g)
            xr = x.detach().clone().requires_grad_()
            torch.softmax(xr, -1).backward(g)
            torch.testing.assert_close(x.grad, xr.grad, atol=1e-5, rtol=1e-4)
    fast = [k for plan in dispatch.RUNTIME.backward_plans["softmax"].values()
            for k in getattr(plan.launch, "fast_kernels", ())]
    assert sum(k.fast_calls for k in fast) > 0 and fl._STATE.failed is None, fl.status()


@pytest.mark.gpu
def test_gpu_launch_hooks_still_see_every_launch():
    """A profiler's launch hook turns the fast path aside: Triton's normal launch calls it."""
    import triton

    x = torch.randn(4, 128, device="cuda", dtype=torch.float16)
    for _ in range(3):
        flashtune.softmax(x)  # warm: the plan's stand-in has captured its kernel
    runtime = triton.knobs.runtime
    seen = []

    def hook(metadata):
        seen.append(metadata)

    chain = runtime.launch_enter_hook
    if hasattr(chain, "add"):
        chain.add(hook)
        undo = lambda: chain.remove(hook)  # noqa: E731
    else:
        runtime.launch_enter_hook = hook
        undo = lambda: setattr(runtime, "launch_enter_hook", chain)  # noqa: E731
    try:
        y = flashtune.softmax(x)
    finally:
        undo()
    assert len(seen) == 1
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=2e-2)
