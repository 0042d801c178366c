"""Vectorized value cleanup shared by the readers (polars expressions, no row loops).

Exports quote shapes (three double quotes around `32,9216;4096` in the file), end start times with a TAB, write
`N/A` where a cell does not apply and prefix dtypes/formats with `DT_`/`FORMAT_`. Start times
carry up to 19 significant digits, more than a float holds, so they are parsed as decimals.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import polars as pl

_TRIM = ' \t\r\n"'
_MAX_US = Decimal(9_000_000_000_000_000)  # x1000 still fits int64 ns
MAX_START_NS = 9_000_000_000_000_000_000
# No device task or op lasts a day: a longer "duration" is damage, and ns arithmetic on it
# (start + dur) would leave Int64. Every reader refuses rows beyond it (KernelTable invariant).
MAX_DURATION_US = 86_400e6
NULL_TOKENS = ("N/A", "NA", "n/a", "None", "NULL", "null", "")


def clean_text(expr: pl.Expr) -> pl.Expr:
    """Trim whitespace/TABs/CR and surrounding quotes; `N/A` and empty -> null."""
    text = expr.str.strip_chars(_TRIM)
    return pl.when(~text.is_in(NULL_TOKENS)).then(text)  # keeps the column's name


def strip_prefix(expr: pl.Expr, prefix: str) -> pl.Expr:
    """`DT_BF16;DT_BF16` -> `BF16;BF16` (every `;`-separated entry; the prefix only ever
    occurs at the start of an entry, so a literal replace does it)."""
    return expr.str.replace_all(prefix, "", literal=True)


def to_float(expr: pl.Expr) -> pl.Expr:
    """Cleaned text -> Float64; garbage -> null (callers compare with the text to count it)."""
    return expr.cast(pl.Float64, strict=False)


def to_int(expr: pl.Expr) -> pl.Expr:
    """Cleaned text -> Int64 via Float64, so `48` and `48.0` both parse; garbage -> null."""
    as_float = expr.cast(pl.Float64, strict=False)
    ok = as_float.is_finite() & (as_float.abs() < 9.0e18)
    return pl.when(ok).then(as_float.round(0)).otherwise(None).cast(pl.Int64)


def us_text_to_ns(expr: pl.Expr) -> pl.Expr:
    """Decimal µs text -> integer ns, exactly: `1736408883716197.363` -> 1736408883716197363.

    Parsed as a 38-digit decimal with 3 places (µs -> whole ns; finer digits are rounded),
    whose stored integer is the ns count: never via float (19 significant digits do not fit
    one), never by deleting the dot (which breaks on 0-2 decimals: `1699529622790614.8`), no
    multiply (a decimal product pass over every row). Garbage -> null; a negative value
    passes through for the caller to reject. One cast per cell, no regex.
    """
    dec = expr.str.strip_chars(_TRIM).cast(pl.Decimal(38, 3), strict=False)
    ns = dec.to_physical().cast(pl.Int64, strict=False)
    return pl.when(ns < MAX_START_NS).then(ns)   # room left for start + duration in Int64


def text_to_ns(value: object) -> int | None:
    """One decimal µs value (str/int/float text) -> integer ns; None when it is not a number.

    For the JSON readers, which parse floats as text so no digit is lost.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000 if 0 <= value < 9_000_000_000_000_000 else None
    text = value if isinstance(value, str) else str(value)
    whole, dot, frac = text.partition(".")
    # the common spelling, digits[.ddd], exactly and without Decimal (traces hold ~10^5 of them)
    if whole.isdigit() and whole.isascii() and len(whole) <= 16 and (
            not dot or (frac.isdigit() and frac.isascii() and len(frac) <= 3)):
        ns = int(whole) * 1000 + (int(frac.ljust(3, "0")) if frac else 0)
        return ns if ns < MAX_START_NS else None
    text = text.strip().strip('"').strip()
    try:
        dec = Decimal(text)
    except InvalidOperation:
        return None
    if not dec.is_finite() or not 0 <= dec < _MAX_US:
        return None
    return int((dec * 1000).to_integral_value(rounding="ROUND_HALF_EVEN"))


def to_int64(value: object) -> int | None:
    """A JSON cell -> int that fits Int64, or None."""
    if type(value) is int:       # the common cell (a trace's ids): no text round trip
        return value if -(2 ** 63) <= value < 2 ** 63 else None
    try:
        out = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return out if -(2 ** 63) <= out < 2 ** 63 else None


def to_number(value: object) -> float | None:
    """A JSON cell -> float, or None for N/A / garbage."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(str(value).strip().strip('"'))
    except ValueError:
        return None
    return out if out == out and abs(out) != float("inf") else None
