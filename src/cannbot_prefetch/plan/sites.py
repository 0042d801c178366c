"""From sized candidates to the plan's sites: ranking by expected saving and the --max-sites
cut (`select`), and each `Site` record with the evidence the design and report read back."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import reasons
from ..i18n import said
from ..gain import to_evidence
from ..mapping import Mapped, target_ref
from ..roofline.verdict import verdict_for
from ..sizing import Sized
from ..windows import Candidate, Rejection
from .options import PlanOptions
from ..contract.plan import Guard, Site, Target
from .schema import sha256_file
from .size import size_mapped


def select(views, hw, opts: PlanOptions, cfg: dict[str, Any]):
    """Rank by the expected saving per step (mid, gain.py: the number the design and report
    show); keep one site per attribute; the first --max-sites are planned."""
    ranked = sorted(views, key=lambda v: -v[2].mid)
    seen: set[str] = set()
    keep, listed, rej = [], [], []
    for c, m, s in ranked:
        # one site per attribute; in manual mode per attribute and placement (the same class in
        # two layer stacks, each named by the user, is two sites)
        q = m.target.qualname if c is not None or m.method != "manual" else \
            (m.target.qualname, m.placement.insert, m.placement.weight_expr)
        if q in seen:
            listed.append(((c, m, s), "another call site of the same attribute ranks higher"))
            continue
        seen.add(q)
        if c is not None and m.method != "manual" and s.blocked:
            listed.append(((c, m, s), "not worth it"))
            rej.append(_rej(c, m, reasons.NOT_WORTH_IT, f"{q}: {s.blocked}"))
            continue
        if c is not None and m.method != "manual" and s.mid <= 0:
            listed.append(((c, m, s), "no expected saving"))
            why = ""
            if m.placement.shift == "later":
                why = f"; {m.placement.note}"
            elif m.placement.shift == "earlier" and c.window.branch == "3a":
                why = "; " + said("said.earlier_overlaps_3a", note=m.placement.note,
                                  op=c.window.start_op.type, mib=c.window.start_op.bytes / 2**20)
            rej.append(_rej(c, m, reasons.NOT_WORTH_IT,
                            f"{q}: " + said("said.no_saving", bound=s.basis.bound_by,
                                            size=s.max_size) + why))
            continue
        if len(keep) >= opts.max_sites:
            listed.append(((c, m, s), f"--max-sites {opts.max_sites}"))
            last = keep[-1][1].target.qualname
            rej.append(_rej(c, m, reasons.MAX_SITES,
                            f"{q}: " + said("said.max_sites", us=_us(s), n=opts.max_sites,
                                            last=last, last_us=_us(keep[-1][2]))))
            continue
        keep.append((c, m, s))
    n = len(keep)
    if n > 1:   # the L2 budget is shared by the sites in flight together
        keep = [(c, m, size_mapped(m, c, hw, opts, n, cfg)) for c, m, _ in keep]
    return keep, listed, rej


def _us(s: Sized) -> str:
    return f"{s.saving_us.mid:.1f}" if s.saving_us is not None else "unknown (no profile)"


def _rej(c: Candidate | None, m: Mapped, code: str, why: str) -> Rejection:
    label = c.target.label if c else m.target.qualname
    return Rejection(label, code, why, c.target if c else None, site=m.target.qualname)


def _site_id(m: Mapped) -> str:
    name = target_ref(m.placement, m.target)
    return re.sub(r"[^A-Za-z0-9_]+", "-", f"{name.cls}-{name.attr}").lower().strip("-")


def unique_ids(sites: tuple[Site, ...]) -> tuple[Site, ...]:
    """Two manual targets on one attribute (the router of two layer stacks) are two sites."""
    seen: dict[str, int] = {}
    out = []
    for s in sites:
        n = seen.get(s.id, 0) + 1
        seen[s.id] = n
        out.append(s if n == 1 else replace(s, id=f"{s.id}-{n}"))
    return tuple(out)


def _rel(path: str, out_dir: str | None) -> str:
    """Relative to the plan's folder when the two share a project (so a plan moves with it);
    absolute for files elsewhere (an installed package), where `../../..` would only confuse.
    At most one `..`: `OUT/` beside `models/` is the common layout."""
    full = Path(path).resolve()
    if not out_dir:
        return str(full)
    try:
        rel = os.path.relpath(full, Path(out_dir).resolve())
    except ValueError:
        return str(full)
    return str(full) if rel.startswith(os.pardir + os.sep + os.pardir + os.sep) else rel


def site_of(c: Candidate | None, m: Mapped, s: Sized, opts: PlanOptions, hw) -> Site:
    pl = m.placement
    ev: dict[str, Any] = {"role": m.role}
    if c is not None:
        t, w = c.target, c.window
        dec = verdict_for(t, opts.policy["verdict"])
        ev.update({
            "signature": {"type": t.type, "input_shapes": t.input_shapes, "dtypes": t.dtypes},
            "t_memory_us": round(float(t.t_memory_us or 0), 3),
            "verdict": t.verdict, "measured_verdict": t.measured_verdict,
            # which verdict chose the target (the measured one where counters exist) and why
            "verdict_by": dec.by, "verdict_why": dec.why, "roofline_why": dec.roofline_why,
            "ai": round(float(t.ai or 0), 2), "ridge": round(float(t.ridge or 0), 1),
            "window": {**w.to_dict(), "shift": pl.shift, "source_call": m.window_call,
                       "placed_by": m.precedes_by},
            # which of the signature's call sites (windows.call_sites): the report measures these
            "call_site": {"cluster": c.cluster, "clusters": c.clusters, "rank": c.site_rank},
        })
    else:
        ev["window"] = {"shift": pl.shift, "manual": m.window_call or "(nearest legal dependency)"}
        if m.signature:   # so `report` finds the target's kernels in this profile
            ev["signature"] = dict(m.signature)
    if s.gain_inputs is not None:   # the benefit inputs, as gain.inputs_of reads them back
        rec = to_evidence(s.gain_inputs)
        ev.update({k: v for k, v in rec.items() if k != "window"})
        ev["window"] = {**ev["window"], **rec["window"]}
    if s.saving_per_op is not None:
        ev["saving_per_op_us"] = {"low": s.saving_per_op.low, "mid": s.saving_per_op.mid,
                                  "high": s.saving_per_op.high}
    ev["optimistic"] = bool(s.optimistic)
    if s.ladder_bytes:   # the tuning rungs as sizes (sizing.rung_sizes); max_size is the default
        ev["ladder_bytes"] = {k: list(v) for k, v in s.ladder_bytes.items()}
    if m.guard_why:
        ev["decode_guard"] = m.guard_why       # why this tensor and dim (or why none)
    notes = list(m.notes) + list(s.notes)
    if m.guard is None and m.guard_why:
        notes.append(m.guard_why)
    if notes:
        ev["notes"] = notes
    mapping = "manual" if c is None else m.method
    name = target_ref(pl, m.target)      # seen from the class apply edits when the weight's
    tcls, tattr = name.cls, name.attr     # own class lives in another file
    return Site(
        id=_site_id(m),
        target=Target(_rel(pl.file, opts.out_dir), tcls, tattr, pl.weight_expr, pl.scope,
                      pl.alt_weight_exprs),
        insert=pl.insert, dependency=pl.dependency, join=pl.join, max_size=int(s.max_size),
        basis=s.basis, ladder=s.ladder, mapping=mapping, evidence=ev, saving_us=s.saving_us,
        source_sha256=sha256_file(pl.file),
        guard=Guard(m.guard[0], m.guard[1], opts.max_query_len) if m.guard else None)
