"""Steps 1-3 of seed 003's automatic analysis, and the manual mode: windows -> mapping -> sizing
-> Plan (+ what the design document needs).

The call `pipeline.build_plan()` makes (roofline is None in manual mode without a profile):

    from cannbot_prefetch.plan.build import PlanOptions, build_plan
    opts = PlanOptions(lookback=args.lookback, tp=args.tp, moe_tp=args.moe_tp,
                       experts_per_rank=args.experts_per_rank, targets=tuple(args.target),
                       window=args.window, dtype=args.dtype, mode=args.mode,
                       max_sites=args.max_sites, max_size_cap=args.max_size_cap,
                       src_map=tuple(args.src_map), max_query_len=None, lang=args.lang,
                       top=args.top, out_dir=str(out_dir), cmo_bw_gbps=args.cmo_bw)
    plan, design, rejections = build_plan(roofline, profile.info if profile else None, hw,
                                          args.model_src, args.model_config, opts)
    save_plan(plan, out_dir / "prefetch_plan.yaml")
    write_atomic(out_dir / "prefetch_design.md", render_design(design))   # design.py

Every None option takes the policy default (configs/policy.yaml). `config` may be a path to
config.json, a dict, or None (then `config.json` beside the model source is used). Bad input
raises InputError / SourceError naming the file and key or site (exit 2, nothing written).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from .. import reasons
from ..errors import InputError, SourceError
from ..mapping import Mapped, Mapper, target_ref
from ..mapping.guard import guard_for
from ..mapping.manual import Unplaceable, overlapped, parse_target, place_manual
from ..mapping.shape import role_of
from ..mapping.source import ModelSource, load_config, load_model_source
from ..mapping.stack import parse_src_map
from . import attribution, phase
from .schema import MODES, Guard, Plan, Site, Switch, Target, sha256_file
from ..roofline.shapes import dtype_bytes
from ..roofline.verdict import decide
from ..settings import configs_dir, policy
from ..gain import GainInputs, to_evidence
from ..sizing import Sized, Weight, WindowTime, size_site
from ..windows import Candidate, Rejection, TargetSig, Window, find_windows
from ..windows.placed import placed_window


@dataclass(frozen=True)
class PlanOptions:
    lookback: int | None = None
    tp: int = 1
    moe_tp: int = 1
    experts_per_rank: int | None = None
    targets: tuple[str, ...] = ()          # manual mode: CLASS.ATTR ...
    window: str | tuple[str, ...] | None = None   # manual mode: the dependency (one per target)
    dtype: str | None = None               # manual sizes: bf16 | fp16 | int8 (default: config's)
    mode: str | None = None                # eager | ge_graph | npugraph_ex
    max_sites: int | None = None
    max_size_cap: int | None = None
    src_map: tuple[str, ...] = ()          # OLD=NEW path prefixes for stack frames
    max_query_len: int | None = None       # decode: tokens per sequence up to this (guard.max_len)
    lang: str = "en"
    top: int | None = None                 # memory-bound signatures examined
    out_dir: str | None = None             # plan folder: target files are written relative to it
    cmo_bw_gbps: float | None = None
    min_window_us: float | None = None
    config_path: str = "enable_prefetch"   # switch key path read from the model's config
    ranks: Any = None                      # --rank all: ranks.CrossRank (targets and windows
                                           # that hold on every rank); None for one rank


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
    notes: tuple[str, ...] = ()
    ranks: Any = None                          # --rank all: the CrossRank (design: the spread)


def build_plan(roofline: Any, profile_info: Any, hw: Any, model_src: str | os.PathLike,
               config: str | os.PathLike | dict | None, options: PlanOptions,
               ) -> tuple[Plan, DesignInputs, tuple[Rejection, ...]]:
    pol = policy()
    opts = _defaults(options, pol)
    if hw is None:
        from ..hardware import resolve
        hw = resolve(None, profile_info)
    cfg, cfg_path = _config(config, model_src)
    ms = load_model_source(model_src, cfg, cfg_path, opts.tp, opts.moe_tp)
    ms.switch_name = pol["plan"].get("switch_name", "enable_prefetch")
    mapper = Mapper(ms, parse_src_map(opts.src_map), mode=opts.mode)
    notes: list[str] = []
    rejections: list[Rejection] = []
    views: list[tuple[Candidate | None, Mapped, Sized]] = []
    signatures: list[Any] = []
    if opts.targets:
        views, manual_rej = _manual(ms, mapper, roofline, hw, opts, cfg, notes)
        rejections += manual_rej
        mode = "manual"
    else:
        if roofline is None:
            raise InputError("a profile is needed unless --target is given (manual mode)")
        signatures, not_targets, res = _windows(roofline, opts, pol, cfg, hw)
        rejections += not_targets
        rejections += res.rejections
        notes += res.notes
        mapped_any = False
        min_us = float(opts.min_window_us if opts.min_window_us is not None
                       else pol["windows"]["min_window_us"])
        for cand in res.candidates:
            got = mapper.map(cand)
            if isinstance(got, Rejection):
                rejections.append(got)
                continue
            mapped_any = True
            cand = _placed(cand, got, min_us)     # the costed window is the placed one
            if isinstance(cand, Rejection):
                rejections.append(cand)
                continue
            views.append((cand, got, _size(got, cand, hw, opts, 1, cfg)))
        if res.candidates and not mapped_any:
            _no_match(ms, res.candidates)
        notes += attribution.check(views, cfg)
        mode = "auto"
    planned, listed, more_rej = _select(views, hw, opts, cfg)
    rejections += more_rej
    sites = _unique_ids(tuple(_site(c, m, s, opts, hw) for c, m, s in planned))
    plan = Plan(
        sites=sites, mode=opts.mode,
        switch=Switch(pol["plan"].get("switch_name", "enable_prefetch"), False, opts.config_path),
        created_from=_created_from(profile_info, hw, ms, cfg_path),
        rejections=tuple(r.to_dict() for r in rejections))
    site_views = [SiteView(s, True, c, m, z) for s, (c, m, z) in zip(sites, planned)]
    site_views += [SiteView(_site(c, m, z, opts, hw), False, c, m, z, why)
                   for (c, m, z), why in listed]
    design = DesignInputs(
        plan=plan, mode=mode, lang=opts.lang, hardware=_hw_dict(hw),
        profile=_profile_dict(profile_info),
        signatures=tuple(_sig_dict(s) for s in signatures), sites=tuple(site_views),
        rejections=tuple(rejections), model_files=tuple(ms.files), notes=tuple(notes),
        ranks=opts.ranks)
    return plan, design, tuple(rejections)


def target_windows(roofline, options: PlanOptions, cfg: dict[str, Any] | None = None):
    """Seed steps 1-2 as build_plan takes them, without model source (the API's
    `Analysis.windows()`): (targets' rejections, WindowResult). `cfg`: the model's config.json,
    when known (decode vs prefill by query length uses its attention sizes)."""
    pol = policy()
    _, not_targets, res = _windows(roofline, _defaults(options, pol), pol, cfg or {},
                                   getattr(roofline, "hardware", None))
    return not_targets, res


def _windows(roofline, opts: PlanOptions, pol: dict[str, Any], cfg: dict[str, Any], hw):
    """The targets (memory-bound on every rank that sets their pace, with --rank all) and their
    windows (the smallest across ranks): (signatures examined, rejections, WindowResult)."""
    signatures, targets, not_targets = _targets(roofline, opts, pol, cfg)
    if opts.ranks is not None:
        targets, off_rank = opts.ranks.targets(targets)
        not_targets = [*not_targets, *off_rank]
    res = find_windows(roofline.table, targets, lookback=opts.lookback,
                       min_window_us=opts.min_window_us, all_signatures=roofline.signatures,
                       hbm_bps=_hbm(hw))
    if opts.ranks is not None:
        res = opts.ranks.windows(res)
    return signatures, not_targets, res


# ------------------------------------------------------------------------------ pieces

def _targets(roofline, opts: PlanOptions, pol: dict[str, Any], cfg: dict[str, Any]):
    """Seed step 1: the top memory-bound signatures -> (examined, targets, rejections). Prefill
    is listed first (decode only); then the deciding verdict (measured where counters exist)
    must be memory-bound: latency- and compute-bound ops are listed with the reason."""
    from ..roofline.classify import select_top
    from ..roofline.verdict import split_targets

    signatures = list(select_top(roofline, opts.top))
    per_step = phase.query_lengths(roofline.table, cfg, opts.tp)
    decode, rejections = [], []
    for s in signatures:
        q, how = phase.signature_query_len(roofline.table, s, per_step)
        if q is not None and q > opts.max_query_len:
            t = TargetSig.of(s)
            rejections.append(Rejection(t.label, reasons.PREFILL,
                                        f"{q} tokens per sequence ({how}) > "
                                        f"{opts.max_query_len}: prefill is listed, not planned "
                                        "(decode only)", t))
        else:
            decode.append(s)
    targets, not_bound = split_targets(decode, pol["verdict"])
    for s, code, why in not_bound:
        t = TargetSig.of(s)
        rejections.append(Rejection(t.label, code, why, t))
    return signatures, targets, rejections


def _defaults(o: PlanOptions, pol: dict[str, Any]) -> PlanOptions:
    mode = o.mode or pol["plan"].get("mode", "eager")
    if mode not in MODES:
        raise InputError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    # manual mode: the targets the user names are the sites (unless --max-sites says fewer)
    default_sites = len(o.targets) if o.targets else pol["plan"]["max_sites"]
    max_sites = default_sites if o.max_sites is None else o.max_sites
    if max_sites < 1:
        raise InputError(f"--max-sites must be at least 1, not {max_sites}")
    if o.experts_per_rank is not None and o.experts_per_rank < 1:
        raise InputError(f"--experts-per-rank must be at least 1, not {o.experts_per_rank}")
    if o.moe_tp < 1:
        raise InputError(f"--moe-tp must be at least 1, not {o.moe_tp}")
    if o.lang not in ("en", "zh"):
        raise InputError(f"--lang must be en or zh, not {o.lang!r}")
    return replace(o, mode=mode, max_sites=max_sites,
                   max_query_len=o.max_query_len if o.max_query_len is not None
                   else int(pol["sizing"]["decode_max_query_len"]),
                   top=o.top if o.top is not None else int(pol["report"]["top_n"]),
                   lookback=o.lookback if o.lookback is not None else int(pol["windows"]["lookback"]))


def _config(config, model_src) -> tuple[dict[str, Any], str]:
    if isinstance(config, dict):
        return config, ""
    if config is None:
        p = Path(model_src)
        cand = (p if p.is_dir() else p.parent) / "config.json"
        if not cand.is_file():
            raise InputError("model config.json not found beside the model source; pass "
                             "--model-config", path=str(cand))
        config = cand
    return load_config(config)


def _dtype_bytes(opts: PlanOptions, cfg: dict[str, Any], target: TargetSig | None,
                 lin=None) -> float:
    """Bytes per weight element: the profile's operand dtype; else the dtype the parameter is
    declared with in the source (`params_dtype=torch.float32` routers); else --dtype; else the
    config's dtype; else bf16."""
    if target is not None and target.dtypes:
        parts = target.dtypes.split(";")
        b = dtype_bytes(parts[1] if len(parts) > 1 and parts[1] else parts[0])
        if b:
            return float(b)
    if lin is not None and getattr(lin, "dtype_bytes", None):
        return float(lin.dtype_bytes)
    name = (opts.dtype or cfg.get("torch_dtype") or cfg.get("dtype") or "bf16")
    b = dtype_bytes(str(name).replace("torch.", ""))
    if b is None:
        raise InputError(f"--dtype must be bf16, fp16, int8 or fp32, not {name!r}")
    return float(b)


def _weight(m: Mapped, b: float, cfg: dict[str, Any], opts: PlanOptions) -> Weight:
    lin = m.target
    role = m.role
    hidden = cfg.get("hidden_size")
    inter = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    epr = opts.experts_per_rank
    if role in ("gmm1", "gmm2") and epr is None:
        epr = lin.dims[0] if lin.dims else None
    return Weight(tuple(lin.dims or ()), b, role, hidden, inter, opts.moe_tp, epr)


def _size(m: Mapped, cand: Candidate | None, hw, opts: PlanOptions, in_flight: int,
          cfg: dict[str, Any] | None = None) -> Sized:
    t = cand.target if cand else None
    b = _dtype_bytes(opts, cfg or {}, t, m.target)
    w = _weight(m, b, cfg or {}, opts)
    if cand is None:
        return size_site(w, WindowTime(None), None, hw, in_flight=in_flight,
                         user_cap=opts.max_size_cap, cmo_bw_gbps=opts.cmo_bw_gbps)
    # an "earlier" insertion also overlaps work before the window (a MatMul): that time is not
    # free bandwidth, so only the measured window counts (and the site ranks after exact ones)
    time_us = effective_window_us(cand, m)
    wbytes = effective_window_bytes(cand, m)
    g = GainInputs(cand.mean_us, int(t.bytes or t.weight_bytes or 0), float(t.t_compute_us or 0.0),
                   cand.per_step, time_us, int(wbytes))
    hit = _experts_hit(m, t, cfg or {})
    if hit is not None:   # only the experts the tokens hit are read (moe.py)
        g = replace(g, useful_share=hit.share)
    sized = size_site(w, WindowTime(time_us, wbytes), g, hw, in_flight=in_flight,
                      user_cap=opts.max_size_cap, cmo_bw_gbps=opts.cmo_bw_gbps)
    if hit is None:
        return sized
    floor = float(policy()["sizing"]["moe_min_hit_share"])
    blocked = "" if hit.share >= floor else (
        f"expected experts hit {hit.share:.1%} < sizing.moe_min_hit_share {floor:.0%}: most "
        "prefetched expert bytes would be traffic the GroupedMatmul never reads")
    return replace(sized, notes=sized.notes + (f"MoE: {hit.text()}",), blocked=blocked)


def _experts_hit(m: Mapped, t: TargetSig, cfg: dict[str, Any]):
    """Expected experts hit per call of a GroupedMatmul target (None for dense targets or when
    the config does not name the experts and top-k)."""
    if m.role not in ("gmm1", "gmm2") or not t.m:
        return None
    from ..moe import from_config
    dims = m.target.dims or ()
    e_rank = dims[0] if len(dims) == 3 else (t.weight_shape[0] if len(t.weight_shape) == 3 else 0)
    return from_config(cfg, int(t.m), int(e_rank))


def effective_window_us(cand: Candidate, m: Mapped) -> float:
    """The usable time of the window the plan costs: the placed one (`_placed`)."""
    return float(cand.window.time_us)


def effective_window_bytes(cand: Candidate, m: Mapped) -> int:
    """What the placed window's ops move (they compete with the prefetch for HBM)."""
    return int(sum(o.bytes for o in cand.window.ops))


def _placed(cand: Candidate, m: Mapped, min_us: float) -> Candidate | Rejection:
    """The candidate with the window its insertion really gives (issue 10 item 4): mapping says
    which profiled op the inserted call precedes, windows/placed.py costs the span from there to
    the target; no safe window there -> a rejection naming the ops."""
    i = m.placement.insert
    where = f"{i.position} `{i.anchor_call}` in {i.cls}.{i.method}"
    got = placed_window(cand, m.precedes, min_us, where)
    if isinstance(got, Window):
        return replace(cand, window=got)
    code, why = got
    return Rejection(cand.target.label, code, f"{m.target.qualname}: {why}", cand.target,
                     cand.cluster, cand.clusters, cand.instances, cand.per_step, cand.mean_us,
                     cand.preds, cand.stack, m.target.qualname, cand.site_rank)


def _select(views, hw, opts: PlanOptions, cfg: dict[str, Any]):
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
                why = (f"; {m.placement.note}, so it also overlaps the memory-heavy "
                       f"{c.window.start_op.type} whose output starts the window and whose "
                       f"{c.window.start_op.bytes / 2**20:.1f} MiB the prefetch would compete with")
            rej.append(_rej(c, m, reasons.NOT_WORTH_IT,
                            f"{q}: no expected saving (bound by {s.basis.bound_by}, "
                            f"max_size {s.max_size} B){why}"))
            continue
        if len(keep) >= opts.max_sites:
            listed.append(((c, m, s), f"--max-sites {opts.max_sites}"))
            last = keep[-1][1].target.qualname
            rej.append(_rej(c, m, reasons.MAX_SITES,
                            f"{q}: expected {_us(s)} µs/step, ranked by expected saving below "
                            f"the {opts.max_sites} site(s) allowed (--max-sites; the last "
                            f"planned, {last}, expects {_us(keep[-1][2])} µs/step)"))
            continue
        keep.append((c, m, s))
    n = len(keep)
    if n > 1:   # the L2 budget is shared by the sites in flight together
        keep = [(c, m, _size(m, c, hw, opts, n, cfg)) for c, m, _ in keep]
    return keep, listed, rej


def _us(s: Sized) -> str:
    return f"{s.saving_us.mid:.1f}" if s.saving_us is not None else "unknown (no profile)"


def _rej(c: Candidate | None, m: Mapped, code: str, why: str) -> Rejection:
    label = c.target.label if c else m.target.qualname
    return Rejection(label, code, why, c.target if c else None, site=m.target.qualname)


def _site_id(m: Mapped) -> str:
    name = target_ref(m.placement, m.target)
    return re.sub(r"[^A-Za-z0-9_]+", "-", f"{name.cls}-{name.attr}").lower().strip("-")


def _unique_ids(sites: tuple[Site, ...]) -> tuple[Site, ...]:
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


def _site(c: Candidate | None, m: Mapped, s: Sized, opts: PlanOptions, hw) -> Site:
    pl = m.placement
    ev: dict[str, Any] = {"role": m.role}
    if c is not None:
        t, w = c.target, c.window
        dec = decide(t, policy()["verdict"])
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
        target=Target(_rel(pl.file, opts.out_dir), tcls, tattr, pl.weight_expr, pl.scope),
        insert=pl.insert, dependency=pl.dependency, join=pl.join, max_size=int(s.max_size),
        basis=s.basis, ladder=s.ladder, mapping=mapping, evidence=ev, saving_us=s.saving_us,
        source_sha256=sha256_file(pl.file),
        guard=Guard(m.guard[0], m.guard[1], opts.max_query_len) if m.guard else None)


