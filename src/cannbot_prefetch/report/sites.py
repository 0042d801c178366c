"""A plan's sites measured in one profile, on the timeline analyze planned them on.

The report must measure what the plan decided, not a look-alike: the target's kernels are the
roofline's signatures (configs/op_classes.yaml matmul_family, roofline/classify.py), its
instances are the call site the plan names (`evidence.call_site`: windows.call_sites, the same
order-in-layer attribution analyze used, so gate_proj and up_proj of one shape stay apart), and
the window ops are walked back on the same per-(step, stream) timeline (windows.timeline:
framework ops merged, communication merged in where a stream waits on it).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Sequence

import polars as pl

from ..i18n import said
from ..windows import call_sites
from .measurements import SiteMeasure, Stat

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import Site
    from ..profiling.stacks import Frames


def norm_dtypes(text: str | None) -> str:
    if not text:
        return ""
    return ";".join(p.strip().upper().removeprefix("DT_") for p in str(text).split(";"))


def norm_shapes(text: str | None) -> str:
    if not text:
        return ""
    return str(text).strip().strip('"').replace(" ", "")


def signature_key(typ: str | None, shapes: str | None, dtypes: str | None) -> str:
    return f"{(typ or '').lower()}|{norm_shapes(shapes)}|{norm_dtypes(dtypes)}"


def matching_signatures(signatures: Sequence[Any], sig: dict[str, Any]) -> tuple[list[int], str]:
    """The roofline signatures that are the plan's target: same type, shapes and dtypes
    ("signature"); else same shapes and dtypes under another MatMul-family type, e.g. MatMulV2 ->
    MatMulV3 across CANN versions ("shapes")."""
    shapes = norm_shapes(sig.get("input_shapes"))
    if not shapes:
        return [], ""
    typ = str(sig.get("type") or "").lower()
    dtypes = norm_dtypes(sig.get("dtypes") or sig.get("input_dtypes"))
    same = [s for s in signatures if norm_shapes(s.input_shapes) == shapes
            and (not dtypes or norm_dtypes(s.dtypes) == dtypes)]
    exact = [s.sig_id for s in same if (s.type or "").lower() == typ]
    if exact:
        return exact, "signature"
    # a roofline signature's family is the one classify gave its type (the run's op_classes)
    other = [s.sig_id for s in same if s.family]
    return (other, "shapes") if other else ([], "")


def _pick(groups, ev: dict[str, Any], per, ops: Sequence[str]) -> tuple[list, str]:
    """The instances of the plan's call site among the signature's call sites."""
    every = [m for members, _ in groups for m in members]
    if len(groups) <= 1:
        return every, ""
    cs = ev.get("call_site") if isinstance(ev.get("call_site"), dict) else {}
    ci, n = cs.get("cluster"), cs.get("clusters")
    if isinstance(ci, int) and n == len(groups) and 0 <= ci < n:
        return groups[ci][0], said("said.site_picked", i=ci + 1, n=n)
    if ops:   # a plan without its call site (older, or hand-written): the window ops decide
        wanted = {o.lower() for o in ops}
        sub = [(k, j) for k, j in every if j and ({per[k][j - 1].type.lower(),
                                                   per[k][j - 1].name.lower()} & wanted)]
        if 0 < len(sub) < len(every):
            return sub, said("said.site_by_window_ops", k=len(sub), total=len(every), n=len(groups))
    return every, said("said.site_all", n=len(groups))


def _window(seq, j: int, wanted: list[str], reach: int) -> tuple[float, float, list[str]] | None:
    """(busy us, us from the first window op's start to the target's, types) of the nearest
    predecessors of seq[j] (within `reach`) that are the plan's window ops."""
    found = []
    for k in range(1, min(reach, j) + 1):
        op = seq[j - k]
        if op.type.lower() in wanted or op.name.lower() in wanted:
            found.append(op)
            if len(found) == len(wanted):
                break
    if not found:
        return None
    first = min(o.start for o in found)
    return (sum(o.dur_us for o in found), (seq[j].start - first) / 1000.0,
            [o.type for o in found])


