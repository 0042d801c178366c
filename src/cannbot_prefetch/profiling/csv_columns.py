"""How each column of a CSV kernel table is read: the header mapped to normalized names, a plan
per column decided from a sample of the first rows (trim quotes/TABs? a text extra or a counter?),
and the polars expressions that cast each cell once and flag the rows a damaged cell makes
unusable. Separate from csv_reader.py, which reads files and judges what the flags found.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ..errors import InputError
from . import columns as C
from .csv_ragged import FIELDS as _FIELDS
from .csv_ragged import LINE as _LINE
from .readout import memset_mask
from .scalars import MAX_DURATION_US
from .cells import (NULL_TOKENS, clean_text, strip_prefix, to_float, to_int,
                     us_text_to_ns)


@dataclass(frozen=True)
class Spec:
    """How one source column becomes one normalized column."""

    col: str      # header as polars names it
    name: str     # normalized name
    kind: str     # text | int | float | counter | start
    trim: bool    # values need quotes/whitespace trimmed before casting



def map_headers(header: list[str], path: Path) -> dict[str, tuple[str, str]]:
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
            while name in taken or name in C.ALIASES or name in ("row", "source", "stack"):
                name += "_2"
            mapping[h] = (name, "counter")
            taken.add(name)
    missing = [c for c in C.REQUIRED if c not in taken]
    if missing:
        wanted = " / ".join("|".join(C.ALIASES[m][0][:2]) for m in missing)
        raise InputError(f"not a kernel table: required column(s) missing: {wanted}",
                         path=str(path), hint="expected kernel_details.csv or op_summary_*.csv")
    return mapping


def plan_columns(sample: pl.DataFrame, mapping: dict[str, tuple[str, str]]) -> list[Spec]:
    """Per column: does it need trimming, and is an unknown column numeric (a counter)?"""
    numeric = [h for h, (_, kind) in mapping.items() if kind in ("int", "float", "counter")]
    stats = sample.select(
        [clean_text(pl.col(h)).is_not_null().sum().alias(f"n{i}") for i, h in enumerate(numeric)]
        + [to_float(clean_text(pl.col(h))).is_not_null().sum().alias(f"c{i}")
           for i, h in enumerate(numeric)]
        + [to_float(pl.col(h)).is_not_null().sum().alias(f"f{i}") for i, h in enumerate(numeric)]
    ).row(0, named=True) if numeric else {}
    texts = [h for h, (_, kind) in mapping.items() if kind == "text"]
    needs_trim = sample.select(
        [(clean_text(pl.col(h)).fill_null("") != pl.col(h).fill_null("")).any().alias(h)
         for h in texts]).row(0, named=True) if texts else {}
    specs = []
    for h, (name, kind) in mapping.items():
        trim = kind == "start" or bool(needs_trim.get(h))
        if h in numeric:
            i = numeric.index(h)
            present, cleaned, fast = stats[f"n{i}"], stats[f"c{i}"], stats[f"f{i}"]
            if kind == "counter" and cleaned * 2 < present:
                kind, trim = "text", True   # a text extra of a newer export, not a counter
            else:
                trim = cleaned > fast
        specs.append(Spec(h, name, kind, trim))
    return specs


# ---------------------------------------------------------------- expressions

def frame_exprs(specs: list[Spec], ragged: bool, width: int = 0) -> list[pl.Expr]:
    """Typed columns plus cheap per-cell presence masks and row flags (__blank, __lastnull).

    Casting is the expensive part, so each cell is cast once; whether a null result was a
    damaged cell is decided afterwards from the masks (`flag_bad`). The signature columns
    (`by_value`) come out as read: `clean_by_value` cleans them on the collected frame.
    """
    cols = [s.col for s in specs]
    first, last = cols[0], cols[-1]
    name_col = next(s.col for s in specs if s.name == "name")
    present = [(pl.col(s.col).is_not_null() & (pl.col(s.col) != "N/A")).alias(f"__p:{s.name}")
               for s in specs if s.kind in ("int", "float", "counter")]
    out = [pl.col(_LINE).cast(pl.Int64).alias("row"),
           *[(pl.col(s.col) if by_value(s) else typed(s)).alias(s.name) for s in specs],
           *present,
           pl.all_horizontal(pl.col([first, last, name_col]).is_null()).alias("__blank"),
           _memset(specs),
           (pl.col(last).is_null() & pl.col(first).is_not_null()).alias("__lastnull")]
    if ragged:
        out.append((pl.col(_FIELDS).fill_null(width) != width).alias("__ragged"))
    return out


# The columns that spell an op's signature (shapes, dtypes, formats): a kernel table repeats a
# handful of distinct values in them (one per signature; the 1M-row benchmark table has 9 input
# shapes), so they are parsed as categories and cleaned (quotes, null tokens, the DT_/FORMAT_
# prefixes) once per distinct value, not once per row: the 1M-row table's load 1.41 -> 1.31 s
# CPU (in-process, 4 x 3 interleaved runs; issue 34).
BY_VALUE = frozenset((*C.SHAPE_COLUMNS, *C.DTYPE_COLUMNS, *C.FORMAT_COLUMNS))


def by_value(spec: Spec) -> bool:
    """A signature column whose text `typed` changes: cleaned by `clean_by_value`."""
    return (spec.name in BY_VALUE and spec.kind.startswith("text")
            and not typed(spec).meta.eq(pl.col(spec.col)))


def clean_by_value(frame: pl.DataFrame, specs: list[Spec]) -> pl.DataFrame:
    """The `by_value` columns of a frame `frame_exprs` built from the same specs, as read
    (categorical or text), -> text: `typed` applied to each distinct value, gathered back per
    row. The same values as `typed` per row, since it is elementwise and a null stays null."""
    out = []
    for s in specs:
        if by_value(s) and s.name in frame.columns:
            table, codes = _distinct(frame[s.name])
            clean = table.rename(s.col).to_frame().select(typed(s).alias(s.name))[s.name]
            out.append(clean.gather(codes))
    return frame.with_columns(out) if out else frame


def _distinct(raw: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(a text table holding every value of the column, each row's position in it; null for a
    null). A categorical column's own codes index the table when it is no longer than the
    column (its categories may be shared with other columns of the process); otherwise the
    distinct values are the table."""
    distinct = raw.unique().drop_nulls()
    if raw.dtype == pl.Categorical and distinct.len():
        codes = distinct.to_physical()
        size = int(codes.max()) + 1
        if size <= raw.len():
            table = pl.Series([None] * size, dtype=pl.Utf8).scatter(codes, distinct.cast(pl.Utf8))
            return table, raw.to_physical()
    distinct = distinct.cast(pl.Utf8)
    return distinct, raw.cast(pl.Utf8).cast(pl.Enum(distinct)).to_physical()


