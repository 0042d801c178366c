"""kernel_details.csv / op_summary_*.csv -> normalized rows, with polars and no row loops.

Cells are read as text (`infer_schema=False`) and cast in one lazy pass, so one bad cell costs
one row, not the file, and a 1M-row export never sits in memory as text. A small eager sample
of the first rows decides, per column, whether values need trimming (quotes, TABs) or are a
text extra rather than a counter. Damaged rows (ragged, non-numeric, unparseable start time)
are dropped and counted with `file:line` samples; the caller judges whether the rest is usable.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import polars as pl

from ..errors import InputError
from . import columns as C
from .csv_columns import (Spec, by_value, cell_flags, clean_by_value, flag_bad, frame_exprs,
                          is_native, map_headers, plan_columns)
from .csv_ragged import FIELDS as _FIELDS
from .csv_ragged import LINE as _LINE
from .csv_ragged import read_text_frame, read_with_csv_module
from .readout import ReadResult, conform
from .table import BASE_SCHEMA, REPORT_ONLY

_SAMPLE_ROWS = 2000
_PROBE_BYTES = 1 << 16
_SAMPLE_BYTES = 4 << 20  # a sample of 2000 rows is ~0.6 MB in real exports
_POLARS_ERRORS = (pl.exceptions.PolarsError, OSError, ValueError)
_READ = dict(infer_schema=False, encoding="utf8-lossy")


class _Ragged(Exception):
    """Some rows have more or fewer fields than the header: take the careful path."""


def read_csv_rows(path: Path, source: str, samples_kept: int,
                  counters: frozenset[str] | None = None, max_columns: int = 1024) -> ReadResult:
    """One CSV export -> ReadResult with BASE_SCHEMA columns plus counters and extras.

    `counters`: keep only these counter columns (None: all). Unread columns are not even
    materialized by the parser, which is most of the cost on a 1M-row file.
    """
    eol = probe(path, max_columns)
    sample = _read_sample(path, eol)
    every = plan_columns(sample, map_headers(list(sample.columns), path))
    cols = [s.col for s in every]
    # With a counter selection (analysis), also skip the text/int extras outside BASE_SCHEMA
    # (OP State, HF32 Eligible, Context ID, Model ID, ...) and the report-only base columns:
    # nothing downstream reads them. The last column stays, since its nulls reveal short rows.
    specs = every if counters is None else [
        s for s in every if (s.kind != "counter" and s.name in BASE_SCHEMA
                             and s.name not in REPORT_ONLY)
        or s.name in counters or s is every[-1]]
    try:
        try:
            frame = _collect_fast(path, specs, eol, native=True)
        except _Ragged:
            frame = _collect_fast(path, specs, eol, native=False)
        raw = None
    except _Ragged:
        raw = read_text_frame(path, cols, eol)
        frame = clean_by_value(raw.select(frame_exprs(specs, ragged=True, width=len(every))),
                               specs)
    # Filters copy every column: on a clean 1M-row export most of them drop nothing, so each
    # runs only when its mask holds a row.
    frame = _keep(frame, ~frame["__blank"]).drop("__blank", "__lastnull", strict=False)
    rows_read = frame.height
    if rows_read == 0:
        raise InputError("no data rows (header only)", path=str(path))
    frame, duplicates = _drop_duplicates(flag_bad(frame, specs))

    bad_lines = frame["row"].filter(frame["__bad"])
    memsets = int((frame["__memset"] & ~frame["__bad"]).sum())
    good = _keep(frame, ~(frame["__bad"] | frame["__memset"])).drop("__bad", "__memset")
    good = good.with_columns(pl.lit(source).alias("source"))
    samples = _explain(path, source, specs, bad_lines.head(samples_kept).to_list(), raw,
                       width=len(every), eol=eol)
    notes = []
    if duplicates:
        notes.append(f"{source}: {duplicates} exact duplicate row(s) dropped")
    if memsets:
        notes.append(f"{source}: {memsets} MemSet helper kernel(s) excluded")
    result = ReadResult(conform(good), rows_read=rows_read, skipped=bad_lines.len(),
                        samples=samples, notes=notes)
    result.meta["columns"] = [C.clean_header(c) for c in cols]
    return result


# ---------------------------------------------------------------- reading

def probe(path: Path, max_columns: int) -> str:
    """The line ending (LF/CRLF, or CR alone) from the first bytes, and a header a kernel table
    can have: a file that is one endless line or has thousands of columns is refused here,
    before a parser spends minutes and gigabytes on it."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_PROBE_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None
    if not head.strip(b" \t\r\n\f\v\xef\xbb\xbf"):
        raise InputError("empty file", path=str(path))
    eol = "\n" if b"\n" in head or b"\r" not in head else "\r"
    end = head.find(eol.encode())
    fields = head[:end if end >= 0 else len(head)].count(b",") + 1
    if fields > max_columns:
        raise InputError(f"{fields:,}{'+' if end < 0 else ''} columns in the header: not a "
                         f"kernel table (real exports have under 100; profiling.max_columns is "
                         f"{max_columns})", path=str(path))
    if end < 0 and len(head) == _PROBE_BYTES:
        raise InputError(f"no line end in the first {_PROBE_BYTES // 1024} KiB: not a kernel "
                         "table", path=str(path))
    return eol


