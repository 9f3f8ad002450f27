"""Declarative variant spaces and the validation that guards the renderer.

A *variant space* lists every tunable of one op family with its allowed values. A *config* is a
mapping from tunable name to a value. ``VariantSpace.validate`` is the only door from stored data
(the SQL cache, JSON imports, the command line) to a template: it rejects unknown keys, missing
keys, wrong types and values outside the space, and then checks the cross-parameter constraints.
The renderer only ever sees the frozen ``Config`` it returns.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping


class ConfigError(ValueError):
    """A config does not belong to its variant space."""


@dataclass(frozen=True)
class Param:
    """One tunable: its name, the Python type of its values and the allowed values.

    ``exhaustive`` lists every value the tuner may try; ``default`` is the value used when a
    heuristic has nothing better to say. ``doc`` ends up in the template header and CLI help.
    """

    name: str
    kind: type
    exhaustive: tuple
    default: Any
    doc: str

    def __post_init__(self) -> None:
        for value in self.exhaustive:
            if type(value) is not self.kind:
                raise TypeError(f"param {self.name}: value {value!r} is not {self.kind.__name__}")
        if self.default not in self.exhaustive:
            raise ValueError(f"param {self.name}: default {self.default!r} not in its values")

    def check(self, value: Any) -> Any:
        # bool is a subclass of int: an exact type check keeps True from passing as block=1.
        if type(value) is not self.kind:
            raise ConfigError(
                f"{self.name} must be of type {self.kind.__name__}, got {type(value).__name__} "
                f"({value!r})"
            )
        if value not in self.exhaustive:
            raise ConfigError(f"{self.name}={value!r} is outside the space {list(self.exhaustive)}")
        return value


class Config(Mapping[str, Any]):
    """A validated, immutable, hashable config. Only ``VariantSpace.validate`` makes these."""

    __slots__ = ("space_name", "_items", "_where")

    def __init__(self, space_name: str, items: Iterable[tuple[str, Any]], _token: object = None):
        if _token is not _MAKE_TOKEN:
            raise TypeError("Config objects come from VariantSpace.validate(), not direct calls")
        self.space_name = space_name
        self._items = tuple(sorted(items))
        self._where = _where_of(self._items)

    def __getitem__(self, key: str) -> Any:
        # By position, from a map shared by every config with these names: listing a problem's
        # candidates reads ~18 knobs of each of ~300 000 configs, and a scan of the items
        # took most of that listing (an H100 host: 4.7 s per problem).
        try:
            return self._items[self._where[key]][1]
        except (KeyError, TypeError):  # TypeError: an unhashable key, not a knob either
            raise KeyError(key) from None

    def get(self, key: str, default: Any = None) -> Any:  # Mapping's, without its raise
        try:
            where = self._where.get(key)
        except TypeError:  # an unhashable key
            return default
        return default if where is None else self._items[where][1]

    def __reduce__(self):
        # Name and items only: the positions' map is shared in each process, not pickled.
        return (_config_of_sorted, (self.space_name, self._items))

    def __setstate__(self, state) -> None:
        # A pickle made before configs had their positions' map (copyreg's slots state).
        slots = state[1] if isinstance(state, tuple) else state
        self.space_name, self._items = slots["space_name"], slots["_items"]
        self._where = _where_of(self._items)

    @classmethod
    def _of_sorted(cls, space_name: str, items: tuple, where: dict[str, int]) -> "Config":
        """A config from items already sorted by name and their positions' map: the walk's
        configs, which VariantSpace.exhaustive builds by the hundred thousand."""
        config = object.__new__(cls)
        config.space_name, config._items, config._where = space_name, items, where
        return config

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash((self.space_name, self._items))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Config)
            and other.space_name == self.space_name
            and other._items == self._items
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._items)
        return f"Config({self.space_name}: {inner})"

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)


_MAKE_TOKEN = object()


def _config_of_sorted(space_name: str, items: tuple) -> Config:
    """Unpickling: the config of items as a Config holds them (sorted by name)."""
    return Config._of_sorted(space_name, items, _where_of(items))


def _where_of(items: tuple) -> dict[str, int]:
    return _positions(tuple(name for name, _ in items))


@functools.lru_cache(maxsize=256)
def _positions(names: tuple[str, ...]) -> dict[str, int]:
    """name -> index in a config's sorted items, one map per set of names (a space's)."""
    return {name: index for index, name in enumerate(names)}


class _Undecided(BaseException):
    """A constraint read a tunable that exhaustive() has not chosen yet.

    A BaseException, so that a constraint's own ``except Exception`` cannot swallow it."""


class _PartialConfig(Mapping):
    """The tunables chosen so far; reading any other tunable (also by ``get`` with a default,
    which would otherwise answer for a value not chosen yet) raises _Undecided."""

    def __init__(self, chosen: dict[str, Any], names: frozenset[str]):
        self._chosen = chosen
        self._names = names

    def __getitem__(self, name: str) -> Any:
        try:
            return self._chosen[name]
        except KeyError:
            if name in self._names:
                raise _Undecided(name) from None
            raise

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._chosen:
            return self._chosen[name]
        if name in self._names:
            raise _Undecided(name)
        return default

    def __contains__(self, name: object) -> bool:
        if name in self._chosen:
            return True
        if name in self._names:
            raise _Undecided(name)
        return False

    def __iter__(self):
        raise _Undecided("iteration over a partial config")

    def __len__(self) -> int:
        raise _Undecided("len of a partial config")

