"""`prefetch_design.md`: seed 003's step-1 deliverable (方案设计), in English or Chinese.

Targets and why, the roofline's conclusions, the chosen windows and why, the files to change and
the switch path (config -> __init__ -> forward), sizes and their basis, expected savings, what
was not planned and why, risks, and the confirmation gate (方案确认): review, then
`cannbot prefetch apply PLAN`. A pure function of `planning.DesignInputs`; no IO.
"""

from __future__ import annotations

from typing import Any

from ..gain import optimistic_share
from .build import DesignInputs, SiteView

_T: dict[str, dict[str, str]] = {
    "en": {
        "title": "Prefetch design",
        "status": "Status: **proposed** - nothing is changed until you approve it.",
        "mode_auto": "Mode: automatic analysis (profile → roofline → dependency windows → source).",
        "mode_manual": "Mode: manual (targets and window given on the command line).",
        "hw": "Hardware",
        "profile": "Profile",
        "targets": "1. Targets and why",
        "no_sites": "No site is planned. This is an honest outcome: do not add a prefetch "
                    "without a safe window (see section 7).",
        "roofline": "2. Roofline conclusions",
        "roofline_none": "No profile: no roofline (manual mode).",
        "sig_head": "| Signature | Count | Mean µs | t_memory µs | t_compute µs | AI / ridge | Verdict (measured) |",
        "windows": "3. Dependency windows and why",
        "files": "4. Files to change and the switch",
        "switch": "Switch `{name}` (default **off**): read `{path}` from the model config in "
                  "`__init__` (default False), store it on the module, guard every call in "
                  "`forward` with it. Config → `__init__` → `forward`.",
        "mode_line": "Execution mode `{mode}`: {what}.",
        "switch_readers": "switch read in",
        "mode_eager": "side stream (the side stream waits on the main one, the prefetch runs "
                      "under it, joined at the end of the layer's forward)",
        "mode_ge_graph": "plain call with its dependency (a Cmo node ordered after it)",
        "mode_npugraph_ex": "explicit side stream and events, joined before the end of forward",
        "sizes": "5. Sizes and their basis",
        "size_note": "max_size = weight bytes × conservative coefficient {coef}, then the "
                     "smallest cap applies. Tuning ladder: up {up}, down {down}.",
        "saving": "6. Expected saving",
        "saving_note": "Benefit model (REFERENCE.md §5): saved ≈ P / BW_eff × (1 − BW_eff / BW_L2), "
                       "BW_L2 = 3.4–5 × HBM (low / high), bounded by the op time minus its compute "
                       "floor, minus any window slowdown. Public gains are 0.35–8.9%: treat "
                       "predictions above {opt} per op as optimistic. The same function "
                       "(gain.py) gives this number to analyze's JSON and to `report`.",
        "not_planned": "7. Not planned, and why",
        "risks": "8. Risks",
        "gate": "9. Confirmation (方案确认)",
        "gate_text": "Review this design and `{plan}`. Edit `max_size` or `dependency` there if you "
                     "like (apply validates the file again). Then:\n\n"
                     "    cannbot prefetch apply {plan}            # shows the diff, writes nothing\n"
                     "    cannbot prefetch apply {plan} --write    # writes it (switch stays off)\n\n"
                     "Verify outputs with the switch off and on, profile before/after, and tune "
                     "max_size first (0.5 → 0.7 → 1.0, or 0.3 → 0.1), then the window, and only "
                     "then add more targets.",
        "why_counters": "memory-bound {type} by its counters ({why}); roofline: {roof} "
                        "({rwhy}); {n} call(s) per step, {mean} µs each",
        "why_roofline": "memory-bound {type} by the roofline ({why}; the profile has no "
                        "counters); {n} call(s) per step, {mean} µs each",
        "why_manual": "named with --target (manual mode)",
        "window_line": "seed table **{branch}**: {reason}. Usable time {time} µs (median, min "
                       "{min} µs over {inst} instances; other-stream overlap {ov} µs).",
        "insert_line": "Insert in `{cls}.{method}`, {pos} `{anchor}`, dependency `{dep}`; "
                       "weight `{weight}`.",
        "shift_earlier": "The nearest legal dependency is earlier than the window: the prefetch "
                         "also overlaps {what}; watch that op's time after enabling it.",
        "shift_later": "The nearest legal insertion comes after the window op: the usable "
                       "window shrinks to {time} µs.",
        "shift_fallback": "The window op could not be placed; the nearest legal dependency is used.",
        "cap_head": "| Cap | Bytes | Binds? | Basis |",
        "binds": "yes",
        "risk_only": "risk only",
        "small": "max_size is {share} of the weight, below the whole weights or large fractions public "
                 "practice prefetches (REFERENCE.md §5: LongCat-Flash 18/36/7 MiB = whole q_a/q_b/kv_a "
                 "weights; vllm-ascend PR 1509 gained only from 80-100 MB): the **{bound}** cap binds. "
                 "{why}",
        "small_window": "The window carries no more; a larger size needs an earlier dependency "
                        "(a longer window), which the report proposes once this one is measured.",
        "small_other": "Raise the cap only if its basis is wrong.",
        "bound": "bound by **{bound}** → max_size = {size}",
        "saving_line": "{id}: {low} / {mid} / {high} µs per step (low / mid / high), "
                       "{per_op} µs of {mean} µs per op{opt}",
        "optimistic": " — **optimistic** (> {opt} of the op)",
        "unknown": "unknown (no profile)",
        "unmapped": "unmapped candidate",
        "risk_window": "Prefetch competes with the window's own traffic: if the window op slows "
                       "down, lower max_size (0.5 → 0.3 → 0.1) or move the dependency.",
        "risk_tokens": "Decode only: the call is skipped when more than {n} tokens run (prefill).",
        "risk_l2": "A prefetch larger than what L2 can keep evicts other data; the L2 cap "
                   "bounds it, shared by {n} site(s) in flight.",
        "risk_cmo": "The CMO rate ({cmo} GB/s) is one public measurement: its cap "
                    "(`cmo_rate_x_window`) is shown as a risk and does not bind. If a single CMO "
                    "stream really runs at that rate, the prefetch outlasts its window. `report` "
                    "measures the rate from the CMO tasks of a prefetch-on profile and the next plan "
                    "uses it; or pass `--cmo-bw` to make it bind now.",
        "risk_cmo_bound": "The CMO rate ({cmo} GB/s) was given (`--cmo-bw`): its cap binds.",
        "risk_graph": "Graph mode: the dependency must be a tensor on the target's path; the "
                      "rewriter checks this statically before writing.",
        "risk_unchecked": "The rewriter's dependency check was not available: insertions are unchecked.",
        "reason_3b": "light predecessor(s) {ops}: the prefetch starts at {op}'s input",
        "reason_3a": "{op} is memory-heavy ({why}), but once it is done the bandwidth is free: "
                     "its output starts the prefetch; the window covers {ops}",
        "reason_agree": " ({n} of {total} instances agree)",
        "none": "none",
        "planned": "planned",
        "listed": "listed, not planned",
    },
    "zh": {
        "title": "预取方案设计",
        "status": "状态：**proposed（待确认）**——确认前不会修改任何代码。",
        "mode_auto": "方式：自动化分析（profiling → roofline → 依赖窗口 → 模型源码）。",
        "mode_manual": "方式：手动指定（命令行给出目标算子与依赖窗口）。",
        "hw": "硬件",
        "profile": "Profiling 数据",
        "targets": "1. 目标算子及选择原因",
        "no_sites": "没有可实施的预取位置。这是如实的结论：没有安全窗口时不要为了有改动而硬插 prefetch（见第 7 节）。",
        "roofline": "2. Roofline 分析结论",
        "roofline_none": "无 profiling 数据：未做 roofline 分析（手动模式）。",
        "sig_head": "| 算子签名 | 次数 | 平均 µs | t_memory µs | t_compute µs | AI / ridge | 判定（实测） |",
        "windows": "3. 依赖窗口及选择原因",
        "files": "4. 需修改的文件与开关传递路径",
        "switch": "开关 `{name}`（默认 **关闭**）：在 `__init__` 中从模型配置读取 `{path}`（默认 False），"
                  "保存在模块上，`forward` 中每处调用都用它保护。配置文件 → `__init__` → `forward`。",
        "mode_line": "执行模式 `{mode}`：{what}。",
        "switch_readers": "读取开关的位置",
        "mode_eager": "多流（副流等待主流，在副流上预取，在层 forward 末尾汇合）",
        "mode_ge_graph": "直接调用并传入依赖节点（图中 Cmo 节点排在依赖之后）",
        "mode_npugraph_ex": "显式副流与事件，在 forward 结束前汇合",
        "sizes": "5. 预取大小及依据",
        "size_note": "max_size = 权重字节数 × 保守系数 {coef}，再取各上限中最小者。调优阶梯：增大 {up}，减小 {down}。",
        "saving": "6. 预期收益",
        "saving_note": "收益模型（REFERENCE.md §5）：节省 ≈ P / BW_eff × (1 − BW_eff / BW_L2)，"
                       "BW_L2 = 3.4–5 × HBM（低 / 高），上限为算子耗时减去计算下限，再减去窗口变慢的部分。"
                       "公开实测收益为 0.35–8.9%：单算子预测超过 {opt} 视为乐观。analyze 的 JSON 与 `report` 使用同一函数（gain.py）计算此数值。",
        "not_planned": "7. 未纳入方案的候选及原因",
        "risks": "8. 风险",
        "gate": "9. 方案确认",
        "gate_text": "请审阅本方案及 `{plan}`。可直接在其中修改 `max_size` 或 `dependency`（apply 会重新校验）。确认后：\n\n"
                     "    cannbot prefetch apply {plan}            # 只显示 diff，不写文件\n"
                     "    cannbot prefetch apply {plan} --write    # 写入（开关保持关闭）\n\n"
                     "之后对比开关关/开的输出一致性，前后各跑一次 profiling；先只调 max_size"
                     "（0.5 → 0.7 → 1.0 或 0.3 → 0.1），再调依赖窗口，最后才增加目标。",
        "why_counters": "访存密集（memory-bound）{type}，由实测计数器判定（{why}）；roofline：{roof}（{rwhy}）；"
                        "每步 {n} 次，每次 {mean} µs",
        "why_roofline": "访存密集（memory-bound）{type}，由 roofline 判定（{why}；profiling 无计数器）；"
                        "每步 {n} 次，每次 {mean} µs",
        "why_manual": "由 --target 手动指定",
        "window_line": "决策表 **{branch}**：{reason}。可用时间 {time} µs（中位数，最小 {min} µs，共 {inst} 个实例；"
                       "其他流重叠 {ov} µs）。",
        "insert_line": "插入位置 `{cls}.{method}`，在 `{anchor}` {pos}，依赖 `{dep}`；权重 `{weight}`。",
        "shift_earlier": "最近的合法依赖早于依赖窗口：预取还会与 {what} 重叠；启用后请观察该算子耗时。",
        "shift_later": "最近的合法插入点晚于窗口算子：可用窗口缩小为 {time} µs。",
        "shift_fallback": "窗口算子无法在源码中定位，改用最近的合法依赖。",
        "cap_head": "| 上限 | 字节 | 是否生效 | 依据 |",
        "binds": "是",
        "risk_only": "仅风险提示",
        "small": "max_size 只有权重的 {share}，低于公开实践常用的整份权重或大比例（REFERENCE.md §5：LongCat-Flash "
                 "18/36/7 MiB 即 q_a/q_b/kv_a 整份权重；vllm-ascend PR 1509 仅在 80-100 MB 时有收益）：受 **{bound}** 上限约束。{why}",
        "small_window": "依赖窗口只能容纳这么多；更大的预取需要更早的依赖（更长的窗口），实测后报告会给出建议。",
        "small_other": "仅当该上限的依据有误时再放宽。",
        "bound": "由 **{bound}** 决定 → max_size = {size}",
        "saving_line": "{id}：每步 {low} / {mid} / {high} µs（低 / 中 / 高），单算子 {per_op} µs / {mean} µs{opt}",
        "optimistic": "——**乐观**（超过算子耗时 {opt}）",
        "unknown": "未知（无 profiling 数据）",
        "unmapped": "未能映射到源码的候选",
        "risk_window": "预取会与依赖窗口自身的访存争抢带宽：若前序窗口变慢，减小 max_size（50% → 30% → 10%）或调整依赖位置。",
        "risk_tokens": "仅 decode：token 数超过 {n} 时（prefill）跳过预取。",
        "risk_l2": "超过 L2 容量的预取会挤出其他数据；L2 上限已按同时在途的 {n} 个位置分摊。",
        "risk_cmo": "CMO 速率（{cmo} GB/s）为单次公开测量值：其上限（`cmo_rate_x_window`）仅作风险提示，不生效。若单条 CMO 流确实只有该速率，预取会超出窗口。`report` 会根据开启预取后 profiling 中的 CMO 任务测得速率，下一步方案据此计算；也可传 `--cmo-bw` 使其立即生效。",
        "risk_cmo_bound": "CMO 速率（{cmo} GB/s）由 `--cmo-bw` 给出：其上限生效。",
        "risk_graph": "图模式：依赖节点必须是目标算子路径上的张量；改写前会做静态检查。",
        "risk_unchecked": "改写器的依赖检查不可用：插入位置未经校验。",
        "reason_3b": "前序算子 {ops} 非访存密集：从 {op} 的输入开始预取",
        "reason_3a": "{op} 是访存密集算子（{why}），但其执行完成后带宽空闲：以其输出作为依赖窗口起点，窗口覆盖 {ops}",
        "reason_agree": "（{total} 个实例中 {n} 个一致）",
        "none": "无",
        "planned": "已纳入方案",
        "listed": "列出但未纳入",
    },
}

