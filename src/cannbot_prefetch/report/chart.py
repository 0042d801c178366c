"""The roofline chart: MatMul-family signatures as points against the hardware's roof.

x: arithmetic intensity (FLOP/byte, from roofline/cost.py), y: achieved TFLOPS (FLOPs / measured
mean time). The roof is min(peak, AI x HBM bandwidth) of the hardware profile used; the plan's
targets are marked. Drawn with matplotlib's Agg backend (no display needed); returns PNG bytes so
the caller writes it atomically with the other outputs.
"""

from __future__ import annotations

import io
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    label: str               # e.g. "MatMulV3 1,2048;8192,2048"
    ai: float                # FLOP / byte
    tflops: float            # achieved
    target: bool = False     # a plan site's target
    verdict: str = ""        # memory-bound | compute-bound | latency-bound


@dataclass(frozen=True)
class Roof:
    name: str                # hardware profile name
    peak_tflops: float       # of the dtype most points use
    peak_label: str          # e.g. "bf16 peak 294.9 TFLOPS"
    hbm_tbps: float


def points_from_roofline(roofline, target_keys: set[str]) -> list[Point]:
    """Points from `roofline.classify()` signatures; `target_keys` are compare.signature_key()s."""
    from .sites import signature_key
    out = []
    for s in roofline.signatures:
        if not s.flops or not s.mean_us or not s.ai or s.mean_us <= 0 or s.ai <= 0:
            continue
        tflops = s.flops / (s.mean_us * 1e-6) / 1e12
        key = signature_key(s.type, s.input_shapes, s.dtypes)
        out.append(Point(f"{s.type} {s.input_shapes}", float(s.ai), float(tflops),
                         key in target_keys, s.verdict))
    return out


def render_png(points: list[Point], roof: Roof, title: str, labels: dict[str, str]) -> bytes:
    """PNG bytes of the chart. `labels`: x, y, roof, target, other (translated axis text)."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 5.0), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    ais = [p.ai for p in points] or [1.0]
    lo = max(min(ais) / 4, 1e-2)
    ridge = roof.peak_tflops / roof.hbm_tbps          # TFLOPS / (TB/s) = FLOP/byte
    hi = max(max(ais) * 4, ridge * 4)
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(roof.peak_tflops, x * roof.hbm_tbps) for x in xs], color="black", lw=1.5,
            label=f"{labels['roof']}: {roof.name}, {roof.peak_label}, HBM {roof.hbm_tbps:g} TB/s")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    others = [p for p in points if not p.target]
    targets = [p for p in points if p.target]
    if others:
        ax.scatter([p.ai for p in others], [p.tflops for p in others], s=22, color="#4c72b0",
                   alpha=0.7, label=labels["other"])
    if targets:
        ax.scatter([p.ai for p in targets], [p.tflops for p in targets], s=90, marker="*",
                   color="#d62728", label=labels["target"], zorder=3)
        for p in targets:
            ax.annotate(p.label, (p.ai, p.tflops), textcoords="offset points", xytext=(6, 6),
                        fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ys = [p.tflops for p in points if p.tflops > 0]
    ax.set_ylim(max(min(ys + [roof.peak_tflops]) / 10, 1e-4), roof.peak_tflops * 2)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(labels["x"])
    ax.set_ylabel(labels["y"])
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", ls=":", lw=0.5, alpha=0.6)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