def _manual(ms: ModelSource, mapper: Mapper, roofline, hw, opts: PlanOptions, cfg, notes):
    """Each --target planned, or rejected with apply's / the mapping's reason (all of them
    rejected: the first reason is an error, exit 2)."""
    out = []
    rejected: list[tuple[Unplaceable, str]] = []
    windows_by_attr: dict[str, Candidate] = {}
    if roofline is not None:
        notes.append("manual mode with a profile: windows measured where the target's shape "
                     "matches a signature")
        res = find_windows(roofline.table, [s for s in roofline.signatures
                                            if s.verdict == "memory-bound"],
                           lookback=opts.lookback, all_signatures=roofline.signatures,
                           hbm_bps=_hbm(hw))
        for c in res.candidates:
            got = mapper.find_target(c)
            if not isinstance(got, str):
                e = mapper.events[got[0]]
                windows_by_attr.setdefault(f"{e.owner}.{e.attr}", c)
    windows = _manual_windows(opts)
    for text, window in zip(opts.targets, windows):
        try:
            t = parse_target(text, ms, mapper.roots, mapper.events_of)
            pl = place_manual(ms, t, window, mapper.accept)
        except Unplaceable as exc:
            rejected.append((exc, text))
            continue
        b = _dtype_bytes(opts, cfg, None, t.lin)
        role = role_of(t.attr, t.lin, "", b)
        cand = windows_by_attr.get(t.lin.qualname)
        sig = _signature_of(roofline, t.lin) if roofline is not None and cand is None else None
        m_notes = [pl.note] if pl.note else []
        heavy = overlapped(ms, list(t.events), pl, t.t_idx)
        if heavy:
            names = ", ".join(f"{e.owner}.{e.attr}" for e in heavy[:6])
            m_notes.append(f"risk: the prefetch starts before {names} ({len(heavy)} MatMul call(s) "
                           f"before the target): it overlaps them and shares their HBM traffic"
                           + ("" if cand else "; without a profile their cost is unknown"))
        g, gwhy = guard_for(ms, pl, mapper.events)
        m = Mapped(t.lin, pl, "manual", role, window or "", tuple(m_notes), signature=sig,
                   guard=g, guard_why=gwhy)
        out.append((cand, m, _size(m, cand, hw, opts, 1, cfg)))
    if rejected and not out:
        exc = rejected[0][0]
        raise (InputError if exc.code == "shape_unknown" else SourceError)(
            str(exc), path=(ms.config_path or None) if exc.code == "shape_unknown"
            else ", ".join(sorted(ms.primary)))
    rej = [Rejection(text, reasons.SHAPE_UNKNOWN if exc.code == "shape_unknown"
                     else reasons.UNMAPPED, str(exc), site=text) for exc, text in rejected]
    return out, rej


