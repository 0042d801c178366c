"""kernel_details.csv / op_summary_*.csv -> normalized rows, with polars and no row loops.

Everything is read as text (`infer_schema=False`) and cast afterwards, so one bad cell costs
one row, not the file. Damaged rows (ragged, non-numeric, unparseable start time) are dropped
and counted with `file:line` samples; the caller decides whether what is left is usable.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl

from ..errors import InputError
from . import columns as C
from .readout import ReadResult, conform, drop_memset
from .values import clean_text, strip_prefix, to_float, to_int, us_text_to_ns

_LINE = "__line"
_FIELDS = "__fields"
_POLARS_ERRORS = (pl.exceptions.PolarsError, OSError, ValueError)


def read_csv_rows(path: Path, source: str, samples_kept: int) -> ReadResult:
    """One CSV export -> ReadResult with BASE_SCHEMA columns plus counters and extras."""
    raw = _read_text_frame(path)
    header = [C.clean_header(h) for h in raw.columns if h not in (_LINE, _FIELDS)]
    mapping = _map_headers(header, path)
    data_cols = [c for c in raw.columns if c not in (_LINE, _FIELDS)]
    raw = raw.rename(dict(zip(data_cols, header)))

    # Blank lines come back as all-null rows: not data, not damage.
    raw = raw.filter(~pl.all_horizontal(pl.col(header).is_null()))
    rows_read = raw.height
    if rows_read == 0:
        raise InputError("no data rows (header only)", path=str(path))

    bad_reasons: list[pl.Expr] = []
    if _FIELDS in raw.columns:
        bad_reasons.append(pl.when(pl.col(_FIELDS) != len(header))
                           .then(pl.format("{} fields, header has " + str(len(header)),
                                           pl.col(_FIELDS))))

    # Duplicate rows (the mstt pipe sample has them): keep the first, say how many.
    dup_mask = raw.select(pl.struct(header).is_first_distinct()).to_series()
    duplicates = int(rows_read - dup_mask.sum())
    if duplicates:
        raw = raw.filter(dup_mask)

    mapping = _settle_counter_kinds(raw, mapping)
    exprs, checks = _casts(mapping)
    bad_reasons.extend(checks)
    reason = pl.coalesce(bad_reasons) if bad_reasons else pl.lit(None, dtype=pl.Utf8)
    typed = raw.with_columns(reason.alias("__why")).select([pl.col(_LINE).alias("row"),
                                                            pl.col("__why"), *exprs])
    bad = typed.filter(pl.col("__why").is_not_null())
    samples = [f"{source}:{r}: {w}" for r, w in bad.head(samples_kept).select("row", "__why").rows()]
    good = typed.filter(pl.col("__why").is_null()).drop("__why")
    good = good.with_columns(pl.lit(source).alias("source"))
    good, memsets = drop_memset(good)

    notes = []
    if duplicates:
        notes.append(f"{source}: {duplicates} exact duplicate row(s) dropped")
    if memsets:
        notes.append(f"{source}: {memsets} MemSet helper kernel(s) excluded")
    result = ReadResult(conform(good), rows_read=rows_read, skipped=bad.height, samples=samples,
                        notes=notes)
    result.meta["columns"] = header
    return result


def _read_text_frame(path: Path) -> pl.DataFrame:
    """All cells as text plus `__line` (1-based file line) and, when rows are ragged, `__fields`."""
    try:
        if path.stat().st_size == 0:
            raise InputError("empty file", path=str(path))
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None
    kwargs = dict(infer_schema=False, encoding="utf8-lossy", raise_if_empty=True)
    try:
        try:
            df = pl.read_csv(path, **kwargs)
            ragged = df.width > 0 and df.height > 0 and df[df.columns[-1]].null_count() > 0
        except pl.exceptions.ComputeError as exc:
            if "fields" not in str(exc):
                raise
            df, ragged = pl.read_csv(path, truncate_ragged_lines=True, **kwargs), True
    except pl.exceptions.NoDataError:
        raise InputError("empty file", path=str(path)) from None
    except _POLARS_ERRORS:
        return _read_with_csv_module(path)
    if df.width == 0:
        raise InputError("empty file", path=str(path))
    if not ragged:
        return df.with_row_index(_LINE, offset=2).with_columns(pl.col(_LINE).cast(pl.Int64))
    counts = _field_counts(path)
    if counts is None or counts.len() != df.height:
        return _read_with_csv_module(path)
    return df.with_columns(counts, pl.int_range(2, df.height + 2, dtype=pl.Int64).alias(_LINE))


def _field_counts(path: Path) -> pl.Series | None:
    """Quote-aware field count of every data line (null for blank lines), vectorized."""
    try:
        lines = pl.read_csv(path, has_header=False, separator="\x1f", quote_char=None,
                            infer_schema=False, truncate_ragged_lines=True,
                            encoding="utf8-lossy", new_columns=["l"])
    except _POLARS_ERRORS:
        return None
    body = lines["l"].slice(1)
    unquoted = body.str.replace_all(r'"[^"]*"', "")
    return (unquoted.str.count_matches(",") + 1).cast(pl.Int64).alias(_FIELDS)


def _read_with_csv_module(path: Path) -> pl.DataFrame:
    """Fallback for files polars refuses (stray quotes): lenient, exact line numbers, slow."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        raise InputError("empty file", path=str(path)) from None
    width = len(header)
    cols: list[list[str | None]] = [[] for _ in range(width)]
    lines, fields = [], []
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            break
        except csv.Error:
            rec = ["<unparseable>"]
        if not rec:
            continue
        lines.append(reader.line_num)
        fields.append(len(rec))
        for i in range(width):
            cols[i].append(rec[i] if i < len(rec) and rec[i] != "" else None)
    names = _dedupe([h if h else f"column_{i + 1}" for i, h in enumerate(header)])
    data = {n: pl.Series(n, c, dtype=pl.Utf8) for n, c in zip(names, cols)}
    data[_LINE] = pl.Series(_LINE, lines, dtype=pl.Int64)
    data[_FIELDS] = pl.Series(_FIELDS, fields, dtype=pl.Int64)
    return pl.DataFrame(data)


