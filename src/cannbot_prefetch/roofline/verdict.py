"""The verdicts and their reasons, one definition for every stage (CONTRACTS.md "Defaults",
configs/policy.yaml `verdict`, docs/roofline.md "Which evidence decides"): the analytic one from
the roofline, the measured one of a MatMul (`gemm_verdict`: cube utilisation, the MTE2 pipe,
achieved HBM bandwidth and the intensity against the ridge, with margins instead of cliffs), and
which of them decides (the measured one where counters exist). The windows stage classes any op
type by its pipe ratios (`pipe_verdict`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..i18n import said


class Verdict:
    """Verdict values (plain strings in JSON)."""

    MEMORY = "memory-bound"
    COMPUTE = "compute-bound"
    LATENCY = "latency-bound"
    UNKNOWN = "unknown"           # no usable shapes: no analytic verdict
    BORDERLINE = "borderline"     # the evidence sits within a margin of a threshold: not planned


def hbm_share(bytes_moved: float | None, mean_us: float | None, hbm_bytes_per_s: float | None,
              ) -> float | None:
    """Achieved HBM bandwidth as a share of the part's rate: bytes / mean time / HBM rate."""
    if not bytes_moved or not mean_us or not hbm_bytes_per_s or mean_us <= 0:
        return None
    return bytes_moved / (mean_us * 1e-6) / hbm_bytes_per_s


def gemm_verdict(mac: float | None, mte2: float | None, *, ai: float | None,
                 ridge: float | None, analytic: str, share: float | None, basis: str,
                 pol: dict[str, Any]) -> tuple[str | None, str, str]:
    """(verdict, evidence, why) of one MatMul signature from what its rows measure; (None,
    "roofline", "") without PipeUtilization or MemoryAccess counters (the analytic one decides).

    On Ascend the MTE2 (GM -> L1) and cube pipes overlap in a well-pipelined GEMM and MTE2 also
    moves L2 hits, so a busy MTE2 pipe alone is no proof that HBM limits the op. In order:
    1. intensity: AI >= ridge_margin x ridge -> at full rates the bytes take under 1/margin of
       the FLOPs' time: never memory-bound (the analytic compute/latency verdict stands);
    2. hbm: the bytes moved over the mean time reach hbm_roof_share of the part's HBM rate and
       MTE2 is busier than the cube -> memory-bound (MemoryAccess bytes on their own; analytic
       bytes, an upper bound, only with a busy MTE2);
    3. cube: mac >= the compute threshold without that -> compute-bound, whatever MTE2 shows;
    4. counters: MTE2 busy (>= threshold and > mac) and AI under the ridge -> memory-bound
       (pipe and intensity agree); a busy MTE2 with AI between the ridge and ridge_margin x
       ridge, below the HBM roof, is `borderline`;
    Without pipe counters (MemoryAccess only) an op below the HBM roof is latency- (or, by its
    shapes, compute-) bound.
    5. otherwise latency-bound; a ratio within ratio_margin of its threshold (a cube nearly busy
       beside a memory verdict, or no pipe quite busy) is `borderline` with both numbers."""
    if mac is None and mte2 is None and basis != "measured":
        return None, "roofline", ""
    lim_m, lim_c = pol["measured_memory_mte2_ratio"], pol["measured_compute_mac_ratio"]
    band, f, roof = pol["ratio_margin"], pol["ridge_margin"], pol["hbm_roof_share"]
    c, m = mac or 0.0, mte2 or 0.0
    # Every reason is a `said.*` sentence (configs/messages.yaml), so a Chinese document
    # re-words it (i18n.localize); the numbers are its parameters.
    basis_said = said("part.basis_measured" if basis == "measured" else "part.basis_analytic")
    parts = [f"mac {c:.2f}", f"mte2 {m:.2f}"]
    if share is not None:
        parts.append(said("part.hbm_share", share=f"{share:.0%}", basis=basis_said))
    has_ai = ai is not None and ridge is not None and ridge > 0
    if has_ai:
        parts.append(said("part.ai_vs_ridge", ai=f"{ai:.3g}", ridge=f"{ridge:.3g}"))
    nums = ", ".join(parts)
    if has_ai and ai >= f * ridge:
        v = analytic if analytic in (Verdict.COMPUTE, Verdict.LATENCY) else Verdict.COMPUTE
        return v, "intensity", said("said.verdict_intensity", ai=f"{ai:.3g}", f=f"{f:g}",
                                    ridge=f"{ridge:.3g}", nums=nums)
    mte2_busy = m >= lim_m and m > c
    # Measured bytes at the HBM roof are evidence on their own; analytic bytes are an upper
    # bound (L2 hits, a prefetched weight) and count only beside a busy MTE2 pipe.
    pipes = mac is not None or mte2 is not None
    if share is not None and share >= roof and (basis == "measured" or mte2_busy) and (
            m > c or not pipes):
        key = "said.verdict_hbm_roof_cube_busy" if c >= lim_c else "said.verdict_hbm_roof"
        return Verdict.MEMORY, "hbm", said(key, share=f"{share:.0%}", roof=f"{roof:.0%}",
                                           basis=basis_said, c=f"{c:.2f}", nums=nums)
    if not pipes and share is not None:   # MemoryAccess bytes only, below the HBM roof
        v = analytic if analytic in (Verdict.COMPUTE, Verdict.LATENCY) else Verdict.LATENCY
        return v, "hbm", said("said.verdict_hbm_below", share=f"{share:.0%}", roof=f"{roof:.0%}",
                              basis=basis_said, nums=nums)
    if c >= lim_c:
        return Verdict.COMPUTE, "cube", said("said.verdict_cube", c=f"{c:.2f}", lim=lim_c, nums=nums)
    near_cube = c >= lim_c - band
    if mte2_busy:
        why = said("said.counters_memory", m=f"{m:.2f}", lim=lim_m, c=f"{c:.2f}")
        if near_cube:
            return Verdict.BORDERLINE, "margin", said("said.verdict_near_cube", why=why, band=band,
                                                      lim=lim_c, nums=nums)
        if not has_ai or ai < ridge:
            return Verdict.MEMORY, "counters", (
                said("said.counters_ai", why=why, ai=f"{ai:.3g}", ridge=f"{ridge:.3g}") if has_ai else why)
        return Verdict.BORDERLINE, "margin", said(
            "said.verdict_l2_hits" if share is None else "said.verdict_l2_hits_hbm", why=why,
            ai=f"{ai:.3g}", ridge=f"{ridge:.3g}", f=f"{f:g}",
            share="" if share is None else f"{share:.0%}")
    if lim_m - band <= m < lim_m or lim_c - band <= c < lim_c:
        return Verdict.BORDERLINE, "margin", said("said.verdict_margin", m=f"{m:.2f}", c=f"{c:.2f}",
                                                  band=band, lim_m=lim_m, lim_c=lim_c, nums=nums)
    return Verdict.LATENCY, "counters", said("said.verdict_latency", m=f"{m:.2f}", c=f"{c:.2f}",
                                             lim=lim_m)


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
            return said("said.counters_memory", m=f"{mte2 or 0:.2f}", lim=pol["measured_memory_mte2_ratio"],
                        c=f"{mac or 0:.2f}")
        if verdict == Verdict.COMPUTE:
            return said("said.verdict_compute", c=f"{mac or 0:.2f}",
                        lim=pol["measured_compute_mac_ratio"], m=f"{mte2 or 0:.2f}")
        return said("said.verdict_latency", m=f"{mte2 or 0:.2f}", c=f"{mac or 0:.2f}",
                    lim=pol["measured_memory_mte2_ratio"])
    if verdict == Verdict.LATENCY and roof_us is not None and mean_us:
        return said("said.verdict_roofline_latency", roof=f"{roof_us:.3g}",
                    share=f"{pol['latency_roofline_share']:.0%}", mean=f"{mean_us:.3g}")
    if ai is not None and ridge is not None:
        rel = "<" if verdict == Verdict.MEMORY else ">="
        return f"AI {ai:.3g} {rel} ridge {ridge:.3g} FLOP/B"
    return ""


