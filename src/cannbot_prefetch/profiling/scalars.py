"""The limits every reader applies, and one JSON id as the trace readers take it. A timestamp
has one rule for every reader, the column expression cells.us_text_to_ns."""

from __future__ import annotations

# Starts (ns) at or past this are damage: Int64 ends at 9.22e18, and a start here plus the
# longest duration below (8.64e16 ns) must still fit one.
MAX_START_NS = 9_000_000_000_000_000_000
# No device task or op lasts a day: a longer "duration" is damage, and ns arithmetic on it
# (start + dur) would leave Int64. Every reader refuses rows beyond it (KernelTable invariant).
MAX_DURATION_US = 86_400e6


def to_int64(value: object) -> int | None:
    """A JSON cell -> int that fits Int64, or None."""
    if type(value) is int:       # the common cell (a trace's ids): no text round trip
        return value if -(2 ** 63) <= value < 2 ** 63 else None
    try:
        out = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return out if -(2 ** 63) <= out < 2 ** 63 else None
