"""What a tuned winner is keyed by: the device that ran it and the problem it solved.

Plain frozen dataclasses with their own input checks; no database and no torch import here
(``DeviceInfo.current`` imports torch only when called).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Mapping

MAX_INT32 = 2**31 - 1  # integer columns hold 32 bits (PostgreSQL INTEGER); SQLite overflows at 64
# Bucket values are what the problem_bucket() functions return: ints, strings and flags.
_BUCKET_TYPES = (bool, int, str)


def _check_str(name: str, value: Any) -> None:
    if type(value) is not str or not value:
        raise TypeError(f"{name} must be a non-empty str, got {type(value).__name__} ({value!r})")


@dataclass(frozen=True)
class DeviceInfo:
    """The hardware and compiler a timing belongs to."""

    name: str
    capability: str  # "9.0" on CUDA, "cpu" for the Triton interpreter
    sm_count: int
    triton_version: str

    def __post_init__(self) -> None:
        _check_str("DeviceInfo.name", self.name)
        _check_str("DeviceInfo.capability", self.capability)
        _check_str("DeviceInfo.triton_version", self.triton_version)
        if type(self.sm_count) is not int:
            raise TypeError(f"DeviceInfo.sm_count must be an int, got {self.sm_count!r}")
        if not 1 <= self.sm_count <= MAX_INT32:
            raise ValueError(f"DeviceInfo.sm_count must be in [1, {MAX_INT32}], "
                             f"got {self.sm_count!r}")

    @classmethod
    def current(cls, device: Any = None) -> "DeviceInfo":
        """The device kernels run on now: a CUDA GPU, or the Triton interpreter on the CPU."""
        import torch  # only here: importing flashtune.cache must stay light

        version = _triton_version()
        from ..gen.loader import interpreter_mode  # Triton's own reading of TRITON_INTERPRET

        interpreted = interpreter_mode()
        if device is not None and not isinstance(device, int):
            device = torch.device(device)
            if device.type != "cuda":
                interpreted = True
        if interpreted or not torch.cuda.is_available():
            return cls("triton-interpreter", "cpu", os.cpu_count() or 1, version)
        props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
        return cls(props.name, f"{props.major}.{props.minor}", int(props.multi_processor_count), version)


def _triton_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:  # a source build without dist metadata
        import triton

        return str(triton.__version__)


@dataclass(frozen=True)
class ProblemKey:
    """An op, its dtype(s) and the problem's bucket fields (sorted name/value pairs)."""

    op: str
    dtype: str  # several dtypes are joined by "," by the caller, e.g. "float16,float32"
    bucket: tuple[tuple[str, Any], ...]

    def __post_init__(self) -> None:
        _check_str("ProblemKey.op", self.op)
        _check_str("ProblemKey.dtype", self.dtype)
        if not isinstance(self.bucket, tuple):
            raise TypeError("ProblemKey.bucket must be a tuple of (name, value) pairs; "
                            "use ProblemKey.make(op, dtype, mapping)")
        names = []
        for item in self.bucket:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise TypeError(f"ProblemKey.bucket items must be (name, value) pairs, got {item!r}")
            name, value = item
            _check_str("ProblemKey.bucket name", name)
            if type(value) not in _BUCKET_TYPES:
                raise TypeError(f"ProblemKey.bucket[{name!r}] must be int, str or bool, "
                                f"got {type(value).__name__} ({value!r})")
            names.append(name)
        if names != sorted(set(names)):
            raise ValueError(f"ProblemKey.bucket names must be unique and sorted, got {names}; "
                             "use ProblemKey.make(op, dtype, mapping)")

    @classmethod
    def make(cls, op: str, dtype: str, bucket: Mapping[str, Any]) -> "ProblemKey":
        if not isinstance(bucket, Mapping):
            raise TypeError(f"bucket must be a mapping, got {type(bucket).__name__}")
        return cls(op, dtype, tuple(sorted(bucket.items())))

    def bucket_dict(self) -> dict[str, Any]:
        return dict(self.bucket)

    def bucket_json(self) -> str:
        """The canonical text stored in the database's unique key."""
        return canonical_json(self.bucket_dict())


def canonical_json(mapping: Mapping[str, Any]) -> str:
    """One spelling per mapping, so equal configs and buckets compare equal as text."""
    return json.dumps(dict(mapping), sort_keys=True, separators=(",", ":"))
