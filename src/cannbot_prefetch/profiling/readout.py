"""What one reader hands back, and the last step every reader shares: fit BASE_SCHEMA.

Readers differ in how they parse; from here on a row is a row, whatever the layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from .table import BASE_SCHEMA


@dataclass
class ReadResult:
    """Rows of one source plus the damage met on the way (counted, not fatal)."""

    df: pl.DataFrame
    rows_read: int = 0                      # data rows seen in the source
    skipped: int = 0                        # rows dropped as damaged
    samples: list[str] = field(default_factory=list)  # "file:line: why"
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)  # facts the source states (soc, freq_mhz, ...)


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """BASE_SCHEMA columns first (added as null when missing, cast to their type), extras after."""
    exprs = []
    for name, dtype in BASE_SCHEMA.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    extras = [pl.col(c) for c in df.columns if c not in BASE_SCHEMA]
    return df.select(exprs + extras)


def memset_mask(name: pl.Expr, type_: pl.Expr | None = None) -> pl.Expr:
    """True for MemSet helpers: Type `MemSet` or `0`, or a name ending `_MemSet`."""
    mask = name.str.ends_with("_MemSet").fill_null(False)
    if type_ is not None:
        mask = mask | type_.is_in(["MemSet", "0"]).fill_null(False)
    return mask


def drop_memset(df: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """MemSet helpers are zero-fill launches, not work: drop them and say how many."""
    mask = memset_mask(pl.col("name"), pl.col("type") if "type" in df.columns else None)
    kept = df.filter(~mask)
    return kept, df.height - kept.height