def _manual_windows(opts: PlanOptions) -> list[str | None]:
    """--window once for every --target, or once per --target in the same order."""
    w = opts.window
    n = len(opts.targets)
    if w is None or isinstance(w, str):
        return [w] * n
    if len(w) == 1:
        return list(w) * n
    if len(w) != n:
        raise InputError(f"--window is given {len(w)} times for {n} --target(s): give it once for "
                         f"all, or once per --target in the same order")
    return list(w)


def _signature_of(roofline, lin) -> dict[str, Any] | None:
    """The profile's MatMul-family signature whose weight shape is the manual target's (the one
    with the most time when several match), whatever its verdict; None when none matches."""
    from ..mapping.shape import dims_match
    hits = [s for s in roofline.signatures if s.n and s.k and dims_match(lin, s.n, s.k, s.family)]
    if not hits:
        return None
    best = max(hits, key=lambda s: s.total_us or 0.0)
    return {"type": best.type, "input_shapes": best.input_shapes, "dtypes": best.dtypes}


def _no_match(ms: ModelSource, cands: Sequence[Candidate]) -> None:
    """Every candidate failed to match a shape: say why (missing config keys first)."""
    from ..mapping.shape import unknown_dims
    missing = [lin for lin in unknown_dims(ms) if lin.missing_key]
    if missing:
        keys = sorted({lin.missing_key for lin in missing})
        raise InputError(f"config key(s) {', '.join(keys)} missing: the weight shapes of "
                         f"{', '.join(lin.qualname for lin in missing[:4])} cannot be evaluated",
                         path=ms.config_path or None)
    shapes = sorted({f"[{c.target.n}, {c.target.k}]" for c in cands})
    have = sorted({f"{lin.qualname} {list(lin.dims)}" for lin in ms.linears.values() if lin.dims})
    raise InputError(f"no kernel weight shape ({', '.join(shapes)}) matches a linear-like "
                     f"attribute of the model source ({'; '.join(have[:8]) or 'none found'}): "
                     f"is it the profiled model, with its config and --tp?",
                     path=", ".join(ms.files))