@dataclass(frozen=True)
class Decision:
    """Which verdict decides for one signature, and the reasons of both (for the design text)."""

    verdict: str            # the deciding verdict (the measured one where counters exist)
    by: str                 # the evidence that decided: "roofline" (no counters) | "intensity" |
                            # "cube" | "hbm" | "counters" | "margin" (gemm_verdict)
    why: str                # reason of the deciding verdict
    roofline: str           # the analytic verdict
    roofline_why: str       # its reason (shown beside a measured decision, agreeing or not)


def verdict_for(sig: Any, pol: dict[str, Any]) -> Decision:
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
    by, m_why = getattr(sig, "evidence", None), getattr(sig, "evidence_why", None)
    if not by or not m_why:     # a signature costed before the evidence was kept: the pipe rule
        by, m_why = "counters", verdict_why(measured, ai=None, ridge=None, roof_us=None,
                                            mean_us=None, mac=mac, mte2=mte2, pol=pol, measured=True)
    return Decision(measured, by, m_why, sig.verdict, a_why)


def split_targets(sigs: Sequence[Any], pol: dict[str, Any],
                  ) -> tuple[list[Any], list[tuple[Any, str, str]]]:
    """Memory-bound candidates -> (targets, [(sig, reason code, reason)]): only signatures whose
    deciding verdict is memory-bound are targets; the rest are listed with the reason."""
    from .. import reasons

    keep, out = [], []
    for s in sigs:
        d = verdict_for(s, pol)
        if d.verdict == Verdict.MEMORY:
            keep.append(s)
            continue
        code = {Verdict.LATENCY: reasons.LATENCY_BOUND, Verdict.COMPUTE: reasons.COMPUTE_BOUND,
                Verdict.BORDERLINE: reasons.BORDERLINE}.get(d.verdict, reasons.NOT_MEMORY_BOUND)
        measured = d.by != "roofline"
        who = said({"roofline": "part.by_roofline", "intensity": "part.by_intensity"}.get(
            d.by, "part.by_counters"))
        out.append((s, code, said("said.listed_measured_decides", who=who, verdict=d.verdict,
                                  why=d.why, roof=d.roofline, roof_why=d.roofline_why)
                    if measured and d.roofline != d.verdict else
                    said("said.listed_not_planned", who=who, verdict=d.verdict, why=d.why)))
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
