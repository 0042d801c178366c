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

The steps live beside it: options.py (PlanOptions and their defaults), size.py (one site's
sizing inputs), sites.py (ranking and Site records), manual.py (--target), design_inputs.py
(what design.py renders).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from .. import reasons
from ..i18n import said
from ..errors import InputError
from ..mapping import Mapped, Mapper
from ..mapping.config import load_config
from ..mapping.source import ModelSource, load_model_source
from ..mapping.stack import parse_src_map
from ..policy import Policy
from ..settings import configs_dir
from ..gain import optimistic_share
from ..sizing import Sized
from ..windows import Candidate, Rejection, TargetSig, Window, find_windows
from ..windows.placed import placed_window
from . import attribution, phase
from .design_inputs import DesignInputs, SiteView, hw_dict, profile_dict, sig_dict
from .manual import manual_views
from .options import PlanOptions, with_defaults
from ..contract.plan import Plan, Switch
from .schema import sha256_file
from .size import hbm_bps, size_mapped
from .sites import select, site_of, unique_ids
from .switch_reach import unreachable_notes


def build_plan(roofline: Any, profile_info: Any, hw: Any, model_src: str | os.PathLike,
               config: str | os.PathLike | dict | None, options: PlanOptions, *,
               policy: Policy | None = None,
               ) -> tuple[Plan, DesignInputs, tuple[Rejection, ...]]:
    pol = policy or Policy.load()
    opts = with_defaults(options, pol)
    if hw is None:
        from ..hardware import resolve
        hw = resolve(None, profile_info, policy=pol)
    cfg, cfg_path, ms, mapper = _source(model_src, config, opts, pol)
    notes: list[str] = []
    rejections: list[Rejection] = []
    views: list[tuple[Candidate | None, Mapped, Sized]] = []
    signatures: list[Any] = []
    if opts.targets:
        views, manual_rej = manual_views(ms, mapper, roofline, hw, opts, cfg, notes)
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
            got, mapped = _best_placed(cand, mapper, min_us, hw, opts, cfg)
            mapped_any = mapped_any or mapped
            if isinstance(got, Rejection):
                rejections.append(got)
                continue
            views.append(got)
        if res.candidates and not mapped_any:
            _no_match(ms, res.candidates)
        notes += attribution.check(views, cfg)
        mode = "auto"
    planned, listed, more_rej = select(views, hw, opts, cfg)
    rejections += more_rej
    sites = unique_ids(tuple(site_of(c, m, s, opts, hw) for c, m, s in planned))
    plan = Plan(
        sites=sites, mode=opts.mode, call=opts.call,
        switch=Switch(pol["plan"].get("switch_name", "enable_prefetch"), False, opts.config_path),
        created_from=_created_from(profile_info, hw, ms, cfg_path),
        rejections=tuple(r.to_dict() for r in rejections))
    notes += unreachable_notes(ms, sites, plan.switch)
    site_views = [SiteView(s, True, c, m, z) for s, (c, m, z) in zip(sites, planned)]
    site_views += [SiteView(site_of(c, m, z, opts, hw), False, c, m, z, why)
                   for (c, m, z), why in listed]
    design = DesignInputs(
        plan=plan, mode=mode, lang=opts.lang, hardware=hw_dict(hw),
        profile=profile_dict(profile_info),
        signatures=tuple(sig_dict(s) for s in signatures), sites=tuple(site_views),
        rejections=tuple(rejections), model_files=tuple(ms.files), notes=tuple(notes),
        ranks=opts.ranks, optimistic_share=optimistic_share(pol))
    return plan, design, tuple(rejections)


def target_windows(roofline, options: PlanOptions, cfg: dict[str, Any] | None = None, *,
                   policy: Policy | None = None):
    """Seed steps 1-2 as build_plan takes them, without model source (the API's
    `Analysis.windows()`): (targets' rejections, WindowResult). `cfg`: the model's config.json,
    when known (decode vs prefill by query length uses its attention sizes)."""
    pol = policy or Policy.load()
    _, not_targets, res = _windows(roofline, with_defaults(options, pol), pol, cfg or {},
                                   getattr(roofline, "hardware", None))
    return not_targets, res


