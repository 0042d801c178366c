"""A trace event's values as the readers use them: ts -> ns, dur -> µs, the kept args.

A timestamp follows the one rule of every reader, cells.us_text_to_ns (a polars expression):
`ts_text` spells JSON values as a text column, `ns_series` applies the rule to it (a trace
read gathers its timestamps and calls it once), `ns_column` is the two over one list and
`ns_of` one value of that. The other values have one scalar definition here (`dur_of`, `text_arg`, `id_arg`) and
column forms (`dur_column`, `usable_columns`) that answer a whole column at once and are exact
shortcuts of them (tests/unit/profiling/test_trace_values.py holds them equal on generated
spellings). A trace holds ~10^5 values per column, so nothing here loops in Python over a
column in the spelling every exporter writes.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from .cells import us_text_to_ns
from .scalars import MAX_DURATION_US
from .trace_decode import SLOT


def dur_of(dur: Any) -> float | None:
    """One duration as written -> float µs, or None when it is no number (range not judged)."""
    kind = type(dur)
    if kind is str:
        try:
            return float(dur)
        except ValueError:
            return None
    if kind is int:
        return float(dur) if -10**300 < dur < 10**300 else None   # float() would overflow
    if kind is float:
        return dur
    return None


def usable(start: int | None, dur: float | None) -> tuple[float | None, str | None]:
    """(dur kept, why the event is unusable): no ts, or a duration outside [0, a day]."""
    if start is None:
        return dur, "no valid ts"
    if dur is None or not 0 <= dur <= MAX_DURATION_US:   # NaN fails both comparisons
        return None, "no valid dur"
    return dur, None


def usable_columns(starts: list, durs: list) -> tuple[list, list]:
    """`usable` over whole columns: (durations kept, why each event is unusable)."""
    if (None not in starts and None not in durs and durs and 0 <= min(durs)
            and max(durs) <= MAX_DURATION_US and sum(durs) == sum(durs)):
        # the common trace, every event usable: all in [0, a day] (a NaN first fails `min`,
        # one anywhere else makes the sum NaN)
        return durs, [None] * len(durs)
    kept, bad = [], []
    for start, dur in zip(starts, durs):
        k, b = usable(start, dur)
        kept.append(k)
        bad.append(b)
    return kept, bad


_NS = us_text_to_ns(pl.col("ts"))   # the rule over a column named ts, built once


def ts_text(values: list) -> pl.Series:
    """Timestamps as a JSON decoder hands them (text: floats are decoded as text; ints; anything
    else) spelled as the text the rule reads (`_as_text`), held as one polars text column (~36
    bytes a value against ~70 for a str object): a reader gathers a trace's timestamps so and
    converts them once (`ns_series`), since every conversion call costs ~0.5 ms of polars
    set-up whatever its length."""
    try:
        return pl.Series("ts", values, dtype=pl.Utf8)     # strict: only text and nulls pass
    except (TypeError, OverflowError, ValueError):
        return pl.Series("ts", list(map(_as_text, values)), dtype=pl.Utf8)


def ns_series(text: pl.Series) -> pl.Series:
    """A text column (`ts_text`) -> Int64 ns, null where refused, by cells.us_text_to_ns."""
    return text.rename("ts").to_frame().lazy().select(_NS).collect()["ts"]


def ns_column(values: list) -> list[int | None]:
    """Timestamps as a JSON decoder hands them -> integer ns or None: `ns_series(ts_text(v))`,
    the rule over the column spelled as text."""
    return ns_series(ts_text(values)).to_list()


def ns_of(value: Any) -> int | None:
    """One timestamp -> integer ns or None: `ns_column` of one value."""
    return ns_column([value])[0]


def _as_text(value: Any) -> str | None:
    """A JSON value as the text the timestamp rule reads: text as written, a number's decimal
    spelling; no text for a bool, a list, null, or an int of more digits than any ns count
    (whose spelling Python may refuse to build)."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return str(value) if -10**30 < value < 10**30 else None
    if kind is float:
        return repr(value)
    return None


def dur_column(values: list) -> list[float | None]:
    """[dur_of(v) for v in values]: a column of text all `float` reads (the common trace) by
    `float` itself, which is dur_of's rule for text."""
    if set(map(type, values)) == {str}:
        try:
            return list(map(float, values))
        except ValueError:
            pass
    return list(map(dur_of, values))


def text_arg(args: Any, key: str) -> str | None:
    """A kept text arg (TEXT_ARGS) as the readers compare it: text as written; torch's
    lists (Input Dims, Input type) in the Ascend text spelling; anything else None."""
    v = None if args is None else getattr(args, SLOT[key])
    if v is None or type(v) is str:
        return v
    return listed_text(key, v)


def id_arg(args: Any, key: str) -> int | str | None:
    """A kept id arg (trace_decode.ID_ARGS) when it is an int or text (no bool, list, float)."""
    v = None if args is None else getattr(args, SLOT[key])
    return v if type(v) in (int, str) else None


def listed_text(key: str, value: Any) -> str | None:
    """torch writes Input Dims / Input type as lists: kept as the Ascend text spelling
    (`1,16,256;1024,256`, `c10::BFloat16;long int`), so equal values are stored once."""
    if not isinstance(value, list):
        return None
    if key == "Input Dims":
        parts = []
        for d in value:
            ok = isinstance(d, list) and all(isinstance(x, (int, str)) and not isinstance(x, bool)
                                             for x in d)
            parts.append(",".join(str(x) for x in d) if ok else "")
        return ";".join(parts)
    if key == "Input type":
        return ";".join(str(t) for t in value)
    return None


_ID_TYPES = frozenset({int, str})


def ident(value: Any):
    """pid/tid as written (int or text); anything else (lists, floats, bools) is no id."""
    return value if type(value) in _ID_TYPES else None


def ident_column(values: list) -> list:
    """[ident(v) for v in values]: the list itself when every value is an id already."""
    return values if _ID_TYPES.issuperset(map(type, values)) else list(map(ident, values))
