"""The `analyze --json` document (CONTRACTS.md "analyze JSON"; schemas/analyze.schema.json).

Shaping only: the values come from an `api.Analysis` and its `Shortlist` or `Planned`; nothing
here reads or writes a file.
"""

from __future__ import annotations

from typing import Any

ANALYZE_SCHEMA_VERSION = 1

_SIGNATURE_EXTRAS = ("sig_id", "family", "m", "n", "k", "batch", "weight_shape", "compute_dtype",
                     "mean_mac_ratio", "mean_mte2_ratio")


def sig_label(s) -> str:
    return f"{s.type} {s.input_shapes or '?'}"


def signature_json(s) -> dict[str, Any]:
    """CONTRACTS' signature keys (SignatureCost.to_json) plus the extras docs/contracts.md adds."""
    out = s.to_json()
    for extra in _SIGNATURE_EXTRAS:
        v = getattr(s, extra)
        out[extra] = list(v) if isinstance(v, tuple) else v
    return out


def profile_json(info) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "path": info.path, "layout": info.layout, "level": info.level,
        "aic_metrics": info.aic_metrics, "rank": info.rank, "ranks": list(info.ranks),
        "run": info.run, "steps": list(info.steps),
        "warmup_excluded": list(info.warmup_excluded), "rows": info.rows,
        "rows_skipped": info.rows_skipped, "skipped_samples": list(info.skipped_samples),
        "files": list(info.files), "soc": info.soc, "cube_cores": info.cube_cores,
        "freq_mhz": info.freq_mhz,
    }


def shortlisted_json(s) -> dict[str, Any]:
    """A memory-bound signature listed without model source (no site yet)."""
    return {"signature": sig_label(s), "sig_id": s.sig_id, "total_us": s.total_us,
            "mean_us": s.mean_us, "verdict": s.verdict, "measured_verdict": s.measured_verdict}


def not_target_json(s, code: str, why: str) -> dict[str, Any]:
    return {"signature": sig_label(s), "reason_code": code, "reason": why}


def gain_bounds_json(site, hw, policy) -> dict[str, Any] | None:
    """What the low / mid / high saving rests on (gain.py): the prefetch rate of each bound (low
    = one CMO stream, high = HBM), the window's HBM-idle time and the bytes hidden at each rate."""
    from ..gain import hidden_bytes, idle_us, inputs_of, rates

    g = inputs_of(site)
    if g is None or hw is None:
        return None
    keys = ("low", "mid", "high")
    return {"rate_gbps": dict(zip(keys, (round(r / 1e9, 1) for r in rates(g, hw, policy)))),
            "idle_us": round(idle_us(g, hw), 3),
            "hidden_bytes": dict(zip(keys, hidden_bytes(site.max_size, g, hw, policy)))}


def site_json(view, hw=None, policy=None) -> dict[str, Any]:
    """A planned or listed site (plan.design_inputs.SiteView); `hw` the part the gain is for."""
    site = view.site
    return {
        "site": site.id, "planned": view.planned,
        "target": f"{site.target.cls}.{site.target.attr}",
        "insert": f"{site.insert.cls}.{site.insert.method} {site.insert.position} "
                  f"{site.insert.anchor_call}",
        "dependency": site.dependency, "mapping": site.mapping, "max_size": site.max_size,
        "bound_by": site.basis.bound_by, "coefficient": site.basis.coefficient,
        "saving_us": ({"low": site.saving_us.low, "mid": site.saving_us.mid,
                       "high": site.saving_us.high} if site.saving_us is not None else None),
        "gain_bounds": gain_bounds_json(site, hw, policy) if policy is not None else None,
        "window": site.evidence.get("window"), "reason": view.reason or None}


def document(analysis, *, top: int, candidates: list[dict[str, Any]],
             rejections: list[dict[str, Any]], notes: list[str],
             outputs: list[str]) -> dict[str, Any]:
    """The whole document: the analysis' profile, hardware and roofline, then what the run
    found (candidates, rejections, notes) and the files it wrote (`outputs`)."""
    from .. import __version__

    roof, cross = analysis.roofline, analysis.ranks
    signatures = [signature_json(s) for s in roof.signatures] if roof is not None else []
    if cross is not None:
        for s, js in zip(roof.signatures, signatures):
            js["per_rank"] = [r.to_json() for r in cross.spread(s)]
    doc = {
        "schema_version": ANALYZE_SCHEMA_VERSION,
        "tool_version": __version__,
        "profile": profile_json(analysis.info),
        "hardware": analysis.hardware.to_json(),
        "signatures": signatures,
        "top": [s.sig_id for s in analysis.top(top)],
        "candidates": candidates,
        "rejections": rejections,
        "notes": list(analysis.notes) + notes,
        "outputs": outputs,
    }
    if cross is not None:
        doc["profile"]["path"] = analysis.path     # the job; `rank` is the one analysed in full
        doc["profile"]["ranks"] = [v.rank for v in cross.views]
        doc["ranks"] = cross.to_json()
    return doc
