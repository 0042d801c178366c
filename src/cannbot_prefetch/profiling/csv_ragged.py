"""The careful CSV path, for files whose rows do not all match the header.

Polars pads short rows and (with truncation) cuts long ones silently, so the field count of
every line is measured separately (quote-aware, vectorized). Files polars refuses outright
(a stray quote) go through Python's lenient csv module: slow, but only for broken files.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl

from ..errors import InputError

LINE = "__line"
FIELDS = "__fields"
_READ = dict(infer_schema=False, encoding="utf8-lossy")
_POLARS_ERRORS = (pl.exceptions.PolarsError, OSError, ValueError)
_LENIENT_MAX_BYTES = 64 << 20


def read_text_frame(path: Path, cols: list[str], eol: str = "\n") -> pl.DataFrame:
    """Eager text frame with `__line` and `__fields` (quote-aware field count per line)."""
    try:
        df = pl.read_csv(path, truncate_ragged_lines=True, eol_char=eol, **_READ)
        counts = _field_counts(path, eol)
    except _POLARS_ERRORS:
        return read_with_csv_module(path)
    if counts is None or counts.len() != df.height or list(df.columns) != cols:
        return read_with_csv_module(path)
    return df.with_columns(counts, pl.int_range(2, df.height + 2, dtype=pl.Int64).alias(LINE))


def _field_counts(path: Path, eol: str) -> pl.Series | None:
    """Fields per data line (null for blank lines): drop quoted runs, count commas."""
    lines = pl.read_csv(path, has_header=False, separator="\x1f", quote_char=None,
                        infer_schema=False, truncate_ragged_lines=True, eol_char=eol,
                        encoding="utf8-lossy", new_columns=["l"])
    body = lines["l"].slice(1)
    unquoted = body.str.replace_all(r'"[^"]*"', "")
    return (unquoted.str.count_matches(",") + 1).cast(pl.Int64).alias(FIELDS)


def read_with_csv_module(path: Path, limit: int | None = None) -> pl.DataFrame:
    """Fallback for files polars refuses (stray quotes): lenient, exact line numbers, slow,
    so only for files (or first rows) of a bounded size."""
    try:
        if limit is None and path.stat().st_size > _LENIENT_MAX_BYTES:
            raise InputError(f"the CSV parser refused this file (a stray quote?) and it is too "
                             f"big for the lenient reader (> {_LENIENT_MAX_BYTES >> 20} MiB)",
                             path=str(path))
        with open(path, "rb") as fh:
            text = fh.read(_LENIENT_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        raise InputError("empty file", path=str(path)) from None
    if not header:
        raise InputError("empty header line", path=str(path))
    width = len(header)
    cols: list[list[str | None]] = [[] for _ in range(width)]
    lines, fields = [], []
    while limit is None or len(lines) < limit:
        try:
            rec = next(reader)
        except StopIteration:
            break
        except csv.Error:
            rec = ["<unparseable>"]
        lines.append(reader.line_num)
        fields.append(len(rec) if rec else None)
        for i in range(width):
            cols[i].append(rec[i] if i < len(rec) and rec[i] != "" else None)
    names = _dedupe([h if h else f"column_{i + 1}" for i, h in enumerate(header)])
    data = {n: pl.Series(n, c, dtype=pl.Utf8) for n, c in zip(names, cols)}
    data[LINE] = pl.Series(LINE, lines, dtype=pl.Int64)
    data[FIELDS] = pl.Series(FIELDS, fields, dtype=pl.Int64)
    return pl.DataFrame(data)


def _dedupe(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        out.append(n if k == 0 else f"{n}_duplicated_{k - 1}")
        seen[n] = k + 1
    return out
