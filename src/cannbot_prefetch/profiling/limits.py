"""Input size bounds (configs/policy.yaml `profiling:`), checked before any parser runs.

A profile is data from outside: a file far larger than any export, a gzip bomb or a header of
ten thousand columns must be refused in a second with one line, not read until memory runs out.
The readers enforce what only they can see (bytes after gzip, columns in the header).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError


@dataclass(frozen=True)
class Limits:
    trace_bytes: int      # a trace file, and a .gz trace after decompression
    table_bytes: int      # a kernel table CSV or a profiler DB
    columns: int          # header fields of a kernel table

    @staticmethod
    def of(pol: dict) -> "Limits":
        p = pol.get("profiling", {})
        return Limits(trace_bytes=int(float(p.get("max_trace_mb", 512)) * 1e6),
                      table_bytes=int(float(p.get("max_table_mb", 4096)) * 1e6),
                      columns=int(p.get("max_columns", 1024)))

    @staticmethod
    def check_size(path: Path, limit: int, key: str) -> None:
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None
        if size > limit:
            raise InputError(f"{size / 1e6:,.0f} MB is more than the {limit / 1e6:,.0f} MB "
                             f"allowed ({key} in configs/policy.yaml)", path=str(path),
                             hint="export fewer steps")
