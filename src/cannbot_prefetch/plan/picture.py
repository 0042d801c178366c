"""The design's picture of each planned layer (SVG beside `prefetch_design.md`, linked from it).

How an engineer checks a plan in one look: the main-stream ops in execution order, each as wide as
its measured time and filled to its HBM-busy share, each planned target outlined, its window as a
band, and its prefetch as an arrow from the dependency (where the window starts) to the target,
labelled with the bytes it moves.

What it is drawn from, all measured by `analyze` (no new number): a planned site's candidate
(windows/types.py) records up to 16 ops before its target with their median offsets (`lead`) and
the window it was costed on; the target's time is the cluster's mean. HBM-busy share of an op =
its bytes / the part's HBM bandwidth / its time, at most 1 (the roofline; the same traffic the
gain's idle time subtracts, gain.py). A layer: the planned site whose lead holds the most other
planned targets (ties: the smaller id) anchors a picture; the sites found in its lead (same kernel
type and input shapes, the op before it agreeing where several match) are drawn on it; the rest
anchor the next picture. Plain SVG text, no dependency; the same plan gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from ..fmt import size_text
from .design_inputs import DesignInputs, SiteView

W, MARGIN, OP_Y, OP_H = 1000, 30, 110, 40


@dataclass(frozen=True)
class Op:
    type: str
    start_us: float          # relative to the anchor target's start (negative: before it)
    end_us: float
    bytes: int
    target_of: str = ""      # the planned site whose target this op is


@dataclass(frozen=True)
class Arrow:
    site_id: str
    dep_us: float            # where the window starts (the dependency is ready)
    target_us: float         # the target's start
    max_size: int
    window_us: float         # the window the plan is costed on (usable time)


@dataclass(frozen=True)
class Picture:
    name: str                # file name, beside the design
    site_ids: tuple[str, ...]
    ops: tuple[Op, ...]
    arrows: tuple[Arrow, ...]
    svg: str


def _strip(v: SiteView) -> list[tuple[str, str, float, float, int]]:
    """(type, shapes, start, end, bytes) in execution order, the target last at [0, mean]."""
    c = v.candidate
    ops = [(lo.op.type, lo.op.shapes, -lo.start_us, -lo.end_us, int(lo.op.bytes))
           for lo in reversed(c.lead)]
    t = c.target
    return ops + [(t.type, t.input_shapes, 0.0, float(c.mean_us), int(t.bytes or t.weight_bytes or 0))]


def _find(strip, v: SiteView) -> int | None:
    """Where `v`'s target sits in another site's strip (not its last op), or None."""
    t = v.candidate.target
    before = v.candidate.lead[0].op.type if v.candidate.lead else None
    hits = [i for i, (typ, shp, *_) in enumerate(strip[:-1])
            if typ == t.type and shp == t.input_shapes]
    agree = [i for i in hits if i > 0 and strip[i - 1][0] == before]
    pick = agree or hits
    return pick[-1] if pick else None       # the nearest to the anchor's target


def pictures(d: DesignInputs) -> list[Picture]:
    """One picture per planned layer (none without a profile: nothing was measured)."""
    views = sorted((v for v in d.sites if v.planned and v.candidate is not None and v.candidate.lead),
                   key=lambda v: v.site.id)
    strips = {v.site.id: _strip(v) for v in views}
    left = list(views)
    out: list[Picture] = []
    hbm = float(d.hardware.get("hbm_bw_tbps") or 0) * 1e12
    while left:
        def found(a):
            return {v.site.id: i for v in left if v is not a
                    for i in [_find(strips[a.site.id], v)] if i is not None}
        anchor = max(left, key=lambda a: len(found(a)))     # `left` is by id: ties, the smaller
        at = found(anchor)
        strip = strips[anchor.site.id]
        members = [anchor] + [v for v in left if v.site.id in at]
        where = {**at, anchor.site.id: len(strip) - 1}
        owner = {i: sid for sid, i in where.items()}
        ops = tuple(Op(typ, s, e, b, owner.get(i, "")) for i, (typ, _, s, e, b) in enumerate(strip))
        arrows = []
        for v in sorted(members, key=lambda v: where[v.site.id]):
            tgt = ops[where[v.site.id]].start_us
            w = v.candidate.window
            arrows.append(Arrow(v.site.id, tgt - float(w.raw_us), tgt, int(v.site.max_size),
                                float(w.time_us)))
        name = f"prefetch_design.layer{len(out) + 1}.svg"
        ids = tuple(sorted(v.site.id for v in members))
        out.append(Picture(name, ids, ops, tuple(arrows), _svg(ops, tuple(arrows), hbm, ids)))
        left = [v for v in left if v.site.id not in ids]
    return out


def busy_share(op: Op, hbm_bps: float) -> float:
    """Bytes / HBM over the op's time, at most 1 (0 without a bandwidth or a time)."""
    dur = op.end_us - op.start_us
    if hbm_bps <= 0 or dur <= 0:
        return 0.0
    return min(op.bytes / hbm_bps * 1e6 / dur, 1.0)


