"""The database layout (SQLAlchemy 2.0 typed ORM), one schema version in every table name.

A new layout gets a new ``SCHEMA_VERSION`` and so new table names: a database shared with an
older or newer flashtune is never misread, and the other version's tables are left alone.
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import DateTime, Float, Integer, PrimaryKeyConstraint, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 1
TABLE_PREFIX = f"ft_v{SCHEMA_VERSION}_"
# Any flashtune table of any schema version, e.g. "ft_v0_winners".
VERSIONED_TABLE = re.compile(r"^ft_v(\d+)_\w+$")


class Base(DeclarativeBase):
    pass


KEY_COLUMNS = ("device_name", "capability", "sm_count", "triton_version", "family_hash", "op",
               "dtype", "bucket")


class _KeyColumns:
    """Device, template family and problem: the part of the key shared by both tables."""

    device_name: Mapped[str] = mapped_column(String(200))
    capability: Mapped[str] = mapped_column(String(32))
    sm_count: Mapped[int] = mapped_column(Integer)
    triton_version: Mapped[str] = mapped_column(String(64))
    family_hash: Mapped[str] = mapped_column(String(128))
    op: Mapped[str] = mapped_column(String(64))
    dtype: Mapped[str] = mapped_column(String(64))
    # canonical JSON of the sorted bucket items: one column fits every op family's buckets
    bucket: Mapped[str] = mapped_column(String(512))


class WinnerRow(_KeyColumns, Base):
    """The fastest measured config of one (device, family, problem) key."""

    __tablename__ = TABLE_PREFIX + "winners"
    __table_args__ = (PrimaryKeyConstraint(*KEY_COLUMNS),)

    config: Mapped[str] = mapped_column(Text)  # canonical JSON, validated again when read
    median_ms: Mapped[float] = mapped_column(Float)
    p20_ms: Mapped[float] = mapped_column(Float)
    p80_ms: Mapped[float] = mapped_column(Float)
    trials: Mapped[int] = mapped_column(Integer)
    flashtune_version: Mapped[str] = mapped_column(String(64))
    tuned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TrialRow(_KeyColumns, Base):
    """Every measured config (not only winners), so a re-tune can resume and old timings stay."""

    __tablename__ = TABLE_PREFIX + "trials"
    # key first, config last: the index serves "all trials of one key" lookups
    __table_args__ = (PrimaryKeyConstraint(*KEY_COLUMNS, "config"),)

    config: Mapped[str] = mapped_column(String(1024))
    status: Mapped[str] = mapped_column(String(16))  # "ok" | "failed"
    median_ms: Mapped[float | None] = mapped_column(Float)
    p20_ms: Mapped[float | None] = mapped_column(Float)
    p80_ms: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    measured_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


TABLES = (WinnerRow.__table__, TrialRow.__table__)
