"""Value normalization: decimal start times, quotes/TABs, prefixes, counter names."""

from __future__ import annotations

import polars as pl
import pytest

from cannbot_prefetch.profiling import columns as C
from cannbot_prefetch.profiling.cells import clean_text, strip_prefix, us_text_to_ns


@pytest.mark.parametrize("raw, ns", [
    ("1736408883716197.363\t", 1736408883716197363),
    ('"1736413971558972.912\t"', 1736413971558972912),
    ("1699529622790614.8", 1699529622790614800),       # 1 decimal: not "delete the dot"
    ("1695115378713661", 1695115378713661000),         # no decimals
    ("1787504007019867.535\t", 1787504007019867535),
    ("0.001", 1),
    ("N/A", None), ("", None), ("abc", None), ("1.2.3", None), ("1 2", None),
])
def test_start_time_is_exact_integer_ns(raw, ns):
    out = pl.DataFrame({"s": [raw]}).select(us_text_to_ns(pl.col("s")))["s"][0]
    assert out == ns
    if ns is not None:
        assert isinstance(out, int)


def test_start_time_not_via_float():
    # float64 cannot hold 19 significant digits: this value would come back ...197.375
    raw = "1736408883716197.363"
    assert int(float(raw) * 1000) != 1736408883716197363
    assert pl.DataFrame({"s": [raw]}).select(us_text_to_ns(pl.col("s")))["s"][0] == \
        1736408883716197363


def test_clean_text_and_prefixes():
    df = pl.DataFrame({"s": ['"32,9216;4096,9216;4096"', "N/A", "", " ND\t", "DT_BF16;DT_BF16"]})
    out = df.select(clean_text(pl.col("s")))["s"].to_list()
    assert out == ["32,9216;4096,9216;4096", None, None, "ND", "DT_BF16;DT_BF16"]
    stripped = pl.DataFrame({"s": ["DT_BF16;FLOAT;DT_INT4", "FORMAT_ND;FRACTAL_NZ"]}).select(
        strip_prefix(strip_prefix(pl.col("s"), "DT_"), "FORMAT_"))["s"].to_list()
    assert stripped == ["BF16;FLOAT;INT4", "ND;FRACTAL_NZ"]


@pytest.mark.parametrize("header, name", [
    ("aic_mte2_time(us)", "aic_mte2_time_us"), ("cube_utilization(%)", "cube_utilization_pct"),
    ("aic_main_mem_read_bw(GB/s)", "aic_main_mem_read_bw_gbps"), ("aic_mac_ratio", "aic_mac_ratio"),
    ("aic_l0c_read_bw_cube(GB/s)", "aic_l0c_read_bw_cube_gbps"),
])
def test_counter_names(header, name):
    assert C.counter_name(header) == name


@pytest.mark.parametrize("header, canon", [
    ("Name", "name"), ("Op Name", "name"), ("OP Type", "type"), ("Task Type", "core"),
    ("Accelerator Core", "core"), ("Task Start Time(us)", "start_ns"), ("Block Num", "block_dim"),
    ("Mix Block Num", "mix_block_dim"), ("Task Duration(us)", "dur_us"), ("Device_id", "device"),
    ("Step Id", "step"), (' "Start Time(us)"\t', "start_ns"), ("aic_mac_ratio", None),
])
def test_aliases_by_name(header, canon):
    assert C.canonical(header) == canon


def test_metrics_from_columns():
    assert C.metrics_from_columns(["name", "aic_mte2_ratio"]) == "PipeUtilization"
    assert C.metrics_from_columns(["aic_mac_fp16_ratio"]) == "ArithmeticUtilization"
    assert C.metrics_from_columns(["aic_main_mem_read_bw_gbps"]) == "Memory"
    assert C.metrics_from_columns(["aic_l0a_read_bw_gbps"]) == "MemoryL0"
    assert C.metrics_from_columns(["name"]) is None


def test_to_int64_ints_text_and_what_is_no_int64():
    from cannbot_prefetch.profiling.scalars import to_int64

    assert to_int64(4294967295) == 4294967295 and to_int64(" 12 ") == 12
    assert to_int64(-(2 ** 63)) == -(2 ** 63) and to_int64(2 ** 63 - 1) == 2 ** 63 - 1
    assert to_int64(2 ** 63) is None and to_int64(str(2 ** 63)) is None
    assert to_int64(True) is None and to_int64(1.5) is None and to_int64(None) is None
    assert to_int64("1.0") is None and to_int64([1]) is None
