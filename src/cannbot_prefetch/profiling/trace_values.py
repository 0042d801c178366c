"""A trace event's values as the readers use them: ts -> ns, dur -> µs, the kept args.

Each value has ONE scalar definition here (`ns_of`, `dur_of`, `text_arg`, `id_arg`); the column
forms (`ns_column`, `dur_column`) answer a whole column at once and are exact shortcuts of
them: the spelling every exporter writes (`digits.ddd` text) is converted by polars, every other
value goes through the scalar definition (tests/unit/profiling/test_trace_values.py holds
them equal on generated spellings). A trace holds ~10^5 timestamps, so the per-value Python
cost was a third of reading one.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from .trace_decode import SLOT
from .values import MAX_DURATION_US, MAX_START_NS, text_to_ns



def ns_of(ts: Any) -> int | None:
    """One timestamp (decimal µs, text or number) -> integer ns, or None: text_to_ns with
    the common spelling (`digits.ddd`, at most 16 integer digits) inlined."""
    if type(ts) is str:
        n = len(ts) - 4
        if 0 < n <= 16 and ts[n] == ".":
            digits = ts[:n] + ts[n + 1:]
            if digits.isdigit() and digits.isascii():
                ns = int(digits)
                return ns if ns < MAX_START_NS else None
    return text_to_ns(ts)


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
    if None not in starts and None not in durs and len(durs) and pl.Series(
            durs, dtype=pl.Float64).is_between(0, MAX_DURATION_US).all():
        return durs, [None] * len(durs)            # the common trace: every event usable
    kept, bad = [], []
    for start, dur in zip(starts, durs):
        k, b = usable(start, dur)
        kept.append(k)
        bad.append(b)
    return kept, bad


# The common spellings, converted by polars; anything else (null here) by the scalar form.
_TS_TEXT = r"^[0-9]{1,16}\.[0-9]{3}$"
_DUR_TEXT = r"^[0-9]{1,30}(\.[0-9]{1,30})?$"


def ns_column(values: list) -> list[int | None]:
    """[ns_of(v) for v in values], the common spelling by polars."""
    return _by_column(values, ns_of, lambda s: pl.when(s.str.contains(_TS_TEXT)).then(
        s.str.replace(".", "", literal=True).cast(pl.Int64, strict=False)))


def dur_column(values: list) -> list[float | None]:
    """[dur_of(v) for v in values]: a column of text all `float` reads (the common trace) by
    `float` itself, which is dur_of's rule for text (a third of polars' time); else the
    common spelling by polars."""
    if set(map(type, values)) == {str}:
        try:
            return list(map(float, values))
        except ValueError:
            pass
    return _by_column(values, dur_of, lambda s: pl.when(s.str.contains(_DUR_TEXT)).then(
        s.cast(pl.Float64, strict=False)))


def _by_column(values: list, scalar, fast) -> list:
    """`fast` on the text values, `scalar` wherever it gave no answer for a value present."""
    if not values:
        return []
    if set(map(type, values)) != {str}:
        values = list(values)
        text = [v if type(v) is str else None for v in values]
    else:
        text = values
    got = pl.select(fast(pl.lit(pl.Series("v", text, dtype=pl.Utf8)))).to_series()
    out = got.to_list()
    if got.null_count():
        for i in got.is_null().arg_true().to_list():
            if values[i] is not None:
                out[i] = scalar(values[i])
    return out


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
