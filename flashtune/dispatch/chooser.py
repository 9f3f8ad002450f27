"""Which config runs a problem: tuned exact bucket, nearest tuned bucket, or the default.

One ``Dispatcher`` per process state, for every op family (softmax and attention; what
differs is in ``families``). Per device it loads the winner table once (the only database
read); each decision is memoized per (op, device index, problem): (rows, cols, dtype) for
softmax, the whole ``AttentionProblem`` for attention, so a repeated problem costs one dict
lookup. The memory layout of the input (strides) does not change the decision: softmax
kernels always see a (rows, cols) view with unit column stride, attention kernels take any
strides.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..gen.notices import DispatchWarning
from ..once import warn_at_user
from ..gen.softmax_space import SoftmaxProblem
from ..gen.space import Config
from .families import family_of
from .settings import Settings, logger
from .table import Bucket, WinnerTable

DEFAULT_SM_COUNT = 132  # an H100's; used only if the device cannot be asked


@dataclass(frozen=True)
class Choice:
    op: str
    problem: Any  # SoftmaxProblem | AttentionProblem
    config: Config
    how: str  # "exact" | "nearest" | "default"
    bucket: dict
    tuned_bucket: Bucket | None
    device_name: str

    def describe(self) -> str:
        src = "" if self.tuned_bucket is None else f" (tuned bucket {dict(self.tuned_bucket)})"
        return (f"{self.op} {family_of(self.op).describe(self.problem)} {self.problem.dtype} on "
                f"{self.device_name}: bucket {self.bucket}, {self.how}{src}, "
                f"config {self.config.as_dict()}")


@dataclass
class _DeviceTable:
    name: str
    sm_count: int
    table: WinnerTable


def resolve_device(device: Any, interpreter: bool) -> torch.device:
    """The ``device`` argument of the inspection API (``choice``, ``attention_choice``) as a
    torch.device: None picks the GPU (the CPU under the interpreter or without one). A device
    torch cannot parse, or a GPU this machine lacks, is a ValueError naming the argument."""
    if device is None:
        use_gpu = torch.cuda.is_available() and not interpreter
        return torch.device("cuda") if use_gpu else torch.device("cpu")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"device must name a torch device (e.g. 'cuda:0' or 'cpu'), got "
                         f"{device!r} ({err})") from None
    if parsed.type == "cuda" and not (torch.cuda.is_available() and (
            parsed.index is None or parsed.index < torch.cuda.device_count())):
        raise ValueError(f"device={device!r}: no such CUDA device on this machine "
                         f"({torch.cuda.device_count()} visible)")
    return parsed


def device_index(device: torch.device) -> int:
    """-1 for the CPU (interpreter); CUDA index, the current device when unspecified."""
    if device.type != "cuda":
        return -1
    return device.index if device.index is not None else torch.cuda.current_device()


def _read_winners(device: torch.device) -> tuple[Any, list]:
    """(DeviceInfo, winners). Never raises: trouble warns once and gives an empty list."""
    try:
        from ..cache import DeviceInfo, read_runtime_winners
    except Exception as err:  # the cache package cannot even be imported (e.g. no SQLAlchemy)
        warn_at_user(f"flashtune: tuned-config cache unavailable ({type(err).__name__}: {err}); "
                     "using default configs", DispatchWarning)
        return None, []
    try:
        info = DeviceInfo.current(device)
    except Exception as err:
        warn_at_user(f"flashtune: cannot identify device {device} ({err}); using default "
                     "configs", DispatchWarning)
        return None, []
    # Only today's templates' winners: the table would drop the others anyway.
    from ..gen import OPS, template_family_hash

    families = {op: template_family_hash(op) for op in OPS}
    return info, read_runtime_winners(info, families=families)  # warns once, [] on trouble


def _memo_key(op: str, index: int, problem: Any) -> tuple:
    if type(problem) is SoftmaxProblem:  # plain ints hash faster than the dataclass
        return (op, index, problem.n_rows, problem.n_cols, problem.dtype)
    return (op, index, problem)


# Decisions memoized per (op, device, problem); cleared when full.
MAX_CHOICES = 16384


class Dispatcher:
    def __init__(self, settings: Settings,
                 reader: Callable[[torch.device], tuple[Any, list]] = _read_winners):
        self.settings = settings
        self._reader = reader
        self._tables: dict[int, _DeviceTable] = {}
        self._choices: dict[tuple, Choice] = {}
        # (op, device index, config) of tuned configs that failed to build or launch here.
        # No decision picks one again: a model whose shapes keep changing would otherwise
        # retry the broken kernel (a compile each time on a GPU) and warn for every new shape.
        self._failed: dict[tuple, object] = {}  # configs that failed (a dict: see reject)
        self._deferred: list[str] = []  # notices for the first table load (see defer)
        # Re-entrant: a signal handler runs in the thread it interrupts, maybe while this lock
        # is held (loading a table reads the database), and one that calls flashtune with a
        # new shape would wait forever on a plain lock. Safe to run inside: an inner table()
        # loads the table itself (the outer one then stores an equal one); an inner reject()
        # finds the outer one's config in _failed, its stale decisions popped or not yet.
        self._lock = threading.RLock()
        self._log = logger(settings)

    def remake_lock(self) -> None:
        """In a forked child: the parent's lock may be held by a thread the child lacks
        (flashtune.forks; the runtime calls this for its dispatcher)."""
        self._lock = threading.RLock()

    # The hook of flashtune.gen.softmax_ops.softmax_forward/backward(choose=...) and of
    # flashtune.gen.attention_ops.attention_forward(choose=...).
    def choose(self, op: str, problem: Any, device: torch.device) -> Config:
        return self.choice(op, problem, device).config

    def choice(self, op: str, problem: Any, device: torch.device) -> Choice:
        index = device_index(device)
        key = _memo_key(op, index, problem)
        found = self._choices.get(key)
        if found is None:
            found = self._decide(op, problem, device, index)
            if len(self._choices) >= MAX_CHOICES:
                # A workload with ever-new shapes must not grow memory without bound (as for
                # the runtime's plans); decisions are cheap to redo, and failed configs stay
                # excluded (_failed).
                self._choices.clear()
            self._choices[key] = found
        return found

    def override(self, op: str, problem: Any, device: torch.device, config: Config) -> None:
        """Replace a decision by the default ``config`` (its tuned config failed to run)."""
        index = device_index(device)
        dev = self.table(device)
        self._choices[_memo_key(op, index, problem)] = Choice(
            op, problem, config, "default", family_of(op).bucket(problem), None, dev.name)

    def reject(self, op: str, problem: Any, device: torch.device, config: Config) -> tuple[Config, bool]:
        """The tuned ``config`` failed to run ``problem``: no decision on this device picks it
        again (decisions already made with it are forgotten); ``problem`` gets the default.
        Returns (that default, whether this config failed here for the first time)."""
        index = device_index(device)
        with self._lock:
            # One call is first, also when a signal handler's reject of the same config runs
            # in between (the lock is re-entrant): setdefault checks and stores in one step.
            token = object()
            first = self._failed.setdefault((op, index, config), token) is token
            if first:
                stale = [key for key, c in list(self._choices.items())
                         if key[0] == op and key[1] == index and c.config == config]
                for key in stale:
                    self._choices.pop(key, None)
        fallback = self.default_config(op, problem, device)
        self.override(op, problem, device, fallback)
        return fallback, first

    def fall_back(self, picked: Choice, device: torch.device, err: BaseException) -> Config:
        """The tuned decision ``picked`` failed with ``err``: reject its config on this device
        (see reject), warn the first time it fails here (one warning per broken config, not one
        per problem it was tuned for; said at the user's line) and return the default config
        that ``picked.problem`` gets instead."""
        fallback, first = self.reject(picked.op, picked.problem, device, picked.config)
        if first:
            warn_at_user(f"flashtune: the tuned {picked.op} config for {picked.describe()} "
                         f"failed ({type(err).__name__}: {err}); using default configs "
                         f"wherever it was picked (here {fallback.as_dict()})", DispatchWarning)
        return fallback

    def default_config(self, op: str, problem: Any, device: torch.device) -> Config:
        """The heuristic config of ``problem`` for this device's SM count."""
        return family_of(op).default(op, problem, sm_count=self.table(device).sm_count)

    def table(self, device: torch.device) -> _DeviceTable:
        index = device_index(device)
        entry = self._tables.get(index)
        if entry is None:
            with self._lock:
                entry = self._tables.get(index)
                if entry is None:
                    entry = self._load(device)
                    self._tables[index] = entry
        return entry

    def defer(self, message: str) -> None:
        """A DispatchWarning to say on the first call that loads a table (first calls read
        the database there and say its notices), not now (see Runtime.reset)."""
        self._deferred.append(message)

    def _load(self, device: torch.device) -> _DeviceTable:
        while self._deferred:
            # Popped first: a notice that raises (still an error) is said once, as any other.
            warn_at_user(self._deferred.pop(0), DispatchWarning)
        info, winners = self._reader(device)
        table = WinnerTable.from_winners(winners)
        if info is not None:
            return _DeviceTable(info.name, info.sm_count, table)
        if device.type == "cuda":
            props = torch.cuda.get_device_properties(device_index(device))
            return _DeviceTable(props.name, props.multi_processor_count, table)
        return _DeviceTable("triton-interpreter", DEFAULT_SM_COUNT, table)

    def _decide(self, op: str, problem: SoftmaxProblem, device: torch.device, index: int) -> Choice:
        dev = self.table(device)
        family = family_of(op)
        found = dev.table.lookup(op, problem)
        if found is None or (op, index, found.config) in self._failed:
            config, how, tuned = family.default(op, problem, sm_count=dev.sm_count), "default", None
        else:
            config, how, tuned = found.config, found.how, found.tuned_bucket
        choice = Choice(op, problem, config, how, family.bucket(problem), tuned, dev.name)
        level = self.settings.log_level
        if self._log.isEnabledFor(level):
            from ..gen.variants import written_source

            # Where the file is (the temp folder's when the cache folder cannot be written),
            # not where it should be: a path that was never written misleads.
            where = written_source(op, config)
            self._log.log(level, "%s; source %s", choice.describe(),
                          where if where is not None
                          else "not written (no writable folder: the kernel runs from memory)")
        return choice