def measure_site(site: "Site", per, signatures, df: pl.DataFrame, steps: list, lookback: int,
                 l2, l2_of_rows, frames: "Frames") -> SiteMeasure:
    """One plan site on the timeline `per`; `frames`: the timeline's rules' (call sites are
    told apart as analyze told them)."""
    ev = site.evidence or {}
    sig = ev.get("signature") if isinstance(ev.get("signature"), dict) else {}
    ids, how = matching_signatures(signatures, sig)
    groups = call_sites(per, ids, frames) if ids else []
    if not groups:
        return SiteMeasure(site.id, False, note=said("said.no_kernel", sig=(
            f"{sig.get('type', '?')} {sig.get('input_shapes', '?')} {sig.get('dtypes', '')}")))
    win = ev.get("window") if isinstance(ev.get("window"), dict) else {}
    ops = [str(o) for o in (win.get("ops") or []) if o]
    members, picked = _pick(groups, ev, per, ops)
    wanted = [o.lower() for o in ops]
    reach = len(ops) + max(lookback, 1)
    durs: dict[Any, list[float]] = defaultdict(list)
    wins: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    found_ops: list[str] = []
    for key, j in sorted(members, key=lambda kj: (kj[0][0] is None, str(kj[0][0]), kj[1])):
        step = key[0]
        durs[step].append(per[key][j].dur_us)
        w = _window(per[key], j, wanted, reach) if wanted else None
        if w is not None:
            wins[step].append(w[:2])
            found_ops = found_ops or w[2]
    rows = df.filter(pl.col("_ix").is_in([per[k][j].row for k, j in members]))
    unit = "step" if steps != [None] else "instance"
    agg_unit = unit if unit == "step" else "profile"
    ordered = sorted(durs, key=lambda s: (s is None, s))
    per_step_t = ([sum(durs[s]) / len(durs[s]) for s in ordered] if unit == "step"
                  else [d for s in ordered for d in durs[s]])
    per_step_total = [sum(durs[s]) for s in ordered]
    wsteps = sorted(wins, key=lambda s: (s is None, s))
    per_step_w = [sum(b for b, _ in wins[s]) / len(wins[s]) for s in wsteps]
    per_step_gap = [sum(g for _, g in wins[s]) / len(wins[s]) for s in wsteps]
    per_step_wait: list[float] = []
    if "wait_us" in rows.columns and rows["wait_us"].null_count() < rows.height:
        waits = (rows.group_by(pl.col("step").fill_null(-1))
                 .agg(pl.col("wait_us").fill_null(0.0).mean(), pl.col("wait_us").is_not_null().any()
                      .alias("_has")).filter(pl.col("_has")).sort("step"))
        per_step_wait = [float(x) for x in waits["wait_us"].to_list()]
    l2_rate, l2_src = l2_of_rows(rows, l2)
    stream = Counter(k[1] for k, _ in members).most_common(1)[0][0]
    notes = []
    if ops and not per_step_w:
        notes.append(said("said.window_ops_missing", ops=", ".join(ops)))
    if picked:
        notes.append(picked)
    kernel_type = per[members[0][0]][members[0][1]].type
    if how == "shapes":
        notes.append(said("said.matched_by_shapes", kernel=kernel_type, planned=sig.get("type")))
    n_steps = max(1, len(durs))
    return SiteMeasure(
        site.id, True, how, kernel_type, len(members), len(members) / n_steps, stream,
        target=Stat.of(per_step_t, unit),
        target_total=Stat.of(per_step_total, agg_unit),
        window=Stat.of(per_step_w, agg_unit), window_ops=tuple(found_ops),
        window_gap=Stat.of(per_step_gap, agg_unit), wait=Stat.of(per_step_wait, agg_unit),
        l2_hit_rate=l2_rate, l2_source=l2_src, note="; ".join(notes))
