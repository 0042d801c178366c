"""`prefetch_design.md`: the workflow's step-1 deliverable (方案设计), in English or Chinese.

Targets and why, the roofline's conclusions, the chosen windows and why, the files to change and
the switch path (config -> __init__ -> forward), sizes and their basis, expected savings, what
was not planned and why, risks, and the confirmation gate (方案确认): review, then
`cannbot prefetch apply PLAN`. A pure function of `planning.DesignInputs`; no IO. The text of
both languages is in the catalog (configs/messages.yaml, `design.*`).
"""

from __future__ import annotations

from ..fmt import mib, mib_number, number, size_text
from ..i18n import localize, texts
from .design_inputs import DesignInputs, SiteView
from .picture import links, pictures
from ..contract.plan import ENV_SIZE, ENV_SWITCH, call_form, decode_guard_text
from .ranks_design import rank_lines




def render_design(d: DesignInputs, plan_name: str = "prefetch_plan.yaml") -> str:
    t = texts("design", d.lang)
    def loc(text):   # a stored English sentence in the document's language
        return localize(text, d.lang)
    positions = texts("design.position", d.lang)
    L: list[str] = [f"# {t['title']}", "", t["status"], "",
                    t["mode_auto"] if d.mode == "auto" else t["mode_manual"], ""]
    hw = d.hardware
    L.append("- " + t["hw_line"].format(
        label=t["hw"], name=hw.get("name"), hbm=hw.get("hbm_bw_tbps"),
        l2=mib_number(hw.get('l2_bytes') or 0), cmo=hw.get("cmo_bw_gbps"),
        detected=loc(hw.get("detected_from", ""))))
    if d.profile:
        L.append("- " + t["profile_line"].format(
            label=t["profile"], path=d.profile.get("path"), layout=d.profile.get("layout"),
            level=d.profile.get("level") or t["level_unknown"], steps=d.profile.get("steps")))
    L.append("")
    planned = [v for v in d.sites if v.planned]
    listed = [v for v in d.sites if not v.planned]

    L += [f"## {t['targets']}", ""]
    if not planned:
        L += [t["no_sites"], ""]
    for v in planned:
        L.append(f"- **{v.site.target.cls}.{v.site.target.attr}**"
                 + t["tagged"].format(tag=f"`{v.site.id}`, {v.site.mapping}") + _why(v, t, d.lang))
    L.append("")

    L += [f"## {t['roofline']}", ""]
    if d.signatures:
        L += [t["sig_head"], "|---|---:|---:|---:|---:|---:|---|---|"]
        for s in d.signatures:
            why = (t["labelled"].format(label=f"`{s.get('evidence')}`", text=loc(s.get("evidence_why")))
                   if s.get("evidence")
                   else "roofline")
            L.append(f"| {s['type']} `{s['input_shapes']}` | {s['count']} | {number(s['mean_us'])} | "
                     f"{number(s['t_memory_us'])} | {number(s['t_compute_us'], 2)} | "
                     f"{number(s['ai'])} / {number(s['ridge'])} | {s['verdict']} "
                     f"({s['measured_verdict'] or '–'}) | {why.replace('|', '/')} |")
    else:
        L.append(t["roofline_none"])
    L.append("")
    L += rank_lines(d)          # --rank all: the spread across ranks

    L += [f"## {t['windows']}", ""]
    for v in planned + listed:
        L.append(f"- `{v.site.id}`" + t["tagged"].format(tag=t["planned"] if v.planned else t["listed"])
                 + _window_text(v, t))
        i = v.site.insert
        L.append(f"  {t['insert_line'].format(cls=i.cls, method=i.method, anchor=i.anchor_call, position=positions[i.position], dep=v.site.dependency, weight=v.site.target.weight_expr)}")
        if v.site.target.alt_weight_exprs:
            L.append("  " + t["alt_paths"].format(
                paths=", ".join(f"`{p}`" for p in v.site.target.alt_weight_exprs)))
        shift = v.site.evidence.get("window", {}).get("shift")
        if shift in ("earlier", "later", "fallback") and v.candidate is not None:
            L.append(f"  {t['shift_placed'].format(shift=shift)}")
    L.append("")
    pics = pictures(d)
    if pics:
        L += [t["pictures"], ""] + [f"{line}" for line in links(pics)] + [""]

    L += [f"## {t['files']}", ""]
    files = sorted({s.target.file for s in d.plan.sites})
    for f in files:
        where = sorted({f"{s.insert.cls}.{s.insert.method}" for s in d.plan.sites
                        if s.target.file == f})
        L.append("- " + t["labelled"].format(label=f"`{f}`", text=", ".join(where)))
    if not files:
        L.append(f"- {t['none']}")
    sw = d.plan.switch
    readers = sorted({s.insert.cls for s in d.plan.sites})
    if readers:
        L.append("- " + t["labelled"].format(label=t["switch_readers"],
                                             text=", ".join(f"`{c}.__init__`" for c in readers)))
    L += ["", t["switch"].format(name=sw.name, path=sw.config_path, env=ENV_SWITCH,
                                 size_path=sw.size_path, env_size=ENV_SIZE,
                                 route=_switch_route(sw.config_path, t)),
          _mode_line(d.plan, t), ""]

    L += [f"## {t['sizes']}", ""]
    ladder = planned[0].site.ladder if planned else {"up": [0.7, 1.0], "down": [0.3, 0.1]}
    coef = planned[0].site.basis.coefficient if planned else 0.5
    L += [t["size_note"].format(coef=coef, up=" → ".join(map(str, ladder.get("up", []))),
                                down=" → ".join(map(str, ladder.get("down", [])))), ""]
    for v in planned:
        b = v.site.basis
        L += [f"**{v.site.id}** — {' × '.join(map(str, b.dims))}, {b.dtype_bytes:g} B/elem, "
              f"`{b.formula}`", "", t["cap_head"], "|---|---:|---|---|"]
        for c in b.caps:
            L.append(f"| {c.name} | {size_text(c.bytes)} | {_binds(c, b.bound_by, t)} | {loc(c.note)} |")
        L += ["", t["bound"].format(bound=b.bound_by, size=size_text(v.site.max_size)), ""]
        L += _ladder_lines(v.site, t)
        weight = next((c.bytes for c in b.caps if c.name == "weight"), 0)
        if weight and v.site.max_size < 0.5 * weight and b.bound_by != "coefficient":
            why = t["small_window"] if b.bound_by in ("hbm_headroom", "cmo_rate_x_window") \
                else t["small_other"]
            L += [t["small"].format(share=f"{v.site.max_size / weight:.0%}", bound=b.bound_by,
                                    why=why), ""]
    for v in listed:
        b = v.site.basis
        caps = ", ".join(f"{c.name} {mib(c.bytes)}" + ("" if c.binding else t["paren"].format(x=t["risk_only"]))
                         for c in b.caps)
        L.append(f"- `{v.site.id}`" + t["tagged"].format(tag=t["listed"]) + f"{caps} → "
                 f"{t['bound'].format(bound=b.bound_by, size=size_text(v.site.max_size))}")
    if listed:
        L.append("")

    opt = f"{d.optimistic_share:.0%}"
    cmo = next((v.site.evidence.get("cmo_gbps") for v in planned
                if (v.site.evidence or {}).get("cmo_gbps")), hw.get("cmo_bw_gbps"))
    L += [f"## {t['saving']}", "",
          t["saving_note"].format(opt=opt, cmo=number(cmo), hbm=hw.get("hbm_bw_tbps")), ""]
    for v in planned + listed:
        ev = v.site.evidence
        po = ev.get("saving_per_op_us", {})
        s = v.site.saving_us
        if s is None:
            L.append(f"- {v.site.id}: {t['unknown']}")
            continue
        L.append("- " + t["saving_line"].format(
            id=v.site.id, low=number(s.low), mid=number(s.mid), high=number(s.high),
            per_op=number(po.get("mid")), mean=number(ev.get("mean_us")),
            opt=t["optimistic"].format(opt=opt) if ev.get("optimistic") else ""))
    L.append("")

    L += [f"## {t['not_planned']}", ""]
    if not d.rejections:
        L.append(f"- {t['none']}")
    for r in d.rejections:
        tag = t["paren"].format(x=t["unmapped"]) if r.reason_code == "unmapped" else ""
        site = f" `{r.site}`" if r.site else ""
        L.append("- " + t["labelled"].format(label=f"`{r.signature}`{site} — **{r.reason_code}**{tag}",
                                             text=loc(r.reason)))
    L.append("")

    L += [f"## {t['risks']}", ""]
    L.append(f"- {t['risk_window']}")
    for s in d.plan.sites:
        if s.guard is not None:
            L.append("- " + t["labelled"].format(label=f"`{s.id}`",
                                                 text=t["risk_tokens"].format(guard=decode_guard_text(s))))
    if any(c.name == "l2_budget" for v in planned for c in v.site.basis.caps):
        L.append(f"- {t['risk_l2'].format(n=max(len(planned), 1))}")
    cmo_binds = any(c.name == "cmo_rate_x_window" and c.binding for v in planned
                    for c in v.site.basis.caps)
    L.append(f"- {t['risk_cmo_bound' if cmo_binds else 'risk_cmo'].format(cmo=hw.get('cmo_bw_gbps'))}")
    if d.plan.mode == "ge_graph":
        L.append(f"- {t['risk_graph']}")
    for n in d.notes:
        L.append(f"- {loc(n)}")
    for v in planned:
        for n in v.site.evidence.get("notes", []):
            L.append("- " + t["labelled"].format(label=f"`{v.site.id}`", text=loc(n)))
    L.append("")
    L += [f"## {t['gate']}", "", t["gate_text"].format(plan=plan_name), ""]
    L += _installed_lines(d, t)
    return "\n".join(L)