def _dedupe(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        out.append(n if k == 0 else f"{n}_duplicated_{k - 1}")
        seen[n] = k + 1
    return out


def _map_headers(header: list[str], path: Path) -> dict[str, tuple[str, str]]:
    """header -> (normalized name, kind); raises when a required column is missing."""
    mapping: dict[str, tuple[str, str]] = {}
    taken: set[str] = set()
    for h in header:
        canon = C.canonical(h)
        if canon and canon not in taken:
            mapping[h] = (canon, C.ALIASES[canon][1])
            taken.add(canon)
        else:
            name = C.counter_name(h)
            while name in taken or name in C.ALIASES:
                name += "_2"
            mapping[h] = (name, "counter")
            taken.add(name)
    missing = [c for c in C.REQUIRED if c not in taken]
    if missing:
        wanted = " / ".join("|".join(C.ALIASES[m][0][:2]) for m in missing)
        raise InputError(f"not a kernel table: required column(s) missing: {wanted}",
                         path=str(path), hint="expected kernel_details.csv or op_summary_*.csv")
    return mapping


def _settle_counter_kinds(raw: pl.DataFrame, mapping: dict[str, tuple[str, str]]
                          ) -> dict[str, tuple[str, str]]:
    """Unknown columns are counters when mostly numeric, else kept as text (a newer export's
    extra text column must not turn every row into a 'non-numeric' one)."""
    unknown = [h for h, (_, kind) in mapping.items() if kind == "counter"]
    if not unknown:
        return mapping
    stats = raw.select(
        [clean_text(pl.col(h)).is_not_null().sum().alias(f"n{i}") for i, h in enumerate(unknown)]
        + [to_float(clean_text(pl.col(h))).is_not_null().sum().alias(f"f{i}")
           for i, h in enumerate(unknown)]).row(0, named=True)
    out = dict(mapping)
    for i, h in enumerate(unknown):
        if stats[f"f{i}"] * 2 < stats[f"n{i}"]:
            out[h] = (mapping[h][0], "text")
    return out


def _casts(mapping: dict[str, tuple[str, str]]) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """Typed column expressions, and per-row 'why bad' expressions (null when fine)."""
    exprs: list[pl.Expr] = []
    checks: list[pl.Expr] = []
    for header, (name, kind) in mapping.items():
        text = clean_text(pl.col(header))
        label = header.replace("{", "(").replace("}", ")")
        if kind == "start":
            value = us_text_to_ns(text)
            checks.append(pl.when(value.is_null())
                          .then(pl.format(f"bad {label} {{}}", pl.col(header).fill_null("<empty>"))))
        elif kind in ("float", "int", "counter"):
            value = to_int(text) if kind == "int" else to_float(text)
            if name in C.REQUIRED:
                bad = value.is_null() | (value < 0)
            else:
                bad = text.is_not_null() & value.is_null()
            checks.append(pl.when(bad).then(pl.format(f"non-numeric {label} {{}}",
                                                      pl.col(header).fill_null("<empty>"))))
        else:
            value = text
            if name in C.DTYPE_COLUMNS:
                value = strip_prefix(value, "DT_")
            elif name in C.FORMAT_COLUMNS:
                value = strip_prefix(value, "FORMAT_")
            elif name == "name":
                checks.append(pl.when(value.is_null()).then(pl.lit("empty Name")))
        exprs.append(value.alias(name))
    return exprs, checks
