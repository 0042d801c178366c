"""The frozen values a profile's measurement yields, and the report compares.

Separate from measure.py (which computes them from the DataFrame) so that the report's rules,
Markdown and expected-gain code, and the site measurer, depend on these values only, never on
the measuring code or polars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True)
class Stat:
    """Summary of one quantity: `n` samples (steps, or kernel instances when there are no steps)."""

    mean: float
    stdev: float
    n: int
    min: float
    max: float
    unit: str = "step"      # step | instance | profile

    @staticmethod
    def of(values: Iterable[float], unit: str = "step") -> "Stat | None":
        vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
        if not vals:
            return None
        mean = sum(vals) / len(vals)
        var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) if len(vals) > 1 else 0.0
        return Stat(mean, math.sqrt(var), len(vals), min(vals), max(vals), unit)

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "stdev": self.stdev, "n": self.n, "min": self.min,
                "max": self.max, "unit": self.unit}


@dataclass(frozen=True)
class SiteMeasure:
    """One plan site as found (or not) in one profile."""

    site_id: str
    found: bool
    matched_by: str = ""                 # signature | shapes (type differs) | ""
    kernel_type: str = ""
    instances: int = 0                   # target kernels matched (all kept steps)
    per_step: float = 0.0                # target kernels per step
    stream: str | None = None
    target: Stat | None = None           # us per target kernel (per-step mean of instances)
    target_total: Stat | None = None     # us of all target kernels in a step
    window: Stat | None = None           # us of the window ops before one target kernel
    window_ops: tuple[str, ...] = ()     # window op types that were found before the target
    window_gap: Stat | None = None       # us from the first window op's start to the target start
    wait: Stat | None = None             # the target's wait time (us), when the export has it
    l2_hit_rate: float | None = None     # mean over target kernels (0..1)
    l2_source: str = ""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        def j(s: Stat | None):
            return s.to_json() if s else None
        return {"site_id": self.site_id, "found": self.found, "matched_by": self.matched_by,
                "kernel_type": self.kernel_type, "instances": self.instances,
                "per_step": self.per_step, "stream": self.stream, "target_us": j(self.target),
                "target_total_us": j(self.target_total), "window_us": j(self.window),
                "window_ops": list(self.window_ops), "window_gap_us": j(self.window_gap),
                "wait_us": j(self.wait), "l2_hit_rate": self.l2_hit_rate,
                "l2_source": self.l2_source, "note": self.note}


@dataclass(frozen=True)
class StreamUse:
    """Work on one stream other than the compute stream (per step means)."""

    stream: str
    kernels: int                 # kernels in all kept steps
    busy_us: float               # mean per step
    max_us: float                # longest single kernel
    cmo_kernels: int             # CMO / prefetch tasks among them
    cmo_us: float                # mean per step
    tail_us: float               # mean per step: how far this stream ends after the compute stream

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ProfileMeasure:
    label: str                           # baseline | optimized
    path: str
    steps: tuple[int, ...]
    warmup_excluded: tuple[int, ...]
    step_time: Stat | None               # the critical path, us per step
    step_time_source: str
    compute_stream: str | None
    compute_busy: Stat | None            # us of kernels on the compute stream per step
    compute_idle: Stat | None            # us of gaps on the compute stream per step (waiting)
    streams: tuple[StreamUse, ...]
    sites: tuple[SiteMeasure, ...]
    l2_hit_rate: float | None            # whole profile, when known
    l2_source: str
    soc: str | None
    cube_cores: int | None
    freq_mhz: float | None
    signatures: frozenset[str]           # MatMul-family "type|shapes|dtypes" seen (model fingerprint)
    rows: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    cmo_tasks: Stat | None = None        # CMO / prefetch tasks per step, any stream
    cmo_us: Stat | None = None           # their summed duration per step (us)

    def site(self, site_id: str) -> SiteMeasure | None:
        return next((s for s in self.sites if s.site_id == site_id), None)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "path": self.path, "steps": list(self.steps),
                "warmup_excluded": list(self.warmup_excluded),
                "step_time_us": self.step_time.to_json() if self.step_time else None,
                "step_time_source": self.step_time_source,
                "compute_stream": self.compute_stream,
                "compute_busy_us": self.compute_busy.to_json() if self.compute_busy else None,
                "compute_idle_us": self.compute_idle.to_json() if self.compute_idle else None,
                "streams": [s.to_json() for s in self.streams],
                "sites": [s.to_json() for s in self.sites],
                "l2_hit_rate": self.l2_hit_rate, "l2_source": self.l2_source,
                "soc": self.soc, "cube_cores": self.cube_cores, "freq_mhz": self.freq_mhz,
                "rows": self.rows, "notes": list(self.notes),
                "cmo_tasks": self.cmo_tasks.to_json() if self.cmo_tasks else None,
                "cmo_us": self.cmo_us.to_json() if self.cmo_us else None}


def shape_overlap(a: frozenset[str], b: frozenset[str]) -> float | None:
    """Share of MatMul signatures two profiles have in common (Jaccard); None when either has none."""
    if not a or not b:
        return None
    return len(a & b) / len(a | b)
