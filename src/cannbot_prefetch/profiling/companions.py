"""Companion files beside a kernel table: where they are (`find_companions`: step times, L2 hit
rates, the trace_view.json with call stacks) and the readers of per-step times and per-kernel
L2 hit rates.

The report stage compares steps and reads L2 behaviour; these readers return small frames with
normalized column names, or None when the file is absent or unusable (companions are optional,
so their damage never stops an analysis).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .columns import counter_name
from .cells import clean_text

# Layouts whose kernel table borrows call stacks from the trace_view.json beside it (load.py)
BORROWS_STACKS = frozenset({"ascend_pt", "kernel_csv"})
_NAMES = {"step_trace_time": "step_trace_time.csv", "l2_cache": "l2_cache.csv",
          "trace_view": "trace_view.json"}


def find_companions(unit) -> dict:
    """{"root", "step_trace_time", "l2_cache", "trace_view"}: paths found for a discovered unit."""
    root = Path(unit.root)
    out: dict = {"root": str(root)}
    for base in _bases(root, [Path(f) for f in unit.files]):
        for key, name in _NAMES.items():
            if key not in out and (base / name).is_file():
                out[key] = str(base / name)
    return out


def _bases(root: Path, files: list[Path]) -> list[Path]:
    bases = [f.parent for f in files] + [root, root / "ASCEND_PROFILER_OUTPUT",
                                         root / "mindstudio_profiler_output"]
    seen, out = set(), []
    for b in bases:
        if b not in seen:
            seen.add(b)
            out.append(b)
    return out


def _locate(profile_root, name: str) -> Path | None:
    p = Path(profile_root)
    if p.is_file():
        return p if p.name == name else (p.parent / name if (p.parent / name).is_file() else None)
    for base in (p, p / "ASCEND_PROFILER_OUTPUT", p / "mindstudio_profiler_output"):
        if (base / name).is_file():
            return base / name
    return None


def _read_text_csv(path: Path) -> pl.DataFrame | None:
    try:
        df = pl.read_csv(path, infer_schema=False, encoding="utf8-lossy", truncate_ragged_lines=True)
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None
    if df.height == 0:
        return None
    return df.rename({c: counter_name(c) for c in df.columns})


def read_step_times(profile_root) -> pl.DataFrame | None:
    """step_trace_time.csv -> one row per step: `step` (Int64) and times in µs (Float64).

    Columns: step, computing, communication_not_overlapped, overlapped, communication, free,
    stage, bubble, ... (whatever the export has, names normalized).
    """
    path = _locate(profile_root, "step_trace_time.csv")
    df = _read_text_csv(path) if path else None
    if df is None or "step" not in df.columns:
        return None
    casts = [clean_text(pl.col("step")).cast(pl.Int64, strict=False).alias("step")]
    casts += [clean_text(pl.col(c)).cast(pl.Float64, strict=False).alias(c)
              for c in df.columns if c not in ("step", "type", "index")]
    return df.with_columns(casts)


def read_l2_cache(profile_root) -> pl.DataFrame | None:
    """l2_cache.csv -> stream (text), task_id, hit_rate, victim_rate (Float64, null for N/A), name."""
    path = _locate(profile_root, "l2_cache.csv")
    df = _read_text_csv(path) if path else None
    if df is None:
        return None
    renames = {"stream_id": "stream", "op_name": "name"}
    df = df.rename({k: v for k, v in renames.items() if k in df.columns})
    casts = []
    for col in df.columns:
        text = clean_text(pl.col(col))
        if col == "task_id":
            casts.append(text.cast(pl.Int64, strict=False).alias(col))
        elif col in ("stream", "name"):
            casts.append(text.alias(col))
        else:
            casts.append(text.cast(pl.Float64, strict=False).alias(col))
    return df.with_columns(casts)
