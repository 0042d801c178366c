"""The three verdicts and their reasons, one definition for every stage (CONTRACTS.md
"Defaults", configs/policy.yaml `verdict`): the measured one from PipeUtilization counters, the
analytic one from the roofline, and which of them decides (the measured one where counters exist).
The windows stage classes any op type with the same rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


class Verdict:
    """Verdict values (plain strings in JSON)."""

    MEMORY = "memory-bound"
    COMPUTE = "compute-bound"
    LATENCY = "latency-bound"
    UNKNOWN = "unknown"           # no usable shapes: no analytic verdict


def measured_verdict(mac: float | None, mte2: float | None, pol: dict[str, Any]) -> str | None:
    """PipeUtilization rule (policy.yaml verdict.*): None when the counters are absent."""
    if mac is None and mte2 is None:
        return None
    mac, mte2 = mac or 0.0, mte2 or 0.0
    if mte2 >= pol["measured_memory_mte2_ratio"] and mte2 > mac:
        return Verdict.MEMORY
    if mac >= pol["measured_compute_mac_ratio"] and mac >= mte2:
        return Verdict.COMPUTE
    return Verdict.LATENCY


def analytic_verdict(ai: float, ridge: float, t_compute_us: float, t_memory_us: float,
                     mean_us: float | None, pol: dict[str, Any]) -> str:
    if mean_us and max(t_compute_us, t_memory_us) < pol["latency_roofline_share"] * mean_us:
        return Verdict.LATENCY
    return Verdict.MEMORY if ai < ridge else Verdict.COMPUTE


def verdict_why(verdict: str, *, ai: float | None, ridge: float | None, roof_us: float | None,
                mean_us: float | None, mac: float | None, mte2: float | None,
                pol: dict[str, Any], measured: bool) -> str:
    if measured:
        if verdict == Verdict.MEMORY:
            return f"mte2 {mte2 or 0:.2f} >= {pol['measured_memory_mte2_ratio']} and > mac {mac or 0:.2f}"
        if verdict == Verdict.COMPUTE:
            return f"mac {mac or 0:.2f} >= {pol['measured_compute_mac_ratio']} and >= mte2 {mte2 or 0:.2f}"
        return (f"neither mte2 {mte2 or 0:.2f} nor mac {mac or 0:.2f} reaches "
                f"{pol['measured_memory_mte2_ratio']}")
    if verdict == Verdict.LATENCY and roof_us is not None and mean_us:
        return (f"roofline time {roof_us:.3g} µs is under {pol['latency_roofline_share']:.0%} of the "
                f"measured {mean_us:.3g} µs")
    if ai is not None and ridge is not None:
        rel = "<" if verdict == Verdict.MEMORY else ">="
        return f"AI {ai:.3g} {rel} ridge {ridge:.3g} FLOP/B"
    return ""


@dataclass(frozen=True)
class Decision:
    """Which verdict decides for one signature, and the reasons of both (for the design text)."""

    verdict: str            # the deciding verdict (the measured one where counters exist)
    by: str                 # "counters" | "roofline"
    why: str                # reason of the deciding verdict
    roofline: str           # the analytic verdict
    roofline_why: str       # its reason (shown beside a measured decision, agreeing or not)


def decide(sig: Any, pol: dict[str, Any]) -> Decision:
    """The verdict that decides for `sig` (SignatureCost or TargetSig-like): measured where the
    counters exist, else analytic (CONTRACTS.md: latency- and compute-bound ops are not planned)."""
    mac, mte2 = getattr(sig, "mean_mac_ratio", None), getattr(sig, "mean_mte2_ratio", None)
    tc, tm = getattr(sig, "t_compute_us", None), getattr(sig, "t_memory_us", None)
    roof_us = max(tc, tm) if tc is not None and tm is not None else None
    a_why = verdict_why(sig.verdict, ai=getattr(sig, "ai", None), ridge=getattr(sig, "ridge", None),
                        roof_us=roof_us, mean_us=getattr(sig, "mean_us", None), mac=mac, mte2=mte2,
                        pol=pol, measured=False)
    measured = sig.measured_verdict
    if measured is None:
        return Decision(sig.verdict, "roofline", a_why, sig.verdict, a_why)
    m_why = verdict_why(measured, ai=None, ridge=None, roof_us=None, mean_us=None, mac=mac,
                        mte2=mte2, pol=pol, measured=True)
    return Decision(measured, "counters", m_why, sig.verdict, a_why)


def split_targets(sigs: Sequence[Any], pol: dict[str, Any],
                  ) -> tuple[list[Any], list[tuple[Any, str, str]]]:
    """Memory-bound candidates -> (targets, [(sig, reason code, reason)]): only signatures whose
    deciding verdict is memory-bound are targets; the rest are listed with the reason."""
    from .. import reasons

    keep, out = [], []
    for s in sigs:
        d = decide(s, pol)
        if d.verdict == Verdict.MEMORY:
            keep.append(s)
            continue
        code = {Verdict.LATENCY: reasons.LATENCY_BOUND,
                Verdict.COMPUTE: reasons.COMPUTE_BOUND}.get(d.verdict, reasons.NOT_MEMORY_BOUND)
        other = (f"; the roofline says {d.roofline} ({d.roofline_why}), but the measured verdict "
                 "decides" if d.by == "counters" and d.roofline != d.verdict else "")
        out.append((s, code, f"{'counters say' if d.by == 'counters' else 'the roofline says'} "
                             f"{d.verdict} ({d.why}){other}: listed, not planned"))
    return keep, out


def pipe_verdict(pipes: Sequence[float | None], pol: dict[str, Any], explain: bool = True,
                 ) -> tuple[str | None, str]:
    """Measured verdict of any op (a window op of any type) from its PipeUtilization ratios
    (aic_mac, aic_mte2, aiv_vec, aiv_mte2): the cube and the vector side each by the rule above,
    memory-bound when either side is. (None, "") when the op has no counters; the reason is ""
    unless `explain` (a timeline classes 10^4-10^5 ops and words the few it shows)."""
    mac, mte2, vec, vmte2 = pipes         # asked for every op of a timeline: no generators
    mac, mte2, vec, vmte2 = mac or 0.0, mte2 or 0.0, vec or 0.0, vmte2 or 0.0
    cube, vector = bool(mac or mte2), bool(vec or vmte2)
    if not (cube or vector):
        return None, ""
    va = measured_verdict(mac, mte2, pol) if cube else None
    vv = measured_verdict(vec, vmte2, pol) if vector else None
    # the side that decides: memory-bound on either, else compute-bound on either, else the
    # cube side when it has counters (each in that order: cube first)
    if va == Verdict.MEMORY or (vv != Verdict.MEMORY and (
            va == Verdict.COMPUTE or (vv != Verdict.COMPUTE and cube))):
        v, side, a, b = va, "aic", mac, mte2
    else:
        v, side, a, b = vv, "aiv", vec, vmte2
    if not explain:
        return v, ""
    other = "mac" if side == "aic" else "vec"
    return v, f"{side} mte2 {b:.2f}, {other} {a:.2f}"