def _read_sample(path: Path, eol: str) -> pl.DataFrame:
    """The header and first rows as text; InputError for a missing/empty/non-CSV file.

    Parsed from the file's first whole lines (at most _SAMPLE_BYTES): handing polars the path
    with `n_rows` maps the whole file first, which costs more than the sample on a 1M-row one.
    """
    try:
        df = pl.read_csv(_head_lines(path, eol), n_rows=_SAMPLE_ROWS, truncate_ragged_lines=True,
                         raise_if_empty=True, eol_char=eol, **_READ)
    except pl.exceptions.NoDataError:
        raise InputError("empty file", path=str(path)) from None
    except _POLARS_ERRORS:
        df = read_with_csv_module(path, limit=_SAMPLE_ROWS).drop(_LINE, _FIELDS)
    if df.width == 0:
        raise InputError("empty file", path=str(path))
    return df


def _head_lines(path: Path, eol: str) -> Path | io.BytesIO:
    """The first whole lines of the file in memory, or the path when no line ends in the
    first _SAMPLE_BYTES (a long header line: let the parser judge it) or the file is small."""
    if path.stat().st_size <= _SAMPLE_BYTES:
        return path
    with open(path, "rb") as fh:
        head = fh.read(_SAMPLE_BYTES)
    end = head.rfind(eol.encode())
    return io.BytesIO(head[:end + 1]) if end > 0 else path


def _collect_fast(path: Path, specs: list[Spec], eol: str, native: bool) -> pl.DataFrame:
    """One lazy pass: scan, cast, flag. Raises _Ragged when rows have a different width.

    `native`: let the CSV parser read clean numeric columns as Float64 directly (no string
    per cell; the fastest path). Any garbage cell then fails the whole read, and the caller
    retries with text columns, where damage is counted per row.
    """
    overrides = {s.col: (pl.Int64 if s.kind == "int" else pl.Float64)
                 for s in specs[:-1] if is_native(s)} if native else {}
    # N/A -> null in the parser, except in the last column, whose nulls reveal short rows
    nulls = {s.col: "N/A" for s in specs[:-1]} if native else None
    chosen = [replace(s, kind=s.kind + "@native") if s.col in overrides
              else replace(s, kind=s.kind + "@nulled") if native and s.kind == "text" and not s.trim
              and s is not specs[-1] else s for s in specs]
    # the signature columns parsed as categories (each distinct text stored once), cleaned per
    # distinct value after the read (csv_columns.clean_by_value)
    overrides.update({s.col: pl.Categorical for s in chosen if by_value(s)})
    lf = pl.scan_csv(path, row_index_name=_LINE, row_index_offset=2, schema_overrides=overrides,
                     null_values=nulls, eol_char=eol, **_READ)
    try:
        frame = lf.select(frame_exprs(chosen, ragged=False)).collect(engine="streaming")
    except pl.exceptions.ComputeError as exc:
        raise _Ragged() from exc
    except _POLARS_ERRORS as exc:
        raise _Ragged() from exc
    if frame.width and frame["__lastnull"].any():
        raise _Ragged()
    frame = clean_by_value(frame, chosen)
    return frame if frame["row"].is_sorted() else frame.sort("row")


def _keep(frame: pl.DataFrame, mask: pl.Series) -> pl.DataFrame:
    """frame.filter(mask), without the copy when the mask keeps every row."""
    return frame if mask.all() else frame.filter(mask)


def _drop_duplicates(frame: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Exact duplicate rows (the mstt pipe sample has them): keep the first.

    Equal start times (rare: same ns on two streams) find candidates; only then are whole
    rows compared.
    """
    start = frame["start_ns"]
    # A sorted column has its equal values side by side: one diff. Otherwise count distinct
    # values (nulls count once, so two nulls tie, as is_duplicated says; ~10x cheaper than
    # is_duplicated, which builds a row mask: 0.005-0.015 s against 0.054 s on 1M rows).
    tied = (start.diff() == 0).any() if start.is_sorted() else start.n_unique() < start.len()
    if not tied:
        return frame, 0
    data = [c for c in frame.columns if c not in ("row", "__bad", "__memset")]
    first = frame.select(pl.struct(data).is_first_distinct()).to_series()
    kept = frame.filter(first)
    return kept, frame.height - kept.height


def _explain(path: Path, source: str, specs: list[Spec], lines: list[int],
             raw: pl.DataFrame | None, width: int, eol: str) -> list[str]:
    """`file:line: why` for the first bad rows (re-reads just those lines when needed)."""
    if not lines:
        return []
    if raw is None:
        try:
            raw = (pl.scan_csv(path, row_index_name=_LINE, row_index_offset=2,
                               truncate_ragged_lines=True, eol_char=eol, **_READ)
                   .filter(pl.col(_LINE).is_in(lines)).collect())
        except _POLARS_ERRORS:
            return [f"{source}:{line}: damaged row" for line in lines]
    else:
        raw = raw.filter(pl.col(_LINE).is_in(lines))
    checks = [flag.alias(f"bad:{i}") for i, (_, flag) in enumerate(cell_flags(specs))]
    labels = [c for c, _ in cell_flags(specs)]
    extra = [pl.col(_FIELDS)] if _FIELDS in raw.columns else []
    table = raw.select(pl.col(_LINE), *extra, *checks, *[pl.col(c) for c in labels
                                                        if c in raw.columns])
    out = []
    for rec in table.iter_rows(named=True):
        fields = rec.get(_FIELDS)
        if fields is not None and fields != width:
            why = f"{fields} fields, header has {width}"
        else:
            k = next((i for i in range(len(labels)) if rec.get(f"bad:{i}")), None)
            why = "damaged row" if k is None else \
                f"bad {C.clean_header(labels[k])} {str(rec.get(labels[k], ''))[:40]!r}"
        out.append(f"{source}:{rec[_LINE]}: {why}")
    return out