def _svg(ops: tuple[Op, ...], arrows: tuple[Arrow, ...], hbm: float, ids: tuple[str, ...]) -> str:
    t0 = min([o.start_us for o in ops] + [a.dep_us for a in arrows])
    t1 = max(o.end_us for o in ops)
    scale = (W - 2 * MARGIN) / max(t1 - t0, 1e-9)

    def x(t: float) -> float:
        return MARGIN + (t - t0) * scale

    height = OP_Y + OP_H + 60 + 40 * len(arrows) + 40
    L = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
         f'viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="10">',
         '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
         'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/></marker></defs>',
         f'<text x="{MARGIN}" y="18" font-size="13">Planned layer: {escape(", ".join(ids))}</text>',
         f'<text x="{MARGIN}" y="34">main-stream ops in execution order, width = measured time '
         f'({t1 - t0:.1f} µs shown); dark fill = HBM-busy share (bytes / HBM / time); red = '
         'planned target; blue band = window; arrow = prefetch, dependency → target</text>']
    for i, o in enumerate(ops):
        x0, x1 = x(o.start_us), x(o.end_us)
        w = max(x1 - x0, 1.0)
        share = busy_share(o, hbm)
        fill_h = OP_H * share
        stroke = "#c0392b" if o.target_of else "#555"
        tgt = f' data-target-of="{escape(o.target_of)}"' if o.target_of else ""
        L.append(f'<g class="op" data-index="{i}" data-type="{escape(o.type)}" '
                 f'data-busy="{share:.2f}"{tgt}>'
                 f'<title>{escape(o.type)}: {o.end_us - o.start_us:.1f} µs, {o.bytes} B, '
                 f'HBM busy {share:.0%}</title>'
                 f'<rect x="{x0:.1f}" y="{OP_Y}" width="{w:.1f}" height="{OP_H}" fill="#eee" '
                 f'stroke="{stroke}" stroke-width="{2 if o.target_of else 0.5}"/>'
                 f'<rect x="{x0:.1f}" y="{OP_Y + OP_H - fill_h:.1f}" width="{w:.1f}" '
                 f'height="{fill_h:.1f}" fill="#7f8c8d"/>'
                 f'<text transform="translate({x0 + w / 2:.1f},{OP_Y - 4}) rotate(-45)">'
                 f'{escape(o.type)} {share:.0%}</text></g>')
    for k, a in enumerate(arrows):
        y = OP_Y + OP_H + 20 + 40 * k
        xd, xt = x(a.dep_us), x(a.target_us)
        L.append(f'<g class="prefetch" data-site="{escape(a.site_id)}" data-bytes="{a.max_size}" '
                 f'data-window-us="{a.window_us:.1f}">'
                 f'<rect class="window" x="{xd:.1f}" y="{OP_Y + OP_H + 4 + 4 * k}" '
                 f'width="{max(xt - xd, 1.0):.1f}" height="4" fill="#3498db" opacity="0.6"/>'
                 f'<path d="M{xd:.1f},{OP_Y + OP_H} L{xd:.1f},{y} L{xt:.1f},{y} '
                 f'L{xt:.1f},{OP_Y + OP_H + 2}" fill="none" stroke="#c0392b" stroke-width="1.5" '
                 f'marker-end="url(#head)"/>'
                 f'<text x="{min(xd, xt) + 4:.1f}" y="{y + 14}">{escape(a.site_id)}: '
                 f'{size_text(a.max_size)} over a {a.window_us:.1f} µs window</text></g>')
    L.append('</svg>')
    return "\n".join(L) + "\n"


def links(pics: list[Picture]) -> list[str]:
    """Markdown lines linking the pictures (the design shows them inline)."""
    return [f"![{', '.join(p.site_ids)}]({p.name})" for p in pics]


def as_files(pics: list[Picture]) -> dict[str, Any]:
    return {p.name: p.svg for p in pics}