_POS = {"en": {"before": "before", "after": "after"}, "zh": {"before": "之前", "after": "之后"}}


def _fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def _mib(n: int) -> str:
    return f"{n:,} B ({n / 2**20:.2f} MiB)"


def render_design(d: DesignInputs, plan_name: str = "prefetch_plan.yaml") -> str:
    t = _T[d.lang]
    pos = _POS[d.lang]
    L: list[str] = [f"# {t['title']}", "", t["status"], "",
                    t["mode_auto"] if d.mode == "auto" else t["mode_manual"], ""]
    hw = d.hardware
    L.append(f"- {t['hw']}: {hw.get('name')} (HBM {hw.get('hbm_bw_tbps')} TB/s, L2 "
             f"{(hw.get('l2_bytes') or 0) / 2**20:.0f} MiB, CMO {hw.get('cmo_bw_gbps')} GB/s; "
             f"{hw.get('detected_from', '')})")
    if d.profile:
        L.append(f"- {t['profile']}: `{d.profile.get('path')}` ({d.profile.get('layout')}, "
                 f"{d.profile.get('level') or 'level not recorded'}, "
                 f"steps {d.profile.get('steps')})")
    L.append("")
    planned = [v for v in d.sites if v.planned]
    listed = [v for v in d.sites if not v.planned]

    L += [f"## {t['targets']}", ""]
    if not planned:
        L += [t["no_sites"], ""]
    for v in planned:
        L.append(f"- **{v.site.target.cls}.{v.site.target.attr}** (`{v.site.id}`, "
                 f"{v.site.mapping}): {_why(v, t)}")
    L.append("")

    L += [f"## {t['roofline']}", ""]
    if d.signatures:
        L += [t["sig_head"], "|---|---:|---:|---:|---:|---:|---|"]
        for s in d.signatures:
            L.append(f"| {s['type']} `{s['input_shapes']}` | {s['count']} | {_fmt(s['mean_us'])} | "
                     f"{_fmt(s['t_memory_us'])} | {_fmt(s['t_compute_us'], 2)} | "
                     f"{_fmt(s['ai'])} / {_fmt(s['ridge'])} | {s['verdict']} "
                     f"({s['measured_verdict'] or '–'}) |")
    else:
        L.append(t["roofline_none"])
    L.append("")

    L += [f"## {t['windows']}", ""]
    for v in planned + listed:
        L.append(f"- `{v.site.id}` ({t['planned'] if v.planned else t['listed']}): "
                 + _window_text(v, t))
        i = v.site.insert
        L.append(f"  {t['insert_line'].format(cls=i.cls, method=i.method, anchor=i.anchor_call, pos=pos[i.position], dep=v.site.dependency, weight=v.site.target.weight_expr)}")
        shift = v.site.evidence.get("window", {}).get("shift")
        if shift == "earlier" and v.candidate is not None:
            L.append(f"  {t['shift_earlier'].format(what=v.candidate.window.start_op.type)}")
        elif shift == "later":
            L.append(f"  {t['shift_later'].format(time=_fmt(v.site.evidence['window'].get('effective_us')))}")
        elif shift == "fallback":
            L.append(f"  {t['shift_fallback']}")
    L.append("")

    L += [f"## {t['files']}", ""]
    files = sorted({s.target.file for s in d.plan.sites})
    for f in files:
        where = sorted({f"{s.insert.cls}.{s.insert.method}" for s in d.plan.sites
                        if s.target.file == f})
        L.append(f"- `{f}`: {', '.join(where)}")
    if not files:
        L.append(f"- {t['none']}")
    sw = d.plan.switch
    readers = sorted({s.insert.cls for s in d.plan.sites})
    if readers:
        L.append(f"- {t['switch_readers']}: " + ", ".join(f"`{c}.__init__`" for c in readers))
    L += ["", t["switch"].format(name=sw.name, path=sw.config_path),
          t["mode_line"].format(mode=d.plan.mode, what=t[f"mode_{d.plan.mode}"]), ""]

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
            binds = t["binds"] if c.binding else t["risk_only"]
            L.append(f"| {c.name} | {_mib(c.bytes)} | {'–' if c.name == 'weight' else binds} | {c.note} |")
        L += ["", t["bound"].format(bound=b.bound_by, size=_mib(v.site.max_size)), ""]
        weight = next((c.bytes for c in b.caps if c.name == "weight"), 0)
        if weight and v.site.max_size < 0.5 * weight and b.bound_by != "coefficient":
            why = t["small_window"] if b.bound_by in ("hbm_headroom", "cmo_rate_x_window") \
                else t["small_other"]
            L += [t["small"].format(share=f"{v.site.max_size / weight:.0%}", bound=b.bound_by,
                                    why=why), ""]
    for v in listed:
        b = v.site.basis
        caps = ", ".join(f"{c.name} {c.bytes / 2**20:.1f} MiB" + ("" if c.binding else f" ({t['risk_only']})")
                         for c in b.caps)
        L.append(f"- `{v.site.id}` ({t['listed']}): {caps} → "
                 f"{t['bound'].format(bound=b.bound_by, size=_mib(v.site.max_size))}")
    if listed:
        L.append("")

    opt = f"{optimistic_share():.0%}"
    L += [f"## {t['saving']}", "", t["saving_note"].format(opt=opt), ""]
    for v in planned + listed:
        ev = v.site.evidence
        po = ev.get("saving_per_op_us", {})
        s = v.site.saving_us
        if s is None:
            L.append(f"- {v.site.id}: {t['unknown']}")
            continue
        L.append("- " + t["saving_line"].format(
            id=v.site.id, low=_fmt(s.low), mid=_fmt(s.mid), high=_fmt(s.high),
            per_op=_fmt(po.get("mid")), mean=_fmt(ev.get("mean_us")),
            opt=t["optimistic"].format(opt=opt) if ev.get("optimistic") else ""))
    L.append("")

    L += [f"## {t['not_planned']}", ""]
    if not d.rejections:
        L.append(f"- {t['none']}")
    for r in d.rejections:
        tag = f" ({t['unmapped']})" if r.reason_code == "unmapped" else ""
        site = f" `{r.site}`" if r.site else ""
        L.append(f"- `{r.signature}`{site} — **{r.reason_code}**{tag}: {r.reason}")
    L.append("")

    L += [f"## {t['risks']}", ""]
    L.append(f"- {t['risk_window']}")
    mt = next((s.max_tokens for s in d.plan.sites if s.max_tokens), None)
    if mt:
        L.append(f"- {t['risk_tokens'].format(n=mt)}")
    if any(c.name == "l2_budget" for v in planned for c in v.site.basis.caps):
        L.append(f"- {t['risk_l2'].format(n=max(len(planned), 1))}")
    cmo_binds = any(c.name == "cmo_rate_x_window" and c.binding for v in planned
                    for c in v.site.basis.caps)
    L.append(f"- {t['risk_cmo_bound' if cmo_binds else 'risk_cmo'].format(cmo=hw.get('cmo_bw_gbps'))}")
    if d.plan.mode == "ge_graph":
        L.append(f"- {t['risk_graph']}")
    for n in d.notes:
        L.append(f"- {n}")
    for v in planned:
        for n in v.site.evidence.get("notes", []):
            L.append(f"- `{v.site.id}`: {n}")
    L.append("")
    L += [f"## {t['gate']}", "", t["gate_text"].format(plan=plan_name), ""]
    return "\n".join(L)


def _why(v: SiteView, t: dict[str, str]) -> str:
    c = v.candidate
    if c is None:
        return t["why_manual"]
    ev = v.site.evidence
    key = "why_counters" if ev.get("verdict_by") == "counters" else "why_roofline"
    return t[key].format(type=c.target.type, why=ev.get("verdict_why", ""),
                         roof=ev.get("verdict", "–"), rwhy=ev.get("roofline_why", ""),
                         n=f"{c.per_step:g}", mean=_fmt(c.mean_us))


def _window_text(v: SiteView, t: dict[str, str]) -> str:
    c = v.candidate
    if c is None:
        w = v.site.evidence.get("window", {})
        return f"manual: {w.get('manual', '')}"
    w = c.window
    ops = ", ".join(o.type for o in w.ops) or "–"
    reason = t[f"reason_{w.branch}"].format(op=w.start_op.type, ops=ops, why=w.start_op.why)
    if w.instances < c.instances:
        reason += t["reason_agree"].format(n=w.instances, total=c.instances)
    return t["window_line"].format(branch=w.branch, reason=reason, time=_fmt(w.time_us),
                                   min=_fmt(w.min_us), inst=w.instances, ov=_fmt(w.overlap_us))
