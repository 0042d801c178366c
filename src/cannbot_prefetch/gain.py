"""The expected gain of one prefetch site: ONE function, called by every stage that shows it.

analyze (the plan's `saving_us`, its JSON `candidates[].saving_us`, the ranking of sites), the
design document and `report` (baseline-only and A/B) all call `expected()`; `report` re-derives
the inputs from the plan with `inputs_of(site)`, so for the same plan and hardware the numbers are
the same by construction.

Benefit model (REFERENCE.md §5, docs/planning.md "Gain bounds"): a prefetch only helps with the
bytes it lands in L2 before the target starts, and it can only move them while HBM is idle:
  idle   = the window's usable time - the time its own ops keep HBM busy (their bytes / HBM, the
           roofline: the window op's own traffic is not free bandwidth),
  hidden = min(P, idle x R), R the prefetch rate:
           low  = the CMO rate (one stream, 285 GB/s public figure, `--cmo-bw`, or the rate
                  `report` measured: `GainInputs.cmo_gbps`, else the part's `cmo_bw_gbps`),
           high = the part's HBM bandwidth (the most any stream can draw), mid = their mean;
  saved  = hidden x useful_share / BW_eff x (1 - BW_eff / BW_L2) per op, where
           useful_share = 1 for a dense weight; for a GroupedMatmul the expected share of
           prefetched experts the tokens hit (moe.py),
           BW_eff = what the op achieves from HBM (its bytes / its measured time, at most HBM),
           BW_L2  = (3.4 .. 5) x HBM (policy `benefit.l2_to_hbm_bw_ratio`, low / high),
  bounded by the op's time minus its compute floor. Bytes beyond `hidden` still arrive, during
the target, in place of the reads the target would make: no saving counted, no loss. So the low
bound is a floor (the slowest stream the part has), not a variant of the L2 ratio. Per step = per
op x instances per step. A per-op prediction above policy `benefit.optimistic_op_share` of the op
is flagged optimistic (public gains are 0.35-8.9 %). With no profile (manual mode) nothing is
known: `expected` returns None ("unknown (no profile)").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .contract.plan import Saving
from .policy import Policy


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
    cmo_gbps: float | None = None   # the low bound's rate when given or measured; else the part's

    def stored(self) -> "GainInputs":
        """Rounded as the plan stores them, so a plan read back gives the same numbers."""
        return GainInputs(round(float(self.mean_us), 3), int(self.op_bytes),
                          round(float(self.t_compute_us), 3), round(float(self.per_step), 3),
                          round(float(self.window_us), 3), int(self.window_bytes),
                          round(float(self.useful_share), 4),
                          None if self.cmo_gbps is None else round(float(self.cmo_gbps), 1))


@dataclass(frozen=True)
class Gain:
    per_op: Saving
    per_step: Saving
    optimistic: bool
    share_of_op: float          # mid per-op saving / the op's time


def optimistic_share(pol: Policy) -> float:
    """The one "optimistic" threshold (policy benefit.optimistic_op_share)."""
    return float(pol["benefit"]["optimistic_op_share"])


def rates(g: GainInputs | None, hw: Any, pol: Policy) -> tuple[float, float, float]:
    """The prefetch rates, bytes/s, of the low / mid / high bounds: one CMO stream, the mean,
    HBM (the low never above HBM)."""
    hbm = float(hw.hbm_bw_bytes_per_s)
    gbps = (g.cmo_gbps if g is not None and g.cmo_gbps else None) \
        or getattr(hw, "cmo_bw_gbps", None) or pol["sizing"]["cmo_bw_gbps"]
    low = min(float(gbps) * 1e9, hbm)
    return low, (low + hbm) / 2, hbm


def idle_us(g: GainInputs, hw: Any) -> float:
    """The window's HBM-idle time: its usable time minus what its own ops keep HBM busy."""
    return max(g.window_us - g.window_bytes / float(hw.hbm_bw_bytes_per_s) * 1e6, 0.0)


def hidden_bytes(p_bytes: int, g: GainInputs, hw: Any, pol: Policy) -> tuple[int, int, int]:
    """Bytes of a `p_bytes` prefetch that land before the target, at the low / mid / high rate."""
    idle = idle_us(g, hw) * 1e-6          # inf for per_call_bound's whole-prefetch window
    return tuple(int(min(p_bytes, idle * r)) for r in rates(g, hw, pol))


def expected(p_bytes: int, g: GainInputs | None, hw: Any, pol: Policy) -> Gain | None:
    """The expected saving of prefetching `p_bytes` for one site; None when `g` is None."""
    if g is None:
        return None
    lo_r, hi_r = (float(x) for x in pol["benefit"]["l2_to_hbm_bw_ratio"])
    hbm = float(hw.hbm_bw_bytes_per_s)
    t_op = g.mean_us * 1e-6
    bw_eff = min(g.op_bytes / t_op, hbm) if t_op > 0 and g.op_bytes > 0 else hbm
    ceiling = max(g.mean_us - g.t_compute_us, 0.0)
    share = max(min(g.useful_share, 1.0), 0.0)
    out = []
    for hidden, ratio in zip(hidden_bytes(p_bytes, g, hw, pol), (lo_r, (lo_r + hi_r) / 2, hi_r)):
        saved = hidden * share / bw_eff * (1 - bw_eff / (ratio * hbm)) * 1e6
        out.append(round(max(min(saved, ceiling), 0.0), 3))
    per_op = Saving(*out)
    per_step = Saving(*(round(v * g.per_step, 3) for v in out))
    frac = per_op.mid / g.mean_us if g.mean_us > 0 else 0.0
    return Gain(per_op, per_step, frac > optimistic_share(pol), round(frac, 4))


# ------------------------------------------------------------------- the plan's record

def to_evidence(g: GainInputs) -> dict[str, Any]:
    """The keys `inputs_of` reads back (merged into the site's evidence by plan/build.py)."""
    ev = {"mean_us": g.mean_us, "bytes_per_op": g.op_bytes, "t_compute_us": g.t_compute_us,
          "instances_per_step": g.per_step, "useful_share": g.useful_share,
          "window": {"effective_us": g.window_us, "bytes": g.window_bytes}}
    if g.cmo_gbps:
        ev["cmo_gbps"] = g.cmo_gbps
    return ev


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
                      float(ev.get("useful_share", 1.0)), _rate(ev.get("cmo_gbps")))


def _rate(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def per_call_bound(site: Any, hw: Any, pol: Policy) -> Saving | None:
    """Per call, at most: what `expected` gives when a window hides the whole prefetch at every
    rate. With the plan's recorded inputs the op keeps its measured time, so the bound is never
    below the expected saving (the hidden bytes only grow); without them (no profile) the op is
    taken at the HBM roof (decode: it reads its weight, weight bytes / HBM)."""
    g = inputs_of(site)
    if g is None:
        import math
        b = site.basis
        weight = math.prod(b.dims) * b.dtype_bytes
        if weight <= 0:
            return None
        g = GainInputs(weight / float(hw.hbm_bw_bytes_per_s) * 1e6, int(weight), 0.0, 1.0, 0.0)
    return expected(site.max_size, replace(g, window_us=float("inf"), window_bytes=0), hw,
                    pol).per_op


@dataclass(frozen=True)
class SiteGain:
    """A site's expected gain and where it came from."""

    gain: Gain | None
    source: str                 # recomputed | recorded | unknown


def site_gain(site: Any, hw: Any, pol: Policy) -> SiteGain:
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
