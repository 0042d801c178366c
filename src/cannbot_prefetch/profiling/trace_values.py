"""A trace event's values as the readers use them: ts -> ns, dur -> µs, the kept args.

Each value has ONE scalar definition here (`ns_of`, `dur_of`, `text_arg`, `id_arg`); the column
forms (`ns_column`, `dur_column`, `usable_columns`) answer a whole column at once and are exact
shortcuts of them: a column all in the spelling every exporter writes (`digits.ddd` text) is
checked and converted by C passes over the whole column (str.join, bytes.translate, msgspec),
any other column value by value through the scalar definition
(tests/unit/profiling/test_trace_values.py holds them equal on generated spellings). A trace
holds ~10^5 timestamps, so the per-value Python cost was a third of reading one. They stay
plain Python: the columns are lists the decoder built, and a polars round trip would add a
copy of each without removing the per-value fallback.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import msgspec

from .scalars import MAX_DURATION_US, MAX_START_NS, text_to_ns
from .trace_decode import SLOT


# One timestamp (decimal µs, text or number) -> integer ns, or None: the one definition every
# reader uses (scalars.text_to_ns; the CSV's column form is values.us_text_to_ns, tested equal)
ns_of = text_to_ns


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


def ns_column(values: list) -> list[int | None]:
    """[ns_of(v) for v in values]: a column all in the common spelling by C passes."""
    out = _common_ns(values)
    return list(map(ns_of, values)) if out is None else out


_FOURTH_LAST = itemgetter(-4)
_DIGITS_COMMA = b"0123456789,"
_INTS = msgspec.json.Decoder(list[int])


def _common_ns(values: list) -> list[int] | None:
    """The ns of a column whose every value is text `digits.ddd` (ns_of's fast case: the dot
    removed, the digits an int), else None. Checked for the whole column at once: a `.` 4th
    from the end of each value and no other, nothing but ASCII digits besides (no comma,
    the separator); the digit runs then decode as one JSON int list (a run with leading
    zeros, which JSON refuses, by `int`)."""
    if not values:
        return []
    try:
        joined = ",".join(values)
        if set(map(_FOURTH_LAST, values)) != {"."}:
            return None
    except (TypeError, IndexError):       # a value that is no text, or shorter than `.ddd`
        return None
    body = joined.replace(".", "").encode("ascii", "replace")   # non-ASCII: `?`, refused
    if (len(body) != len(joined) - len(values) or body.count(b",") != len(values) - 1
            or body.translate(None, _DIGITS_COMMA)):
        return None                        # a second dot, a comma, or not a digit
    try:
        out = _INTS.decode(b"[" + body + b"]")
    except msgspec.DecodeError:
        out = list(map(int, body.split(b",")))
    return out if max(out) < MAX_START_NS else None


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