def _created_from(info, hw, ms: ModelSource, cfg_path: str) -> dict[str, Any]:
    inputs: dict[str, Any] = {"model_src_sha256": {Path(f).name: sha256_file(f) for f in ms.files}}
    if cfg_path:
        inputs["config_sha256"] = sha256_file(cfg_path)
    d: dict[str, Any] = {"profile": getattr(info, "path", None), "hardware": getattr(hw, "name", None),
                         "inputs": inputs}
    over = dict(getattr(hw, "overrides", {}) or {})
    if over:   # --hbm-bw / --peak-tflops / --cmo-bw: report applies them again (gain.py)
        d["hardware_overrides"] = over
    path = getattr(hw, "path", "") or ""
    if path and not Path(path).resolve().is_relative_to(configs_dir().resolve()):
        d["hardware_file"] = str(Path(path).resolve())   # a calibrated / user profile
    return d


def _hbm(hw) -> float | None:
    """HBM bytes/s of the part: window ops without counters are classed by roofline time."""
    return getattr(hw, "hbm_bw_bytes_per_s", None)


def _hw_dict(hw) -> dict[str, Any]:
    return {"name": getattr(hw, "name", "?"), "hbm_bw_tbps": getattr(hw, "hbm_bw_tbps", None),
            "l2_bytes": getattr(hw, "l2_bytes", None), "cmo_bw_gbps": getattr(hw, "cmo_bw_gbps", None),
            "detected_from": getattr(hw, "detected_from", "")}


def _profile_dict(info) -> dict[str, Any]:
    if info is None:
        return {}
    return {"path": info.path, "layout": info.layout, "level": info.level, "steps": list(info.steps)}


def _sig_dict(s: Any) -> dict[str, Any]:
    keys = ("sig_id", "type", "input_shapes", "dtypes", "count", "mean_us", "total_us", "share",
            "ai", "ridge", "t_compute_us", "t_memory_us", "verdict", "measured_verdict", "m", "n",
            "k", "weight_bytes", "note")
    return {k: getattr(s, k, None) for k in keys}
