"""The CMO (prefetch) rate, calibrated from the CMO tasks of a prefetch-on profile.

The sizing stage shows `cmo_rate_x_window` as a risk only while the rate is the one public figure
(285 GB/s, REFERENCE.md §5); once `report` has measured it here, the next plan carries the
measured rate and the cap binds (sizing.cmo_cap). Rate = the bytes the plan prefetches per step
(each site's `max_size` x its calls per step) / the summed duration of the CMO tasks per step in
the optimized profile. Tasks are recognised by type or name (configs/op_classes.yaml `prefetch_tasks`).
A task count that differs from the calls per step is said (a prefetch may be split or skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..fmt import mib
from ..plan import Plan, Site
from ..sizing import cmo_cap
from .measurements import ProfileMeasure


@dataclass(frozen=True)
class CmoRate:
    gbps: float
    bytes_per_step: int
    us_per_step: float
    tasks_per_step: float
    calls_per_step: float        # prefetch calls the plan issues per step
    source: str                  # the profile the tasks came from

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def note(self) -> str:
        extra = ""
        if abs(self.tasks_per_step - self.calls_per_step) > 0.5:
            extra = (f"; {self.tasks_per_step:g} CMO tasks per step for {self.calls_per_step:g} "
                     "prefetch calls")
        return (f"{mib(self.bytes_per_step)} per step over {self.us_per_step:.1f} us of "
                f"CMO tasks in {self.source}{extra}")


def _calls(site: Site, opt: ProfileMeasure) -> float:
    n = (site.evidence or {}).get("instances_per_step")
    if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0:
        return float(n)
    sm = opt.site(site.id)
    return sm.per_step if sm is not None and sm.found else 0.0


def calibrate(plan: Plan, opt: ProfileMeasure | None) -> CmoRate | None:
    """The measured rate, or None when the profile shows no CMO task (or the plan no site)."""
    if opt is None or opt.cmo_us is None or opt.cmo_tasks is None or opt.cmo_us.mean <= 0:
        return None
    calls = {s.id: _calls(s, opt) for s in plan.sites}
    nbytes = int(sum(s.max_size * calls[s.id] for s in plan.sites))
    if nbytes <= 0:
        return None
    gbps = nbytes / (opt.cmo_us.mean * 1e-6) / 1e9
    return CmoRate(round(gbps, 1), nbytes, round(opt.cmo_us.mean, 3), round(opt.cmo_tasks.mean, 3),
                   round(sum(calls.values()), 3), opt.path)


def with_rate(site: Site, rate: CmoRate) -> Site:
    """The site with its CMO cap recomputed from the measured rate, binding."""
    win = (site.evidence or {}).get("window") or {}
    t = win.get("effective_us", win.get("time_us")) if isinstance(win, dict) else None
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        return site
    cap = cmo_cap(rate.gbps, float(t), f"measured: {rate.note}")
    caps = tuple(c for c in site.basis.caps if c.name != "cmo_rate_x_window") + (cap,)
    # the gain's low bound moves at the measured rate too (gain.rates reads evidence.cmo_gbps)
    return replace(site, basis=replace(site.basis, caps=caps),
                   evidence={**(site.evidence or {}), "cmo_gbps": rate.gbps})