def _installed_lines(d: DesignInputs, t: dict[str, str]) -> list[str]:
    """The gate says what `apply --write` will say: a planned file of an installed package
    (site-packages) is refused unless --allow-installed; copy it into the project."""
    from pathlib import Path

    from ..rewrite.installed import installed_location

    planned = {Path(s.target.file).name for s in d.plan.sites}
    out = []
    for f in d.model_files:
        where = installed_location(f) if Path(f).name in planned else None
        if where is not None:
            out += [t["gate_installed"].format(path=f, where=where, name=Path(f).name), ""]
    return out


def _binds(c, bound_by: str, t: dict[str, str]) -> str:
    """Only the cap that sets max_size binds; a binding kind above it does not (yet)."""
    if c.name == "weight":
        return "–"
    if not c.binding:
        return t["risk_only"]
    return t["binds"] if c.name == bound_by else t["above_size"]


def _ladder_lines(site, t: dict[str, str]) -> list[str]:
    """The tuning ladder as sizes (evidence.ladder_bytes, sizing.rung_sizes) and how it runs."""
    rungs = (site.evidence or {}).get("ladder_bytes")
    if not isinstance(rungs, dict):
        return []
    c0 = site.basis.coefficient
    up = [c for c in site.ladder.get("up", []) if c > c0]        # as rung_sizes keeps them
    down = [c for c in site.ladder.get("down", []) if 0 < c < c0]

    def rungs_text(coefs, sizes):
        return " → ".join(f"{c:g}: {mib(n)}" for c, n in zip(coefs, sizes)) or "–"
    return [t["ladder_sizes"].format(
        planned=mib(site.max_size), coef=f"{c0:g}",
        up=rungs_text(up, rungs.get("up", [])), down=rungs_text(down, rungs.get("down", [])),
        id=site.id), ""]


