"""The column forms of a trace's values (ns_column, dur_column) answer what their one-value forms
(ns_of, dur_of) answer: equal on every spelling, the common ones and the rest, in any mix (the
timestamp rule itself is pinned in test_timestamp_ns.py). Inputs are GENERATED: hand-written edge spellings and hypothesis
strategies over what a JSON decoder can hand the readers (float literals arrive as text)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cannbot_prefetch.profiling.trace_values import (dur_column, dur_of, ident, ident_column,
                                                     ns_column, ns_of, usable, usable_columns)

EDGE_TS = ["1736408883716197.363", "1736408883716197.3", "1736408883716197", "0.000", "1.000",
           "9999999999999999.999", "1000000000000000000.000", "12345678901234567.000",
           " 1.500", "1.500 ", '"1.5"', "1e3", "1.5e-3", "-1.000", "+1.000", "1.2345", "١.٢٣٤",
           "", "x", "nan", "inf", "1_000.000", None, 0, 17, -5, 9_000_000_000_000_000,
           True, [1], 1.5, "0001.000", "1.000\n"]
EDGE_DUR = ["0", "0.0", "3.703", "12.5", "86400000000", "86400000000.1", "1e400", "-1", "nan",
            "inf", " 2.5", "2.5 ", "1_0", "", "x", None, 0, 5, 10**400, True, [2.0], 1.25,
            "0" * 40, "1." + "9" * 40, "٣"]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                      and math.isnan(b))


def _check(column, scalar, values) -> None:
    got = column(values)
    want = [scalar(v) for v in values]
    assert len(got) == len(want)
    for v, g, w in zip(values, got, want):
        assert _same(g, w) and type(g) is type(w), (v, g, w)


def test_edge_spellings():
    _check(ns_column, ns_of, EDGE_TS)
    _check(dur_column, dur_of, EDGE_DUR)
    _check(ident_column, ident, [*EDGE_TS, *EDGE_DUR])
    assert ns_column([]) == [] and dur_column([]) == [] and ident_column([]) == []


_digits = st.text("0123456789", min_size=0, max_size=22)
_ts_text = st.builds(lambda a, dot, b: a + dot + b, _digits, st.sampled_from(["", ".", ".."]),
                     _digits)
_any_json = st.one_of(st.none(), st.booleans(), st.integers(), _ts_text,
                      st.text(max_size=8), st.floats().map(repr))


@settings(max_examples=300, deadline=None)
@given(st.lists(_any_json, max_size=40))
def test_columns_equal_scalars(values):
    _check(ns_column, ns_of, values)
    _check(dur_column, dur_of, values)
    _check(ident_column, ident, values)


# Columns in the exporters' spelling `digits.ddd` (integer part 0-19 digits, leading zeros,
# past the ns range) and at most one odd value among them.
_common = st.builds(lambda a, b: a + "." + b, st.text("0123456789", max_size=19),
                    st.text("0123456789", min_size=3, max_size=3))
_odd = st.one_of(_any_json, st.sampled_from(["1.2.345", "1,2.345", "-1.000", "+1.000", "١.٢٣٤",
                                             "1 .000", "1.0000", "12", "", "0001.000"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_common, min_size=1, max_size=40), st.one_of(st.none(), _odd),
       st.integers(0, 40))
def test_common_spelling_columns_equal_scalars(values, odd, at):
    _check(ns_column, ns_of, values)
    if odd is not None:
        _check(ns_column, ns_of, values[:at] + [odd] + values[at:])


def test_a_real_length_column():
    """A trace-sized column of the exporters' spelling `whole.ddd`: each ns is whole * 1000 +
    ddd (worked out from the numbers the text was written from), also with one odd value."""
    parts = [(1736408883716197 + 37 * k, k % 1000) for k in range(20000)]
    values = [f"{w}.{f:03d}" for w, f in parts]
    want = [w * 1000 + f for w, f in parts]
    values[7], want[7] = "0000000000000000001.000", 1_000        # leading zeros
    assert ns_column(values) == want
    for odd, ns in (("1,2.345", None), ("1.2.345", None), ("-1.000", None), ("1.23", 1_230),
                    ("\u0661.\u0662\u0663\u0664", None), ("9999999999999999.999", None), (5, 5_000)):
        assert ns_column(values[:9] + [odd] + values[10:]) == want[:9] + [ns] + want[10:]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 10**18)),
                          st.one_of(st.none(), st.floats(allow_nan=True),
                                    st.sampled_from([0.0, 86_400e6, 86_400e6 + 1, -0.0]))),
                max_size=30))
def test_usable_columns_equal_usable(pairs):
    starts, durs = [s for s, _ in pairs], [d for _, d in pairs]
    kept, bad = usable_columns(starts, durs)
    want = [usable(s, d) for s, d in pairs]
    assert bad == [b for _, b in want]
    assert all(_same(k, w) for k, (w, _) in zip(kept, want))
