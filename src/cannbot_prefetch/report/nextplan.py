"""The next-step plan (`prefetch_plan.next.yaml`): the same schema, one tuning step further.

Per site the verdict's action: raise / lower change `max_size` and `basis.coefficient` (the
ladder is re-split around the new coefficient), keep and move_dependency keep the size (moving
a dependency needs a person or `analyze` with another window: the site says so in
`evidence.tuning`), drop moves the site to `rejections`. The status is `proposed` again: the
plan must be reviewed and applied before the next measurement.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..plan import Basis, Plan, Site
from ..sizing import rung_sizes
from .rules import SiteVerdict, size_for, weight_bytes

DROPPED = "dropped_after_measurement"


def _ladder_around(site: Site, coefficient: float) -> dict[str, list[float]]:
    rungs = sorted({*site.ladder.get("up", []), *site.ladder.get("down", []),
                    site.basis.coefficient, coefficient})
    return {"up": [r for r in rungs if r > coefficient + 1e-9],
            "down": sorted((r for r in rungs if r < coefficient - 1e-9), reverse=True)}


def _tuned(site: Site, v: SiteVerdict, provenance: dict[str, Any]) -> Site:
    tuning = {"action": v.action, "reason": v.reason, "signals": list(v.signals),
              "from": {"coefficient": v.coefficient_from, "max_size": v.max_size_from},
              "to": {"coefficient": v.coefficient_to, "max_size": v.max_size_to},
              "checks": {c.key: c.ok for c in v.checks}, **provenance}
    evidence = {**site.evidence, "tuning": tuning}
    if v.action not in ("raise", "lower"):
        return replace(site, evidence=evidence)
    _, bound = size_for(site, v.coefficient_to)
    if v.max_size_to < int(v.coefficient_to * weight_bytes(site)):
        bound = bound if bound != "coefficient" else "previous_size"
    basis: Basis = replace(site.basis, coefficient=v.coefficient_to, bound_by=bound)
    ladder = _ladder_around(site, v.coefficient_to)
    if "ladder_bytes" in evidence:   # the rungs as sizes, around the new size (sizing.rung_sizes)
        budget = min((c.bytes for c in site.basis.caps if c.name != "weight" and c.binding),
                     default=None)
        evidence["ladder_bytes"] = rung_sizes(weight_bytes(site), v.max_size_to,
                                              v.coefficient_to, budget, ladder)
    return replace(site, max_size=v.max_size_to, basis=basis, ladder=ladder, evidence=evidence)


def next_plan(plan: Plan, verdicts: dict[str, SiteVerdict], provenance: dict[str, Any]) -> Plan:
    """The plan for the next tuning step. Sites without a verdict are kept unchanged."""
    sites, rejections = [], list(plan.rejections)
    for site in plan.sites:
        v = verdicts.get(site.id)
        if v is None:
            sites.append(site)
            continue
        if v.action == "drop":
            sig = (site.evidence or {}).get("signature") or {}
            rejections.append({
                "signature": f"{sig.get('type', '?')} {sig.get('input_shapes', '?')}",
                "site_id": site.id, "reason_code": DROPPED, "reason": v.reason,
                "signals": list(v.signals), **provenance})
            continue
        sites.append(_tuned(site, v, provenance))
    created = {**plan.created_from, "tuned_from": provenance}
    return replace(plan, sites=tuple(sites), rejections=tuple(rejections), status="proposed",
                   created_from=created)
