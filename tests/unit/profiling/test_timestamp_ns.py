"""One rule turns timestamp text into ns for every reader (cells.us_text_to_ns); the trace's
column form (trace_values.ns_column) and one value (ns_of) are that rule over JSON values.

The expected ns below are worked out by hand from the text (µs x 1000, digits past the third
decimal rounded half to even), not by calling the code. Inputs are GENERATED spellings: the
exporters' own (`digits.ddd`, a trailing TAB, quotes) and what a hand-edited or damaged file
may hold.
"""

from __future__ import annotations

import polars as pl
import pytest

from cannbot_prefetch.profiling.cells import us_text_to_ns
from cannbot_prefetch.profiling.scalars import MAX_START_NS
from cannbot_prefetch.profiling.trace_values import ns_column, ns_of

# (text as written, ns worked out by hand or None: refused)
PINNED = [
    ("1736408883716197.363", 1_736_408_883_716_197_363),   # 19 digits: beyond float64
    ("1736408883716197.363\t", 1_736_408_883_716_197_363),  # kernel_details' trailing TAB
    ('"1736413971558972.912"', 1_736_413_971_558_972_912),  # quoted cell
    (" 12.5 ", 12_500),
    ("1699529622790614.8", 1_699_529_622_790_614_800),       # one decimal: not "drop the dot"
    ("1695115378713661", 1_695_115_378_713_661_000),         # whole µs
    (".5", 500), ("5.", 5_000), ("00012.000", 12_000), ("+1.000", 1_000),
    # digits past ns: half to even on the ns digit
    ("1.2344999", 1_234), ("1.2345", 1_234), ("1.2355", 1_236), ("1.23450001", 1_235),
    ("0.0005", 0), ("0.0015", 2),
    # exponent forms: a decimal number in µs like any other
    ("1e3", 1_000_000), ("1E3", 1_000_000), ("1.5e-3", 2), ("2.5e-3", 2),
    ("1e+16", None),                                          # 1e19 ns: past Int64's room
    # the bound: MAX_START_NS is 9e18 ns = 9e15 µs
    ("8999999999999999.999", 8_999_999_999_999_999_999),
    ("8999999999999999.9996", None),                          # rounds up to the bound
    ("9000000000000000", None),
    # negative: refused (a timestamp or duration never is); a rounded -0 is zero
    ("-1.000", None), ("-0.001", None), ("-0.0004", 0),
    # garbage and empty
    ("", None), ("N/A", None), ("x", None), ("1.2.3", None), ("1 2", None), ("nan", None),
    ("inf", None), ("1_000.000", None), ("0x10", None), ("\u0661.\u0662\u0663\u0664", None),
]


@pytest.mark.parametrize("text, ns", PINNED)
def test_the_rule_gives_the_hand_worked_ns(text, ns):
    got = pl.DataFrame({"s": [text]}).select(us_text_to_ns(pl.col("s")))["s"][0]
    assert got == ns
    if ns is not None:
        assert isinstance(got, int)


def test_trace_and_csv_forms_agree_on_the_same_inputs():
    texts = [t for t, _ in PINNED]
    want = [ns for _, ns in PINNED]
    csv = pl.DataFrame({"s": texts}).select(us_text_to_ns(pl.col("s")))["s"].to_list()
    assert csv == want
    assert ns_column(texts) == want                 # a trace column, all text
    assert [ns_of(t) for t in texts] == want        # one value at a time
    # a trace column that also holds JSON numbers and non-numbers: each as its text would be
    mixed = [*texts, 17, 0, -5, 10**40, 1.5, float("nan"), True, None, [1]]
    assert ns_column(mixed) == [*want, 17_000, 0, None, None, 1_500, None, None, None, None]


def test_the_bound_is_the_readers_limit():
    assert MAX_START_NS == 9 * 10**18      # below Int64's 9.22e18, with a day's duration to add
    assert ns_of("8999999999999999.999") == MAX_START_NS - 1
    assert ns_of("8999999999999999.9995") is None    # half to even: ...999.9995 -> 9e18