def _memset(specs: list[Spec]) -> pl.Expr:
    by_name = {s.name: s for s in specs}
    type_ = typed(by_name["type"]) if "type" in by_name else None
    return memset_mask(typed(by_name["name"]), type_).alias("__memset")


def flag_bad(frame: pl.DataFrame, specs: list[Spec]) -> pl.DataFrame:
    """Add `__bad` (row unusable) and drop the masks; runs on the typed frame, no recasting."""
    flags = [pl.col(s.name).is_null() for s in specs if s.name in C.REQUIRED]
    flags += [pl.col(s.name) < 0 for s in specs if s.name in C.REQUIRED and s.kind != "text"]
    flags += [pl.col("dur_us") > MAX_DURATION_US]
    flags += [pl.col(f"__p:{s.name}") & pl.col(s.name).is_null()
              for s in specs if f"__p:{s.name}" in frame.columns and s.name not in C.REQUIRED]
    # inf / nan ("1e400", "nan") parse as floats but are no measurement
    flags += [~pl.col(s.name).is_finite().fill_null(True)
              for s in specs if frame.schema.get(s.name) == pl.Float64]
    if "__ragged" in frame.columns:
        flags.append(pl.col("__ragged"))
    masks = [c for c in frame.columns if c.startswith("__p:") or c == "__ragged"]
    return frame.with_columns(pl.any_horizontal(flags).alias("__bad")).drop(masks)


def is_native(spec: Spec) -> bool:
    return spec.kind in ("int", "float", "counter") and not spec.trim


def _text(spec: Spec) -> pl.Expr:
    if spec.trim:
        return clean_text(pl.col(spec.col))
    col = pl.col(spec.col)
    if spec.kind == "text":  # N/A may first appear after the sample (HCCL rows)
        return pl.when(~col.is_in(NULL_TOKENS)).then(col)
    return col


def typed(spec: Spec) -> pl.Expr:
    if spec.kind.endswith(("@native", "@nulled")):  # typed / N/A-nulled by the parser already
        return _strip_known_prefix(spec, pl.col(spec.col))
    if spec.kind == "start":   # trims itself; no null token parses as a decimal
        return us_text_to_ns(pl.col(spec.col))
    text = _text(spec)
    if spec.kind == "int":
        return to_int(text)
    if spec.kind in ("float", "counter"):
        return to_float(text)
    return _strip_known_prefix(spec, text)


def _strip_known_prefix(spec: Spec, text: pl.Expr) -> pl.Expr:
    if spec.name in C.DTYPE_COLUMNS:
        return strip_prefix(text, "DT_")
    if spec.name in C.FORMAT_COLUMNS:
        return strip_prefix(text, "FORMAT_")
    return text


def cell_flags(specs: list[Spec]) -> list[tuple[str, pl.Expr]]:
    """(column, expression true where that cell makes the row unusable)."""
    out = []
    for s in specs:
        value = typed(s)
        if s.name in C.REQUIRED:
            bad = value.is_null()
            if s.kind != "text":
                bad = bad | (value < 0)
            if s.name == "dur_us":
                bad = bad | (value > MAX_DURATION_US)
            if s.kind in ("float", "counter"):
                bad = bad | ~value.is_finite().fill_null(True)
        elif s.kind in ("int", "float", "counter"):
            present = pl.col(s.col).is_not_null() & ~_text(s).is_in(NULL_TOKENS)
            bad = present & (value.is_null() | ~value.is_finite().fill_null(True))
        else:
            continue
        out.append((s.col, bad))
    return out
