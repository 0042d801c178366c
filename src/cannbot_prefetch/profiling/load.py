"""Stage 1 entry point: `load_profile(path)` -> Profile(KernelTable, ProfileInfo, extras).

discover (which files) -> read (csv | db | trace) -> judge the damage -> metadata -> steps.
Damage is counted, not fatal, until it passes the policy's share of bad rows.
"""

from __future__ import annotations

import contextlib

from pathlib import Path

import polars as pl

from ..errors import InputError
from ..i18n import said
from ..policy import Policy
from . import columns as C
from .companions import BORROWS_STACKS, find_companions
from .csv_reader import read_csv_rows
from .db_reader import read_db_rows
from .discover import Discovery, Unit, discover
from .limits import Limits
from .metadata import LEVEL0_NOTE, Meta, infer_level, read_meta
from .readout import ReadResult
from .stacks import attach_trace_stacks
from .steps import select_steps
from .table import A1_MARKER, MEMORY_COUNTERS, PIPE_COUNTERS, KernelTable, Profile, ProfileInfo

ANALYSIS_COUNTERS = (frozenset(PIPE_COUNTERS) | frozenset(MEMORY_COUNTERS) | {A1_MARKER}
                     | {c for c, _ in C.METRIC_FINGERPRINTS})


def load_profile(path, rank: int | None = None, run: str | None = None, step: int | None = None,
                 steps: tuple[int, int] | None = None, include_warmup: bool = False,
                 counters: str = "all", policy: Policy | None = None) -> Profile:
    """Read any supported profiling export into the normalized kernel table.

    `rank` picks one of several `*_ascend_pt` folders (default lowest), `run` one msprof
    counter-group run (default PipeUtilization), `step`/`steps` (inclusive) the steps; by
    default the first of several steps is excluded as warm-up. `counters="analysis"` keeps
    only the counters the analysis reads (table.PIPE_COUNTERS and the group fingerprints),
    which makes a large CSV read markedly cheaper; the default keeps every counter.
    `policy`: the run's (bad rows, input bounds, warm-up); None: the shipped one.
    """
    if counters not in ("all", "analysis"):
        raise ValueError(f"counters must be 'all' or 'analysis', not {counters!r}")
    user_path = str(path)
    if not user_path.strip():   # Path("") is the current folder: never analyse that by accident
        raise InputError("the profile path is empty", hint="name a profile folder or file")
    disc = discover(Path(path).expanduser(), rank=rank, run=run)
    pol = policy or Policy.load()
    bad_rows = pol.get("bad_rows", {})
    samples_kept = int(bad_rows.get("samples_kept", 5))
    keep = ANALYSIS_COUNTERS if counters == "analysis" else None
    limits = Limits.of(pol)
    result = _read(disc.unit, samples_kept, keep, limits)
    _judge(result, disc.unit, float(bad_rows.get("max_fraction", 0.10)))

    df = result.df
    meta = read_meta(_meta_root(disc.unit), disc.search_root)
    meta.fill(**{k: result.meta.get(k) for k in ("soc", "freq_mhz", "rank")})
    layout = _layout(disc, result)
    notes = list(disc.notes) + result.notes
    _settle_level(meta, df, layout, notes)

    extras = find_companions(disc.unit)
    if layout in BORROWS_STACKS and extras.get("trace_view") \
            and df["stack"].null_count() == df.height:
        df = _borrow_stacks(df, Path(extras["trace_view"]), limits, notes)

    exclude_first = bool(pol.get("steps", {}).get("exclude_first_as_warmup", True))
    chosen = select_steps(df, user_path, step=step, steps=steps, include_warmup=include_warmup,
                          exclude_first=exclude_first)
    notes.extend(chosen.notes)
    if chosen.df.height == 0:
        raise InputError("no kernels left after step selection", path=user_path)

    info = ProfileInfo(
        path=user_path, layout=layout, files=tuple(str(f) for f in disc.unit.files),
        level=meta.level, aic_metrics=meta.aic_metrics,
        rank=disc.rank if disc.rank is not None else meta.rank, ranks=disc.ranks,
        run=disc.run, runs=disc.runs, steps=chosen.kept, steps_available=chosen.available,
        warmup_excluded=chosen.warmup_excluded, rows=chosen.df.height,
        rows_skipped=result.skipped, skipped_samples=tuple(result.samples[:samples_kept]),
        soc=meta.soc, cube_cores=meta.cube_cores, vector_cores=meta.vector_cores,
        freq_mhz=meta.freq_mhz, notes=tuple(notes),
        chip_class="A1" if A1_MARKER in chosen.df.columns else None)
    return Profile(table=KernelTable(chosen.df), info=info, extras=extras)


