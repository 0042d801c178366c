"""The expected gain of one prefetch site: ONE function, called by every stage that shows it.

analyze (the plan's `saving_us`, its JSON `candidates[].saving_us`, the ranking of sites), the
design document and `report` (baseline-only and A/B) all call `expected()`; `report` re-derives
the inputs from the plan with `inputs_of(site)`, so for the same plan and hardware the numbers are
the same by construction.

Benefit model (REFERENCE.md §5): per op, saved = U / BW_eff x (1 - BW_eff / BW_L2), where
  U      = the prefetched bytes the op really reads (max_size x `useful_share`: 1 for a dense
           weight; for a GroupedMatmul the expected share of prefetched experts that the tokens
           hit, moe.py),
  BW_eff = what the op achieves from HBM (its bytes / its measured time, at most the HBM peak),
  BW_L2  = (3.4 .. 5) x HBM (policy `benefit.l2_to_hbm_bw_ratio`: low / high, mid between);
bounded by the op's time minus its compute floor, minus the window slowdown when the prefetch
(all of it, useful or not) and the window's own traffic need longer than the window at HBM
bandwidth. Per step = per op x instances per step. A per-op prediction above policy
`benefit.optimistic_op_share` of the op is flagged optimistic (public gains are 0.35-8.9 %).
With no profile (manual mode) nothing is known: `expected` returns None ("unknown (no profile)").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .plan import Saving
from .settings import policy


@dataclass(frozen=True)
class GainInputs:
    """What the benefit model needs, as the plan records it (`evidence`, see `to_evidence`)."""

    mean_us: float              # the target op, per instance, measured
    op_bytes: int               # bytes one instance moves
    t_compute_us: float         # its compute floor
    per_step: float             # instances per step
    window_us: float            # usable window where the prefetch is issued
    window_bytes: int = 0       # bytes the window's own ops move
    useful_share: float = 1.0   # share of the prefetched bytes the op reads (MoE < 1)

    def stored(self) -> "GainInputs":
        """Rounded as the plan stores them, so a plan read back gives the same numbers."""
        return GainInputs(round(float(self.mean_us), 3), int(self.op_bytes),
                          round(float(self.t_compute_us), 3), round(float(self.per_step), 3),
                          round(float(self.window_us), 3), int(self.window_bytes),
                          round(float(self.useful_share), 4))


@dataclass(frozen=True)
class Gain:
    per_op: Saving
    per_step: Saving
    optimistic: bool
    share_of_op: float          # mid per-op saving / the op's time


def optimistic_share(pol: dict[str, Any] | None = None) -> float:
    """The one "optimistic" threshold (policy benefit.optimistic_op_share)."""
    return float((pol or policy())["benefit"]["optimistic_op_share"])


def expected(p_bytes: int, g: GainInputs | None, hw: Any, pol: dict[str, Any] | None = None
             ) -> Gain | None:
    """The expected saving of prefetching `p_bytes` for one site; None when `g` is None."""
    if g is None:
        return None
    pol = pol or policy()
    lo_r, hi_r = (float(x) for x in pol["benefit"]["l2_to_hbm_bw_ratio"])
    hbm = float(hw.hbm_bw_bytes_per_s)
    t_op = g.mean_us * 1e-6
    bw_eff = min(g.op_bytes / t_op, hbm) if t_op > 0 and g.op_bytes > 0 else hbm
    ceiling = max(g.mean_us - g.t_compute_us, 0.0)
    need_us = (p_bytes + g.window_bytes) / hbm * 1e6
    slowdown = max(need_us - g.window_us, 0.0)
    useful = p_bytes * max(min(g.useful_share, 1.0), 0.0)
    out = []
    for ratio in (lo_r, (lo_r + hi_r) / 2, hi_r):
        saved = useful / bw_eff * (1 - bw_eff / (ratio * hbm)) * 1e6
        out.append(round(max(min(saved, ceiling) - slowdown, 0.0), 3))
    per_op = Saving(*out)
    per_step = Saving(*(round(v * g.per_step, 3) for v in out))
    share = per_op.mid / g.mean_us if g.mean_us > 0 else 0.0
    return Gain(per_op, per_step, share > optimistic_share(pol), round(share, 4))


# ------------------------------------------------------------------- the plan's record

def to_evidence(g: GainInputs) -> dict[str, Any]:
    """The keys `inputs_of` reads back (merged into the site's evidence by plan/build.py)."""
    return {"mean_us": g.mean_us, "bytes_per_op": g.op_bytes, "t_compute_us": g.t_compute_us,
            "instances_per_step": g.per_step, "useful_share": g.useful_share,
            "window": {"effective_us": g.window_us, "bytes": g.window_bytes}}


def inputs_of(site: Any) -> GainInputs | None:
    """The benefit inputs a plan site records, or None when it lacks them (manual mode without
    a profile, or a plan written by hand / by an older version)."""
    ev = site.evidence or {}
    win = ev.get("window") if isinstance(ev.get("window"), dict) else {}
    need = (ev.get("mean_us"), ev.get("bytes_per_op"), ev.get("instances_per_step"),
            win.get("effective_us"))
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in need):
        return None
    return GainInputs(float(ev["mean_us"]), int(ev["bytes_per_op"]),
                      float(ev.get("t_compute_us") or 0.0), float(ev["instances_per_step"]),
                      float(win["effective_us"]), int(win.get("bytes") or 0),
                      float(ev.get("useful_share", 1.0)))


def roofline_bound(site: Any, hw: Any, pol: dict[str, Any] | None = None) -> Saving | None:
    """Per call, at most: what `expected` gives when the op runs at the HBM roof (decode: it
    reads its weight, weight bytes / HBM) and a window hides the whole prefetch. Needs only the
    plan's shapes and the hardware, so it exists without a profile."""
    import math
    b = site.basis
    weight = math.prod(b.dims) * b.dtype_bytes
    if weight <= 0:
        return None
    t_mem = weight / float(hw.hbm_bw_bytes_per_s) * 1e6
    g = GainInputs(t_mem, int(weight), 0.0, 1.0, float("inf"))
    return expected(site.max_size, g, hw, pol).per_op


@dataclass(frozen=True)
class SiteGain:
    """A site's expected gain and where it came from."""

    gain: Gain | None
    source: str                 # recomputed | recorded | unknown


def site_gain(site: Any, hw: Any, pol: dict[str, Any] | None = None) -> SiteGain:
    """Recomputed from the plan's inputs and `hw` when the plan has them; else the figures the
    plan recorded (`saving_us`, `evidence.saving_per_op_us`); else unknown (no profile)."""
    g = inputs_of(site)
    if g is not None:
        return SiteGain(expected(site.max_size, g, hw, pol), "recomputed")
    ev = site.evidence or {}
    rec = site.saving_us
    if rec is None:
        return SiteGain(None, "unknown")
    n = ev.get("instances_per_step")
    po = ev.get("saving_per_op_us")
    if isinstance(po, dict) and all(isinstance(po.get(k), (int, float)) for k in ("low", "mid", "high")):
        per_op = Saving(float(po["low"]), float(po["mid"]), float(po["high"]))
    elif isinstance(n, (int, float)) and n > 0:
        per_op = Saving(rec.low / n, rec.mid / n, rec.high / n)
    else:
        per_op = rec
    mean = ev.get("mean_us")
    share = per_op.mid / mean if isinstance(mean, (int, float)) and mean > 0 else 0.0
    return SiteGain(Gain(per_op, rec, share > optimistic_share(pol), round(share, 4)), "recorded")