def _windows(roofline, opts: PlanOptions, pol: Policy, cfg: dict[str, Any], hw):
    """The targets (memory-bound on every rank that sets their pace, with --rank all) and their
    windows (the smallest across ranks): (signatures examined, rejections, WindowResult)."""
    signatures, targets, not_targets = _targets(roofline, opts, pol, cfg)
    if opts.ranks is not None:
        targets, off_rank = opts.ranks.targets(targets)
        not_targets = [*not_targets, *off_rank]
    res = find_windows(roofline.table, targets, lookback=opts.lookback,
                       min_window_us=opts.min_window_us, all_signatures=roofline.signatures,
                       hbm_bps=hbm_bps(hw), policy=pol)
    if opts.ranks is not None:
        res = opts.ranks.windows(res)
    return signatures, not_targets, res


# ------------------------------------------------------------------------------ pieces

def _targets(roofline, opts: PlanOptions, pol: Policy, cfg: dict[str, Any]):
    """Seed step 1: the top memory-bound signatures -> (examined, targets, rejections). Prefill
    is listed first (decode only); then the deciding verdict (measured where counters exist)
    must be memory-bound: latency- and compute-bound ops are listed with the reason."""
    from ..roofline.classify import select_top
    from ..roofline.verdict import split_targets

    signatures = list(select_top(roofline, opts.top))
    per_step = phase.query_lengths(roofline.table, cfg, opts.tp,
                                   attention_ops=pol.op_classes.get("attention_ops") or {})
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


def _source(model_src, config, opts: PlanOptions, pol: Policy):
    """(config, its path, ModelSource, Mapper): what mapping knows of the model."""
    cfg, cfg_path = _config(config, model_src)
    ms = load_model_source(model_src, cfg, cfg_path, opts.tp, opts.moe_tp, policy=pol)
    ms.switch_name = pol["plan"].get("switch_name", "enable_prefetch")
    return cfg, cfg_path, ms, Mapper(ms, parse_src_map(opts.src_map), mode=opts.mode,
                                    policy=pol)


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


def _best_placed(cand: Candidate, mapper: Mapper, min_us: float, hw, opts: PlanOptions,
                 cfg: dict[str, Any]) -> tuple[tuple | Rejection, bool]:
    """The site's view (candidate, mapped, sized) from the window decide chose or, when it
    chose a finished MatMul's output over the nearest light start (`cand.nearer`), from
    whichever of the two mapping places legally with the larger expected saving (gain.py, mid
    rate: hidden bytes, not raw length); the first one's rejection when neither places.
    Second: whether mapping found the target at all."""
    first: Rejection | None = None
    best: tuple | None = None
    mapped = False
    for c in (cand, cand.nearer) if cand.nearer is not None else (cand,):
        got = mapper.map(c)
        if isinstance(got, Rejection):
            first = first or got
            continue
        mapped = True
        placed = _placed(c, got, min_us)     # the costed window is the placed one
        if isinstance(placed, Rejection):
            first = first or placed
            continue
        view = (placed, got, size_mapped(got, placed, hw, opts, 1, cfg))
        if best is None or view[2].mid > best[2].mid:
            best = view
    return (best if best is not None else first), mapped


def _placed(cand: Candidate, m: Mapped, min_us: float) -> Candidate | Rejection:
    """The candidate with the window its insertion really gives (issue 10 item 4): mapping says
    which profiled op the inserted call precedes, windows/placed.py costs the span from there to
    the target; no safe window there -> a rejection naming the ops."""
    i = m.placement.insert
    where = said("part.where", position=i.position, call=i.anchor_call, fn=f"{i.cls}.{i.method}")
    got = placed_window(cand, m.precedes, min_us, where)
    if isinstance(got, Window):
        return replace(cand, window=got)
    code, why = got
    return Rejection(cand.target.label, code, f"{m.target.qualname}: {why}", cand.target,
                     cand.cluster, cand.clusters, cand.instances, cand.per_step, cand.mean_us,
                     cand.preds, cand.stack, m.target.qualname, cand.site_rank)


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