# A constraint returns None when the config is fine, else a message saying what is wrong.
# VariantSpace.exhaustive() also runs it on partial choices, which is sound for constraints
# written as pure functions of the tunables they read through cfg[name], cfg.get(name,
# default) or `name in cfg` (a read of a tunable not chosen yet stops the call). The walk
# trusts both answers on a partial choice: a rejection cuts the branch, and an acceptance
# holds for every completion (the constraint is not asked again, not even of the complete
# configs). So a constraint must not judge the mapping's type, iterate over it or catch
# BaseException (the stop is one): that could cut valid branches, or let invalid configs
# into exhaustive(), which builds its configs without validate.
Constraint = Callable[[Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class VariantSpace:
    """All tunables of one op family plus the constraints that tie them together."""

    name: str
    params: tuple[Param, ...]
    constraints: tuple[Constraint, ...] = ()
    # Bumped when the space offers configs it did not before (or drops some), so that winners
    # chosen from the old space stop being served: part of the family hash
    # (gen.variants.template_family_hash), like the templates themselves.
    revision: int = 1

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def validate(self, raw: Mapping[str, Any]) -> Config:
        """Check ``raw`` against the space; return a frozen Config or raise ConfigError."""
        if isinstance(raw, Config):
            if raw.space_name != self.name:
                raise ConfigError(f"config belongs to space {raw.space_name!r}, not {self.name!r}")
            return raw
        if not isinstance(raw, Mapping):
            raise ConfigError(f"config must be a mapping, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(self.names), key=str)
        if unknown:
            raise ConfigError(f"unknown keys {unknown} for space {self.name!r}; known: {list(self.names)}")
        missing = [n for n in self.names if n not in raw]
        if missing:
            raise ConfigError(f"missing keys {missing} for space {self.name!r}")
        items = [(p.name, p.check(raw[p.name])) for p in self.params]
        as_dict = dict(items)
        for constraint in self.constraints:
            problem = constraint(as_dict)
            if problem:
                raise ConfigError(f"{self.name}: {problem}")
        return Config(self.name, items, _MAKE_TOKEN)

    def complete(self, partial: Mapping[str, Any]) -> Config:
        """Fill unspecified tunables with their defaults, then validate."""
        raw = {p.name: p.default for p in self.params}
        raw.update(partial)
        return self.validate(raw)

    def is_valid(self, raw: Mapping[str, Any]) -> bool:
        try:
            self.validate(raw)
        except ConfigError:
            return False
        return True

    def exhaustive(self) -> Iterator[Config]:
        """Every config of the space that meets the constraints, in itertools.product order.

        The walk (``_walk``) runs once per space and process; its result is kept as one tuple
        of values per config (the forward softmax space holds over a hundred thousand configs,
        tens of MB as tuples, where Config objects would take about six times that), and every
        call builds Configs from it.
        """
        order = sorted(range(len(self.names)), key=self.names.__getitem__)
        names = tuple(self.names[i] for i in order)
        where = _positions(names)
        for values in self._valid_values:
            yield Config._of_sorted(self.name, tuple(zip(names, [values[i] for i in order])),
                                    where)

    @functools.cached_property
    def _valid_values(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(self._walk())

    def _walk(self) -> list[tuple[Any, ...]]:
        """The configs of exhaustive() as tuples of values in ``names`` order, found by a
        pruned walk of the product.

        The full product runs to many millions of configs (forward softmax: over a billion)
        of which a small fraction is valid, so tunables are chosen one at a time and a branch
        is cut early when some constraint already rejects the partial choice (see Constraint
        for what that relies on). A constraint that accepts a partial choice read only chosen
        tunables, so by the same rule it accepts every completion: it is not asked again below
        that choice, not even of the complete ones. A complete choice is judged on a plain
        dict, as ``validate`` judges it, by the constraints still open there (those that need
        the last tunable, or could not be judged on a partial choice); that skips most of the
        calls, which were most of the walk's time. The tests judge every walked config of
        the shipped spaces by every constraint. (Values are collected as tuples straight from
        the choice: building a Config per config and reading it back took most of the walk's
        7-11 s.)
        """
        names = self.names
        choices = [p.exhaustive for p in self.params]
        last = len(names) - 1
        chosen: dict[str, Any] = {}  # in names order: deeper choices are deleted on the way up
        partial = _PartialConfig(chosen, frozenset(names))
        found: list[tuple[Any, ...]] = []

        def still_open(pending: tuple) -> tuple | None:
            """The constraints of ``pending`` the partial choice leaves undecided; None when
            one of them rejects it (and with it every completion)."""
            left = []
            for constraint in pending:
                try:
                    if constraint(partial) is not None:
                        return None
                except _Undecided:
                    left.append(constraint)  # it needs a tunable not chosen yet
                except Exception:  # noqa: BLE001 - e.g. a division guarded by another constraint
                    left.append(constraint)  # not decidable on a partial choice
            return tuple(left)

        def meets(constraints: tuple) -> bool:
            raw = dict(chosen)
            return all(c(raw) is None for c in constraints)

        def walk(depth: int, pending: tuple) -> None:
            name = names[depth]
            for value in choices[depth]:
                chosen[name] = value
                if depth == last:
                    if meets(pending):
                        found.append(tuple(chosen.values()))
                    continue
                left = still_open(pending)
                if left is not None:
                    walk(depth + 1, left)
            del chosen[name]

        if not names:  # the product of no choices is one empty config
            return [()] if meets(self.constraints) else []
        walk(0, tuple(self.constraints))
        return found

    def describe(self) -> str:
        """One line per tunable, for template headers and CLI help."""
        return "\n".join(f"{p.name}: {p.doc} (one of {list(p.exhaustive)})" for p in self.params)
