"""Layout discovery: whatever path the user gives -> the one source to read, and what surrounds it.

A path can be a file, one profile (a torch_npu `*_ascend_pt` folder or an msprof `PROF_*`
folder), several ranks of one job, or an msprof group with one run per counter group. This
module only looks at names and headers; the readers do the parsing.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from . import columns as C
from .metadata import load_small_json

_MAX_DEPTH = 4
_SKIP_DIRS = {"__pycache__", ".git", "node_modules"}


@dataclass(frozen=True)
class Unit:
    """One profile: a torch_npu `*_ascend_pt` folder, an msprof `PROF_*` folder, or a lone file."""

    root: Path                # the profile folder (or the file's folder)
    kind: str                 # ascend_pt | msprof | file
    files: tuple[Path, ...]   # what to read, in order (msprof slices concatenated)
    layout: str               # ProfileInfo.layout of this source


@dataclass(frozen=True)
class Discovery:
    unit: Unit
    rank: int | None = None
    ranks: tuple[int, ...] = ()
    run: str | None = None
    runs: tuple[str, ...] = ()
    search_root: Path | None = None   # where to look for metadata a run itself lacks (group)
    notes: tuple[str, ...] = field(default_factory=tuple)


def discover(path: Path, rank: int | None = None, run: str | None = None) -> Discovery:
    """Resolve a user path to the profile to read; InputError when there is none."""
    if not path.exists():
        raise InputError("no such file or directory", path=str(path))
    if path.is_file():
        return Discovery(unit=file_unit(path))
    if not path.is_dir():
        raise InputError("is neither a regular file nor a folder (a FIFO or device would block "
                         "the reader): not a profile", path=str(path))
    units = find_units(path)
    if not units:
        raise InputError("no profile found here", path=str(path),
                         hint="expected a *_ascend_pt or PROF_* folder, kernel_details.csv, "
                              "op_summary_*.csv, ascend_pytorch_profiler_*.db or a trace JSON")
    pt = [u for u in units if u.kind == "ascend_pt"]
    if len(pt) > 1 or (pt and rank is not None):
        return _choose_rank(pt, rank, path)
    if len(units) == 1:
        if rank is not None and run is None:
            return _choose_rank(units, rank, path)
        return Discovery(unit=units[0])
    return _choose_run(units, run, path)


def file_unit(path: Path) -> Unit:
    """A single file: which reader by its name and (for CSV/JSON) its first bytes."""
    name = path.name.lower()
    if name.endswith(".db"):
        return Unit(path.parent, "file", (path,), "ascend_pt_db")
    if name.endswith((".json", ".json.gz")):
        return Unit(path.parent, "file", (path,), "trace_view")  # reader tells torch from Ascend
    if name.startswith("op_summary"):
        return Unit(path.parent, "file", (path,), "op_summary_csv")
    return Unit(path.parent, "file", (path,), "kernel_csv")


def find_units(path: Path, depth: int = 0) -> list[Unit]:
    """Every profile under `path`, not descending into a profile once found."""
    unit = _as_unit(path)
    if unit is not None:
        return [unit]
    if depth >= _MAX_DEPTH:
        return []
    found: list[Unit] = []
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS)
    except OSError:
        return []
    for child in children:
        found.extend(find_units(child, depth + 1))
    if not found:
        loose = _loose_file(path)
        if loose is not None:
            found.append(loose)
    return found


def _as_unit(path: Path) -> Unit | None:
    out = path / "ASCEND_PROFILER_OUTPUT"
    if out.is_dir() or list(path.glob("profiler_info*.json")):
        base = out if out.is_dir() else path
        for pattern, layout in (("kernel_details.csv", "ascend_pt"),
                                ("ascend_pytorch_profiler*.db", "ascend_pt_db"),
                                ("trace_view.json", "trace_view")):
            hits = _files(base.glob(pattern))
            if hits:
                return Unit(path, "ascend_pt", (hits[0],), layout)
        inner = [u for u in (_as_unit(p) for p in sorted(path.glob("PROF_*"))) if u]
        if inner:
            return Unit(path, "ascend_pt", inner[0].files, inner[0].layout)
        return None
    new = _files((path / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    if new:
        return Unit(path, "msprof", _order_slices(new), "msprof")
    devices = sorted(path.glob("device_*"), key=_device_number)
    for dev in devices:
        old = _files((dev / "summary").glob("op_summary_*.csv"))
        if old:
            return Unit(path, "msprof", _order_slices(old), "msprof_old")
    return None


def _files(paths) -> list[Path]:
    """Regular files only, sorted: a FIFO or device named like an export would block open()
    forever, a folder would fail it."""
    return sorted(p for p in paths if p.is_file())


def _loose_file(path: Path) -> Unit | None:
    for pattern in ("kernel_details*.csv", "op_summary*.csv", "ascend_pytorch_profiler*.db",
                    "trace_view.json", "*.pt.trace.json", "*.pt.trace.json.gz"):
        hits = _files(path.glob(pattern))
        if hits:
            return file_unit(hits[0])
    return None


def _order_slices(files: list[Path]) -> tuple[Path, ...]:
    """`op_summary_slice_<k>_<ts>.csv` in k order; a plain op_summary only when no slices."""
    slices = [f for f in files if f.name.startswith("op_summary_slice_")]
    if not slices:
        return (files[0],)

    def key(f: Path) -> tuple[int, str]:
        m = re.match(r"op_summary_slice_(\d+)", f.name)
        return (int(m.group(1)) if m else 0, f.name)
    return tuple(sorted(slices, key=key))


def _device_number(p: Path) -> int:
    m = re.search(r"(\d+)$", p.name)
    return int(m.group(1)) if m else 0


def unit_rank(unit: Unit) -> int | None:
    """rank_id from profiler_info, else a number in the folder name (`rank1_ascend_pt`)."""
    for info in _files(unit.root.glob("profiler_info*.json")):
        data = load_small_json(info)
        rank = data.get("rank_id") if isinstance(data, dict) else None
        if isinstance(rank, int) and rank >= 0:
            return rank
        m = re.search(r"profiler_info_(\d+)\.json$", info.name)
        if m:
            return int(m.group(1))
    m = re.search(r"rank[_-]?(\d+)", unit.root.name, re.IGNORECASE)
    return int(m.group(1)) if m else None


def discover_ranks(path: Path, run: str | None = None) -> list[tuple[int, Path]]:
    """Every rank of one job under `path` as (rank, what to load for it), rank order; `--rank
    all`. A single profile (one rank, one msprof group, one file) is a job of one rank."""
    if not path.exists():
        raise InputError("no such file or directory", path=str(path))
    if path.is_file():
        return [(0, path)]
    units = find_units(path)
    if not units:
        raise InputError("no profile found here", path=str(path))
    pt = [u for u in units if u.kind == "ascend_pt"]
    if len(pt) > 1:
        return [(r, u.root) for r, u in _numbered(pt, path)]
    if len(units) == 1:
        r = unit_rank(units[0])
        return [(r if r is not None else 0, units[0].root if units[0].kind != "file"
                 else units[0].files[0])]
    _choose_run(units, run, path)          # several msprof runs: one rank, run chosen on load
    return [(0, path)]


def _numbered(units: list[Unit], path: Path) -> list[tuple[int, Unit]]:
    """Units with their rank numbers, in rank order; InputError when numbers repeat."""
    numbered = []
    for i, u in enumerate(units):
        r = unit_rank(u)
        numbered.append((r if r is not None else i, u))
    numbered.sort(key=lambda t: t[0])
    ranks = [r for r, _ in numbered]
    if len(set(ranks)) != len(ranks):
        shown = ", ".join(str(u.root.relative_to(path)) if u.root != path else u.root.name
                          for _, u in numbered[:8])
        raise InputError(f"{len(numbered)} separate profiles found here, not the ranks of one "
                         f"job (rank numbers repeat): {shown}", path=str(path),
                         hint="pass one profile folder")
    return numbered


def empty_ranks(path: Path, depth: int = 0) -> list[tuple[int | None, Path, str]]:
    """torch_npu rank folders under `path` (an ASCEND_PROFILER_OUTPUT or a profiler_info json)
    that hold nothing the tool reads (no kernel_details.csv, profiler DB or trace_view.json):
    (rank, folder, what it holds). Real jobs leave such ranks (msinsight-st-qwen3-train: ranks 1
    and 3 kept only analysis.db and communication files)."""
    if not path.is_dir():
        return []
    out_dir = path / "ASCEND_PROFILER_OUTPUT"
    if out_dir.is_dir() or list(path.glob("profiler_info*.json")):
        if _as_unit(path) is not None:
            return []
        base = out_dir if out_dir.is_dir() else path
        try:
            held = sorted(f.name for f in base.iterdir() if f.is_file())
        except OSError:
            held = []
        what = (f"{base.name if base != path else path.name} holds only {', '.join(held[:6])}"
                f"{' ...' if len(held) > 6 else ''}" if held else "it holds no files")
        return [(unit_rank(Unit(path, "ascend_pt", (), "ascend_pt")), path,
                 f"no kernel table (kernel_details.csv, ascend_pytorch_profiler*.db or "
                 f"trace_view.json): {what}")]
    if depth >= _MAX_DEPTH:
        return []
    found: list[tuple[int | None, Path, str]] = []
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS)
    except OSError:
        return []
    for child in children:
        found.extend(empty_ranks(child, depth + 1))
    return found


def _choose_rank(units: list[Unit], rank: int | None, path: Path) -> Discovery:
    numbered = _numbered(units, path)
    ranks = tuple(r for r, _ in numbered)
    if rank is None:
        chosen_rank, unit = numbered[0]
    else:
        match = [u for r, u in numbered if r == rank]
        if not match:
            empty = [(folder, why) for r, folder, why in empty_ranks(path) if r == rank]
            if empty:
                folder, why = empty[0]
                raise InputError(f"rank {rank} ({folder.name}) is here but has {why}; ranks with "
                                 f"a kernel table: {', '.join(map(str, ranks))}", path=str(path),
                                 hint="profile that rank again with kernel details, or pick "
                                      "another with --rank")
            raise InputError(f"rank {rank} not found; ranks here: {', '.join(map(str, ranks))}",
                             path=str(path))
        chosen_rank, unit = rank, match[0]
    notes = ()
    if len(ranks) > 1:
        notes = (f"{len(ranks)} ranks found ({', '.join(map(str, ranks))}); "
                 f"analysing rank {chosen_rank} (choose with --rank)",)
    return Discovery(unit=unit, rank=chosen_rank, ranks=ranks, notes=notes)


def run_name(unit: Unit) -> str:
    """`PROF_GROUP_x/PROF_PipeUtilization/PROF_000001_...` -> `PipeUtilization`."""
    for part in (unit.root.name, unit.root.parent.name):
        if part.startswith("PROF_") and not re.match(r"PROF_\d{6}_", part) \
                and not part.startswith("PROF_GROUP"):
            return part[len("PROF_"):]
    return unit.root.name


def header_metrics(unit: Unit) -> str | None:
    """The counter group a run holds, from its CSV header alone."""
    if not unit.files or unit.files[0].suffix.lower() != ".csv":
        return None
    try:
        with open(unit.files[0], encoding="utf-8", errors="replace", newline="") as fh:
            header = next(csv.reader([fh.readline()]), [])
    except OSError:
        return None
    return C.metrics_from_columns([C.counter_name(h) for h in header])


def _choose_run(units: list[Unit], run: str | None, path: Path) -> Discovery:
    names = [run_name(u) for u in units]
    if len(set(names)) != len(names):
        names = [f"{n}@{u.root.name}" if names.count(n) > 1 else n for n, u in zip(names, units)]
    runs = tuple(names)
    if run is not None:
        match = [u for n, u in zip(names, units) if n.lower() == run.lower()
                 or u.root.name == run]
        if not match:
            raise InputError(f"run {run!r} not found; runs here: {', '.join(runs)}", path=str(path))
        chosen = match[0]
        why = "chosen with --run"
    else:
        pipe = [u for n, u in zip(names, units) if "pipeutilization" in n.lower()]
        pipe = pipe or [u for u in units if header_metrics(u) == "PipeUtilization"]
        chosen = pipe[0] if pipe else units[0]
        why = "PipeUtilization counters" if pipe else "no PipeUtilization run; first run"
    chosen_name = names[units.index(chosen)]
    note = (f"{len(runs)} runs found ({', '.join(runs)}); analysing {chosen_name} ({why}; "
            "choose with --run)")
    return Discovery(unit=chosen, run=chosen_name, runs=runs, search_root=path, notes=(note,))
