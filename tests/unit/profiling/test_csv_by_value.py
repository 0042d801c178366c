"""The signature columns of a kernel table (shapes, dtypes, formats) are cleaned once per distinct
value (csv_columns.clean_by_value), parsed as categories on the fast path and as text on the
ragged one: every cell must come out as the exporters' spelling cleaned by hand (quotes and
blanks trimmed, null tokens null, DT_/FORMAT_ prefixes gone), including values first seen after
the 2000-row sample, and a category table shared with a larger column must not change a value.

The tables are GENERATED in the real Level1 kernel_details header (_profiling_helpers); the
expected values are written by hand next to each spelling.
"""

from __future__ import annotations

import polars as pl
import pytest
from _profiling_helpers import LEVEL1_HEADER, write_csv

from cannbot_prefetch.profiling import csv_columns
from cannbot_prefetch.profiling.csv_columns import Spec, by_value, clean_by_value
from cannbot_prefetch.profiling.csv_reader import read_csv_rows

# (as written in the file, as the table holds it), cycled with different periods
IN_SHAPES = [('"""8,2048;2048"""', "8,2048;2048"), ("N/A", None), ('" 4,4 "', "4,4"), ("", None)]
IN_DTYPES = [("DT_BF16;DT_BF16", "BF16;BF16"), ("DT_FLOAT;DT_INT64", "FLOAT;INT64"),
             ("N/A", None), ("FLOAT16", "FLOAT16"), ("DT_INT8", "INT8")]
IN_FORMATS = [("ND;FORMAT_ND", "ND;ND"), ("FORMAT_FRACTAL_NZ", "FRACTAL_NZ"), ("N/A", None)]
OUT_SHAPES = [('"""32,4096"""', "32,4096"), ('"""1"""', "1")]
OUT_DTYPES = [("DT_BF16", "BF16"), ("", None), ("DT_FLOAT16", "FLOAT16")]
OUT_FORMATS = [("ND", "ND"), ("FORMAT_NC1HWC0", "NC1HWC0")]
LATE = 2500                                  # past the 2000-row sample the columns are planned on
LATE_IN = ('"""99,1;1,99"""', "99,1;1,99")   # an input shape first seen there
COLUMNS = ("input_shapes", "input_dtypes", "input_formats", "output_shapes", "output_dtypes",
           "output_formats")
ROWS = 3000


def _cells(i: int) -> list[tuple[str, str | None]]:
    ins = LATE_IN if i >= LATE and i % 2 else IN_SHAPES[i % len(IN_SHAPES)]
    return [ins, IN_DTYPES[i % len(IN_DTYPES)], IN_FORMATS[i % len(IN_FORMATS)],
            OUT_SHAPES[i % len(OUT_SHAPES)], OUT_DTYPES[i % len(OUT_DTYPES)],
            OUT_FORMATS[i % len(OUT_FORMATS)]]


def _table(tmp_path, ragged_at: int | None):
    rows = []
    for i in range(ROWS):
        sig = ",".join(c for c, _ in _cells(i))
        extra = ",surplus" if i == ragged_at else ""
        rows.append(f"1,4294967295,{i},2,k{i},MatMulV2,dynamic,AI_CORE,{1000 + i}.500\t,2.5,0.5,"
                    f"20,0,NO,{sig},N/A,1.0,1800,0.1,0.05,0.9,0.9,20.5{extra}")
    return write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows)


@pytest.mark.parametrize("ragged_at", [None, 1500], ids=["fast path", "ragged path"])
def test_each_cell_cleaned_as_by_hand(tmp_path, monkeypatch, ragged_at):
    seen = []
    real = csv_columns._distinct
    monkeypatch.setattr(csv_columns, "_distinct", lambda raw: (seen.append(raw.dtype), real(raw))[1])
    result = read_csv_rows(_table(tmp_path, ragged_at), "kernel_details.csv", 5)
    df = result.df.sort("row")
    kept = [i for i in range(ROWS) if i != ragged_at]
    assert df["row"].to_list() == [i + 2 for i in kept]      # file line = index + 2
    for k, name in enumerate(COLUMNS):
        assert df[name].to_list() == [_cells(i)[k][1] for i in kept], name
        assert df.schema[name] == pl.Utf8
    assert result.skipped == (0 if ragged_at is None else 1)
    # the fast path parses the six as categories; the ragged one reads text
    assert seen == [pl.Categorical if ragged_at is None else pl.Utf8] * len(COLUMNS)


def test_a_shared_category_table_changes_no_value():
    """A categorical column whose codes index a table longer than itself (categories shared
    with a bigger column, as polars' global ones are) is cleaned through its distinct values:
    the same answer as a private one."""
    spec = Spec("Input Shapes", "input_shapes", "text", trim=True)
    big = pl.Series([f'"{n},1"' for n in range(5000)], dtype=pl.Categorical)
    small = pl.Series(['"8,2"', None, ' "8,2" ', "N/A", '"8,2"'], dtype=pl.Categorical)
    want = ["8,2", None, "8,2", None, "8,2"]
    for col in (small, small.cast(pl.Utf8)):
        frame = pl.DataFrame({"input_shapes": col})
        assert clean_by_value(frame, [spec])["input_shapes"].to_list() == want
    assert big.len() == 5000        # kept alive while `small` was cleaned


def test_which_columns_are_cleaned_by_value():
    assert by_value(Spec("Input Shapes", "input_shapes", "text", trim=True))
    assert by_value(Spec("Input Data Types", "input_dtypes", "text@nulled", trim=False))
    assert by_value(Spec("Output Formats", "output_formats", "text", trim=False))
    # parsed with N/A already null and nothing to trim or strip: no work to share
    assert not by_value(Spec("Input Shapes", "input_shapes", "text@nulled", trim=False))
    # not a signature column: cleaned per row as before
    assert not by_value(Spec("Name", "name", "text", trim=True))