def _why(v: SiteView, t: dict[str, str], lang: str = "en") -> str:
    c = v.candidate
    if c is None:
        return t["why_manual"]
    ev = v.site.evidence
    key = "why_counters" if ev.get("verdict_by") == "counters" else "why_roofline"
    return t[key].format(type=c.target.type, why=localize(ev.get("verdict_why", ""), lang),
                         roof=ev.get("verdict", "–"), rwhy=localize(ev.get("roofline_why", ""), lang),
                         n=f"{c.per_step:g}", mean=number(c.mean_us))


def _window_text(v: SiteView, t: dict[str, str]) -> str:
    c = v.candidate
    if c is None:
        w = v.site.evidence.get("window", {})
        return f"manual: {w.get('manual', '')}"
    w = c.window
    ops = ", ".join(o.type for o in reversed(w.ops)) or "–"     # in execution order
    reason = t[f"reason_{w.branch}"].format(op=w.start_op.type, ops=ops, why=w.start_op.why)
    if w.instances < c.instances:
        reason += t["reason_agree"].format(n=w.instances, total=c.instances)
    return t["window_line"].format(branch=w.branch, reason=reason, time=number(w.time_us),
                                   min=number(w.min_us), inst=w.instances, ov=number(w.overlap_us))


def _mode_line(plan, t) -> str:
    """The execution mode and the call form the plan uses, and why (issue 30 part 5)."""
    form, default = plan.call_form, call_form(plan.mode)
    why = t["call_default"] if form == default else t["call_chosen"].format(default=default)
    return t["mode_line"].format(mode=plan.mode, call=form, what=t[f"call_{form}"], why=why)


def _switch_route(path: str, t: dict[str, str]) -> str:
    """How a serving engine's user sets a nested key (`design.switch_route.<parent>`: vllm-ascend's
    `additional_config`, a runner's `custom_params`); '' for a key without a known parent."""
    parent, _, key = path.rpartition(".")
    text = t.get(f"switch_route.{parent}")
    return text.format(key=key) if text else ""
