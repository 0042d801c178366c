"""One value as the JSON readers take it (a timestamp, an id) and the limits every reader
applies. Plain Python, because a JSON reader meets one value at a time; the column
expressions over CSV and database cells are in cells.py."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

_MAX_US = Decimal(9_000_000_000_000_000)  # x1000 still fits int64 ns
MAX_START_NS = 9_000_000_000_000_000_000
# No device task or op lasts a day: a longer "duration" is damage, and ns arithmetic on it
# (start + dur) would leave Int64. Every reader refuses rows beyond it (KernelTable invariant).
MAX_DURATION_US = 86_400e6


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
