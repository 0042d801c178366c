"""What the design document is rendered from (`DesignInputs`, one `SiteView` per site shown),
and the plain dicts of the hardware, profile and signatures it shows. Apart from build.py so the
renderer (design.py) reads them without importing the upstream stages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..mapping import Mapped
from ..sizing import Sized
from ..windows import Candidate, Rejection
from ..contract.plan import Plan, Site


@dataclass(frozen=True)
class SiteView:
    """One planned or listed site, as the design document shows it."""

    site: Site
    planned: bool
    candidate: Candidate | None
    mapped: Mapped | None
    sized: Sized
    reason: str = ""


@dataclass(frozen=True)
class DesignInputs:
    plan: Plan
    mode: str                                  # auto | manual
    lang: str
    hardware: dict[str, Any]
    profile: dict[str, Any]
    signatures: tuple[dict[str, Any], ...]     # roofline rows examined (memory-bound top N)
    sites: tuple[SiteView, ...]                # planned first, then mapped but not planned
    rejections: tuple[Rejection, ...]
    model_files: tuple[str, ...]
    optimistic_share: float                    # the run's policy benefit.optimistic_op_share
    notes: tuple[str, ...] = ()
    ranks: Any = None                          # --rank all: the CrossRank (design: the spread)


def hw_dict(hw) -> dict[str, Any]:
    return {"name": getattr(hw, "name", "?"), "hbm_bw_tbps": getattr(hw, "hbm_bw_tbps", None),
            "l2_bytes": getattr(hw, "l2_bytes", None), "cmo_bw_gbps": getattr(hw, "cmo_bw_gbps", None),
            "detected_from": getattr(hw, "detected_from", "")}


def profile_dict(info) -> dict[str, Any]:
    if info is None:
        return {}
    return {"path": info.path, "layout": info.layout, "level": info.level, "steps": list(info.steps)}


def sig_dict(s: Any) -> dict[str, Any]:
    keys = ("sig_id", "type", "input_shapes", "dtypes", "count", "mean_us", "total_us", "share",
            "ai", "ridge", "t_compute_us", "t_memory_us", "verdict", "measured_verdict", "m", "n",
            "k", "weight_bytes", "note", "evidence", "evidence_why")
    return {k: getattr(s, k, None) for k in keys}