def _borrow_stacks(df: pl.DataFrame, trace: Path, limits: "Limits",
                   notes: list[str]) -> pl.DataFrame:
    """Stacks from the trace_view.json beside a kernel table, unless it is too big to parse."""
    size = trace.stat().st_size
    if size > limits.trace_bytes:
        notes.append(f"trace_view.json is {size / 1e6:.0f} MB (> {limits.trace_bytes / 1e6:.0f} "
                     "MB, profiling.max_trace_mb): call stacks not attached; export fewer steps")
        return df
    with _unicode_checked(trace):
        df, attached = attach_trace_stacks(df, trace, limits.trace_bytes)
    if attached:
        notes.append(said("said.stacks_attached", n=attached))
    return df


@contextlib.contextmanager
def _unicode_checked(path: Path):
    """A JSON string may escape half a surrogate pair (`"\\udc80"`): Python's decoder keeps it,
    no column can hold it. An input error naming the file, not an internal one."""
    try:
        yield
    except UnicodeEncodeError as exc:
        raise InputError(f"holds a string that is not valid Unicode ({exc.reason}: "
                         f"{exc.object[exc.start:exc.end]!r}); not a trace the profiler wrote",
                         path=str(path)) from None


def _read(unit: Unit, samples_kept: int, keep: frozenset[str] | None,
          limits: "Limits") -> ReadResult:
    if unit.layout == "ascend_pt_db":
        limits.check_size(unit.files[0], limits.table_bytes, "profiling.max_table_mb")
        return read_db_rows(unit.files[0], _source(unit, unit.files[0]))
    if unit.layout == "trace_view":
        from .trace_reader import read_trace_rows  # json parsing only when a trace is read
        limits.check_size(unit.files[0], limits.trace_bytes, "profiling.max_trace_mb")
        with _unicode_checked(unit.files[0]):
            return read_trace_rows(unit.files[0], _source(unit, unit.files[0]), limits.trace_bytes)
    for f in unit.files:
        limits.check_size(f, limits.table_bytes, "profiling.max_table_mb")
    parts = [read_csv_rows(f, _source(unit, f), samples_kept, keep, limits.columns)
             for f in unit.files]
    if len(parts) == 1:
        return parts[0]
    merged = ReadResult(pl.concat([p.df for p in parts], how="diagonal_relaxed"),
                        rows_read=sum(p.rows_read for p in parts),
                        skipped=sum(p.skipped for p in parts),
                        samples=[s for p in parts for s in p.samples],
                        notes=[n for p in parts for n in p.notes])
    merged.notes.append(f"{len(parts)} op_summary slices concatenated")
    merged.meta["columns"] = parts[0].meta.get("columns", [])
    return merged


def _source(unit: Unit, f: Path) -> str:
    try:
        return str(f.relative_to(unit.root))
    except ValueError:
        return f.name


def _judge(result: ReadResult, unit: Unit, max_fraction: float) -> None:
    """Too much damage, or nothing left: unusable input (exit 2), with file:row samples."""
    where = str(unit.files[0]) if len(unit.files) == 1 else str(unit.root)
    seen = max(result.rows_read, 1)
    share = result.skipped / seen
    examples = "; ".join(result.samples[:3])
    if result.df.height == 0:
        why = f"no usable rows ({result.skipped} of {result.rows_read} damaged"
        raise InputError(why + (f": {examples})" if examples else ")"), path=where)
    if share > max_fraction:
        raise InputError(f"{result.skipped} of {result.rows_read} rows damaged "
                         f"({share:.0%} > {max_fraction:.0%} allowed): {examples}", path=where)


def _meta_root(unit: Unit) -> Path:
    root = unit.root
    if unit.kind == "file" and root.name == "ASCEND_PROFILER_OUTPUT":
        return root.parent
    return root


def _layout(disc: Discovery, result: ReadResult) -> str:
    if disc.runs:
        return "msprof_group"
    flavour = result.meta.get("flavour")
    if flavour:
        return flavour
    return disc.unit.layout


def _settle_level(meta: Meta, df: pl.DataFrame, layout: str, notes: list[str]) -> None:
    """Level and counter group from metadata, else from what the table holds."""
    if meta.aic_metrics is None:
        meta.aic_metrics = C.metrics_from_columns(df.columns)
    if layout == "torch_trace":
        return
    has_type = df["type"].null_count() < df.height
    has_shapes = df["input_shapes"].null_count() < df.height
    if meta.level is None and layout != "trace_view":
        meta.level = infer_level(has_type, has_shapes)
    if meta.level == "Level0" or (layout != "trace_view" and not has_type and not has_shapes):
        meta.level = "Level0"
        notes.append(LEVEL0_NOTE)
