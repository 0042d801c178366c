"""How a number is printed for a reader, one spelling per quantity (a leaf: imports nothing).

The CLI, the design document, its picture, the report and the analysis' stored reasons print
the same quantities; they do it through these functions so one size reads the same everywhere
(before this module: six `_mib` and three `_fmt` helpers, with 1 or 2 decimals, bytes first or
last, "-" or "–" for unknown).
"""

from __future__ import annotations

from typing import Any

MIB = 1 << 20          # bytes in a MiB: sizes are binary, as max_size and the caps are bytes
UNKNOWN = "–"          # a value that is not known (None)


def mib_number(n: float | None) -> str:
    """A byte count in MiB, two decimals, for a column whose header says "MiB"."""
    return UNKNOWN if n is None else f"{n / MIB:,.2f}"


def mib(n: float | None) -> str:
    """A byte count in MiB with its unit: "12.50 MiB"."""
    return UNKNOWN if n is None else f"{mib_number(n)} MiB"


def size_text(n: int | None) -> str:
    """An exact size a plan or a cap holds: "12.50 MiB (13,107,200 B)"."""
    return UNKNOWN if n is None else f"{mib(n)} ({int(n):,} B)"


def number(v: Any, digits: int = 1) -> str:
    """A measured or computed number: floats with `digits` decimals and thousands separators,
    anything else as it is, None as unknown."""
    if v is None:
        return UNKNOWN
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)
