"""Render ReportData as Markdown (pure: data in, text out), in English or Chinese.

Layout: banner, verdict, inputs, then the workflow's seven items ("输出要求"):
  1 targets and why  2 roofline conclusions  3 why each window  4 switches and code path
  5 max_size basis   6 validations (before/after tables, checklist, success rule, or the expected
  gain in baseline-only mode)  7 risks and next steps; then how to run, and where every number
came from. Chinese uses the workflow's terms (目标算子, 依赖窗口, 关键路径, 成功标准, 后续调优建议 ...).
"""

from __future__ import annotations

from .measure import Stat
from .build import ReportData
from ..i18n import pairs, t as text
from ..gain import optimistic_share
from .expected import PUBLIC_E2E_RANGE, PUBLIC_MEASUREMENTS, PUBLIC_SOURCE
from .rules import Check


class _T:
    """`t.k(key, **params)`: a catalog text (configs/messages.yaml) in the report's language;
    `t(en, zh)`: one of a code -> (English, Chinese) pair from the catalog's tables."""

    def __init__(self, lang: str):
        self.lang = lang
        self.zh = lang == "zh"

    def __call__(self, en: str, zh: str) -> str:
        return zh if self.zh else en

    def k(self, key: str, **params) -> str:
        return text(key, self.lang, **params)


CHECK_NAMES = pairs("report.check")   # configs/messages.yaml
ACTION_NAMES = pairs("report.action")   # configs/messages.yaml
SIGNAL_NAMES = pairs("report.signal")   # configs/messages.yaml
SITE_OUTCOMES = pairs("report.outcome")   # configs/messages.yaml
BANNER_NAMES = pairs("report.banner")   # configs/messages.yaml
OVERALL = pairs("report.overall")   # configs/messages.yaml


def _f(x, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return str(x)


def _stat(s: Stat | None) -> str:
    if s is None:
        return "–"
    return f"{s.mean:,.2f} ± {s.stdev:,.2f} (n={s.n})"


def _pct(before, after) -> str:
    if before in (None, 0) or after is None:
        return "–"
    return f"{(after - before) / before * 100:+.1f}%"


def _mark(ok: bool | None) -> str:
    return "✅" if ok else ("❌" if ok is False else "–")


def _mib(b) -> str:
    return "–" if b is None else f"{b / 2**20:,.2f} MiB ({b:,} B)"


def render(d: ReportData, lang: str, files: dict[str, str]) -> str:
    t = _T(lang)
    out: list[str] = []
    w = out.append
    w(t.k('report.md.weight_prefetch_report_torch_npu_npu'))
    w("")
    for b in d.banners:
        en, zh = BANNER_NAMES.get(b.code, (b.code, b.code))
        w(t.k('report.md.mismatch_the_numbers_below_are_not', p0=t(en, zh), p1=b.text))
        w("")
    en, zh = OVERALL[d.overall]
    w(t.k('report.md.verdict', p0=t(en, zh)))
    w("")
    _inputs(d, t, w, files)
    _item1(d, t, w)
    _item2(d, t, w, files)
    _item3(d, t, w)
    _item4(d, t, w)
    _item5(d, t, w)
    _item6(d, t, w)
    _item7(d, t, w, files)
    _how_to_run(d, t, w, files)
    _sources(d, t, w)
    return "\n".join(out).rstrip() + "\n"


def _inputs(d: ReportData, t, w, files) -> None:
    b, o = d.baseline, d.optimized
    hw = d.hardware
    w(t.k('report.md.inputs'))
    w("")
    w(t.k('report.md.input_value'))
    w("|---|---|")
    w(t.k('report.md.plan_status_mode', p0=d.plan_path, p1=d.plan.status, p2=d.plan.mode))
    w(t.k('report.md.baseline_profile_false_steps_warm_up', p0=d.plan.switch.name, p1=b.path, p2=list(b.steps) or '–', p3=list(b.warmup_excluded) or '–', p4=b.rows))
    if o is not None:
        w(t.k('report.md.optimized_profile_true_steps_warm_up', p0=d.plan.switch.name, p1=o.path, p2=list(o.steps) or '–', p3=list(o.warmup_excluded) or '–', p4=o.rows))
    else:
        w(t.k('report.md.optimized_profile_none_baseline_only_mode'))
    w(t.k('report.md.hardware_hbm_tb_s', p0=hw.get('name', '?'), p1=hw.get('detected_from', ''), p2=hw.get('hbm_bw_tbps', hw.get('hbm_bw', '?'))))
    if d.verify is not None:
        w(t.k('report.md.verify_result_passed', p0=d.verify.path, p1=d.verify.passed))
    th = d.thresholds
    w(t.k('report.md.thresholds_configs_policy_yaml_report_success', p0=th.noise_sigma, p1=th.min_change_share * 100))
    w("")


def _sig(site) -> str:
    s = site.evidence.get("signature") or {}
    return f"{s.get('type', '?')} `{s.get('input_shapes', '?')}` {s.get('dtypes', '')}"


def _item1(d: ReportData, t, w) -> None:
    w(t.k('report.md.1_target_ops_and_why'))
    w("")
    w(t.k('report.md.site_target_class_attr_kernel_signature'))
    w("|---|---|---|---|---|---|")
    for s in d.plan.sites:
        ev = s.evidence
        w(f"| `{s.id}` | `{s.target.cls}.{s.target.attr}` | {_sig(s)} | {s.mapping} | "
          f"{ev.get('verdict') or '–'} / {ev.get('measured_verdict') or '–'} | {_f(ev.get('mean_us'))} |")
    src = d.plan.created_from.get("profile", "?")
    w("")
    w(t.k('report.md.source_the_plan_s_evidence_measured', p0=src))
    if d.plan.rejections:
        w("")
        w(t.k('report.md.candidates_not_planned'))
        for r in d.plan.rejections[:10]:
            w(f"- {r.get('signature', '?')}: {r.get('reason_code', '')} — {r.get('reason', '')}")
    w("")


def _item2(d: ReportData, t, w, files) -> None:
    w(t.k('report.md.2_roofline_conclusions'))
    w("")
    b = d.baseline
    if d.memory_bound:
        w(t.k('report.md.memory_bound_matmul_family_signatures_in'))
        w("")
        w(t.k('report.md.signature_count_mean_s_share_of'))
        w("|---|---|---|---|---|---|---|")
        for r in d.memory_bound:
            share = f"{r.share * 100:.1f}%" if r.share is not None else "–"
            w(f"| `{r.label}` | {r.count} | {_f(r.mean_us)} | {share} | {r.verdict} | "
              f"{r.measured_verdict or '–'} | {'★' if r.target else ''} |")
        w("")
    else:
        w(t.k('report.md.no_memory_bound_matmul_family_signature'))
        w("")
    w(t.k('report.md.critical_path_baseline_s_per_step', p0=_stat(b.step_time), p1=b.step_time_source or '–', p2=b.compute_stream or '–', p3=_stat(b.compute_busy), p4=_stat(b.compute_idle)))
    w("")
    if "chart" in files:
        w(t.k('report.md.roofline_matmul_family_ops_against_the', p0=d.hardware.get('name', '?'), p1=files['chart']))
        w("")
        w(t.k('report.md.chart_x_arithmetic_intensity_flop_byte'))
        w("")


def _item3(d: ReportData, t, w) -> None:
    w(t.k('report.md.3_why_each_dependency_window'))
    w("")
    w(t.k('report.md.site_dependency_window_ops_start_window'))
    w("|---|---|---|---|---|---|---|")
    for s in d.plan.sites:
        win = s.evidence.get("window") or {}
        bm = d.baseline.site(s.id)
        ops = ", ".join(map(str, win.get("ops") or [])) or "–"
        w(f"| `{s.id}` | `{s.dependency}` | {ops} | {win.get('start', '–')} | {_f(win.get('time_us'))} | "
          f"{win.get('reason', '–')} | {_stat(bm.window) if bm else '–'} |")
    w("")
    w(t.k('report.md.a_window_is_a_light_predecessor'))
    w("")


def _item4(d: ReportData, t, w) -> None:
    sw = d.plan.switch
    w(t.k('report.md.4_switches_and_code_path'))
    w("")
    cfg = f"`{sw.config_file}` → " if sw.config_file else ""
    w(t.k('report.md.switch_default_config_key_model_init', p0=sw.name, p1=sw.default, p2=cfg, p3=sw.config_path, p4=d.plan.mode))
    w("")
    w(t.k('report.md.site_file_inserted_in_anchor_weight'))
    w("|---|---|---|---|---|---|---|")
    for s in d.plan.sites:
        w(f"| `{s.id}` | `{s.target.file}` | `{s.insert.cls}.{s.insert.method}` | {s.insert.position} "
          f"`{s.insert.anchor_call}` | `{s.target.weight_expr}` | `{s.join.cls}.{s.join.method}` {s.join.where} | "
          f"{s.max_tokens if s.max_tokens is not None else '–'} |")
    w("")
    w(t.k('report.md.inserted_code_carries_the_marker_cannbot'))
    w("")


def _item5(d: ReportData, t, w) -> None:
    w(t.k('report.md.5_max_size_basis'))
    w("")
    for s in d.plan.sites:
        b = s.basis
        dims = " × ".join(str(x) for x in b.dims)
        w(t.k('report.md.weight_b_coefficient_formula_max_size', p0=s.id, p1=dims, p2=b.dtype_bytes, p3=b.coefficient, p4=b.formula or 'dims*b*c', p5=_mib(s.max_size), p6=b.bound_by))
        for c in b.caps:
            risk = "" if c.binding else t.k('report.md.risk_not_binding')
            w(f"  - {c.name}{risk}: {_mib(c.bytes)} {('— ' + c.note) if c.note else ''}")
        ladder = s.ladder
        w(t.k('report.md.ladder_up_down', p0=ladder.get('up', []), p1=ladder.get('down', [])))
    w("")
    if d.cmo is not None:
        c = d.cmo
        w(t.k('report.md.cmo_rate_measured_in_the_optimized', p0=c.gbps, p1=c.note))
        w("")
    elif d.optimized is not None:
        w(t.k('report.md.no_cmo_prefetch_task_was_found'))
        w("")


def _check_row(c: Check, t, unit: str = "µs") -> str:
    en, zh = CHECK_NAMES[c.key]
    if c.key == "outputs_identical":
        return f"| {t(en, zh)} | – | – | – | – | {_mark(c.ok)} | {c.source} |"
    return (f"| {t(en, zh)} | {_f(c.before)} | {_f(c.after)} | {_pct(c.before, c.after)} | "
            f"{_f(c.threshold)} | {_mark(c.ok)} | {c.source} |")


def _item6(d: ReportData, t, w) -> None:
    w(t.k('report.md.6_validations_done'))
    w("")
    if d.optimized is None:
        _expected(d, t, w)
        return
    b, o = d.baseline, d.optimized
    w(t.k('report.md.before_after_per_step_warm_up'))
    w("")
    sw = d.plan.switch.name
    w(t.k('report.md.quantity_baseline_false_optimized_true_change', p0=sw))
    w("|---|---|---|---|---|")
    w(t.k('report.md.critical_path_step_time_s', p0=_stat(b.step_time), p1=_stat(o.step_time), p2=_pct(_m(b.step_time), _m(o.step_time)), p3=o.step_time_source or b.step_time_source))
    w(t.k('report.md.compute_stream_idle_wait_s_gaps', p0=_stat(b.compute_idle), p1=_stat(o.compute_idle), p2=_pct(_m(b.compute_idle), _m(o.compute_idle)), p3=b.compute_stream))
    for s in d.plan.sites:
        bs, os_ = b.site(s.id), o.site(s.id)
        if not bs or not os_:
            continue
        w(t.k('report.md.target_op_s_per_kernel_kernels', p0=s.id, p1=_stat(bs.target), p2=_stat(os_.target), p3=_pct(_m(bs.target), _m(os_.target)), p4=bs.instances, p5=os_.instances, p6=bs.matched_by or '–'))
        w(t.k('report.md.window_ops_s_before_each_target', p0=s.id, p1=_stat(bs.window), p2=_stat(os_.window), p3=_pct(_m(bs.window), _m(os_.window)), p4=', '.join(bs.window_ops) or '–'))
        if bs.l2_hit_rate is not None or os_.l2_hit_rate is not None:
            w(t.k('report.md.l2_hit_rate_of_the_target', p0=s.id, p1=_rate(bs.l2_hit_rate), p2=_rate(os_.l2_hit_rate), p3=os_.l2_source or bs.l2_source))
    if b.l2_hit_rate is not None or o.l2_hit_rate is not None:
        w(t.k('report.md.l2_hit_rate_all_ops', p0=_rate(b.l2_hit_rate), p1=_rate(o.l2_hit_rate), p2=o.l2_source or b.l2_source))
    w("")
    if o.streams or b.streams:
        w(t.k('report.md.other_streams_new_long_tails'))
        w("")
        w(t.k('report.md.stream_kernels_base_opt_busy_s'))
        w("|---|---|---|---|---|")
        bmap = {s.stream: s for s in b.streams}
        for s in o.streams:
            p = bmap.get(s.stream)
            w(f"| {s.stream} | {p.kernels if p else 0} → {s.kernels} | {_f(p.busy_us) if p else '0'} → {_f(s.busy_us)} | "
              f"{p.cmo_kernels if p else 0} → {s.cmo_kernels} | {_f(p.tail_us) if p else '0'} → {_f(s.tail_us)} |")
        for s in b.streams:
            if s.stream not in {x.stream for x in o.streams}:
                w(f"| {s.stream} | {s.kernels} → 0 | {_f(s.busy_us)} → 0 | {s.cmo_kernels} → 0 | {_f(s.tail_us)} → 0 |")
        w("")
    w(t.k('report.md.verification_checklist_and_success_rule'))
    w("")
    judged = {v.site_id for v in d.verdicts}
    for s in d.plan.sites:
        if s.id not in judged:
            w(t.k('report.md.no_verdict_its_target_was_not', p0=s.id))
            w("")
    for v in d.verdicts:
        en, zh = SITE_OUTCOMES[v.outcome]
        w(t.k('report.md.success_a_gain_target_faster_or', p0=v.site_id, p1=t(en, zh)))
        w("")
        w(t.k('report.md.check_before_after_change_counts_above'))
        w("|---|---|---|---|---|---|---|")
        for c in v.checks:
            w(_check_row(c, t))
        tails = "new long tail" in " ".join(SIGNAL_NAMES.get(s, ("", ""))[0] for s in v.signals)
        w(t.k('report.md.no_new_bottleneck_on_other_streams', p0=_mark(not tails)))
        w("")
    if d.verify is not None and d.verify.checks:
        w(t.k('report.md.functional_checks_from_verify'))
        for name, ok, detail in d.verify.checks:
            w(f"- {_mark(ok)} {name}{(': ' + detail) if detail else ''}")
        w("")
    elif d.verify is None:
        w(t.k('report.md.outputs_were_not_compared_pass_verify'))
        w("")


def _m(s: Stat | None):
    return s.mean if s else None


def _rate(r) -> str:
    return "–" if r is None else f"{r * 100:.1f}%"


def _expected(d: ReportData, t, w) -> None:
    e = d.expectation
    hw = d.hardware.get("name", "?")
    w(t.k('report.md.no_optimized_profile_was_given_so', p0=hw))
    w("")
    w(t.k('report.md.site_target_s_baseline_measured_kernels'))
    w("|---|---|---|---|---|---|---|")
    unknown = t.k('report.md.unknown_no_profile')
    for s in e.sites:
        target = f"{_f(s.target_us)} ± {_f(s.target_stdev)}" if s.found else (
            t.k('report.md.not_found') if d.baseline is not None else unknown)
        if s.saving_us is None:
            w(f"| `{s.site_id}` | {target} | {s.per_step:g} | {unknown} | {unknown} | – | |")
            continue
        share = f"{s.share[1] * 100:.1f}%" if s.share else "–"
        flag = t.k('report.md.optimistic_per_op', p0=optimistic_share() * 100) if s.optimistic else ""
        w(f"| `{s.site_id}` | {target} | {s.per_step:g} | {' / '.join(f'{x:.2f}' for x in s.saving_us)} | "
          f"{' / '.join(f'{x:.1f}' for x in s.step_saving_us)} | {share} | {flag} |")
    w("")
    for s in e.sites:
        if s.note:
            w(f"- `{s.site_id}`: {s.note}")
    if any(s.note for s in e.sites):
        w("")
    if e.step_saving_us:
        lo, mid, hi = e.step_saving_us
        w(t.k('report.md.expected_saving_per_step_all_sites', p0=lo, p1=mid, p2=hi))
        w("")
    if e.e2e_share:
        lo, mid, hi = (x * 100 for x in e.e2e_share)
        w(t.k('report.md.expected_end_to_end_effect_of', p0=lo, p1=mid, p2=hi, p3=_f(e.step_us), p4=_f(e.step_stdev), p5=e.step_source))
        w("")
    w(t.k('report.md.public_measurements_for_comparison', p0=PUBLIC_SOURCE))
    w("")
    for who, what, num in PUBLIC_MEASUREMENTS:
        w(f"- {who} ({what}): {num}")
    w("")
    if e.e2e_share:
        lo_pub, hi_pub = (x * 100 for x in PUBLIC_E2E_RANGE)
        mid = e.e2e_share[1] * 100
        if mid > hi_pub:
            w(t.k('report.md.the_mid_estimate_is_above_every', p0=mid, p1=lo_pub, p2=hi_pub))
        elif mid < lo_pub:
            w(t.k('report.md.the_mid_estimate_is_below_the', p0=mid, p1=lo_pub))
        else:
            w(t.k('report.md.the_mid_estimate_lies_within_the', p0=mid, p1=lo_pub, p2=hi_pub))
        w("")
    w(t.k('report.md.the_before_after_tables_and_the'))
    w("")
    if e.worth_enabling is None:
        w(t.k('report.md.cannot_be_judged_without_a_profile', p0=e.reason_in(t.lang)))
    elif e.worth_enabling:
        w(t.k('report.md.worth_measuring_confirm_with_the_a', p0=e.reason_in(t.lang)))
    else:
        w(t.k('report.md.not_worth_enabling', p0=e.reason_in(t.lang)))
    w("")


def _item7(d: ReportData, t, w, files) -> None:
    w(t.k('report.md.7_risks_and_next_steps'))
    w("")
    if d.verdicts:
        w(t.k('report.md.site_failure_signals_next_step_max'))
        w("|---|---|---|---|---|")
        for v in d.verdicts:
            sig = "; ".join(t(*SIGNAL_NAMES.get(s, (s, s))) for s in v.signals) or "–"
            size = (f"{_mib(v.max_size_from)} → {_mib(v.max_size_to)} (c {v.coefficient_from:g} → {v.coefficient_to:g})"
                    if v.max_size_to != v.max_size_from else _mib(v.max_size_from))
            w(f"| `{v.site_id}` | {sig} | {t(*ACTION_NAMES[v.action])} | {size} | {v.reason_in('zh' if t.zh else 'en')} |")
        w("")
    if "next_plan" in files:
        w(t.k('report.md.the_plan_for_the_next_step', p0=files['next_plan']))
        w("")
    w(t.k('report.md.tuning_order_the_workflow_s_docs'))
    w("")
    w(t.k('report.md.risks'))
    w(t.k('report.md.a_larger_max_size_competes_with'))
    w(t.k('report.md.in_graph_mode_the_dependency_must'))
    w(t.k('report.md.several_sites_in_flight_share_l2'))
    w(t.k('report.md.prefill_is_guarded_by_the_token'))
    w("")


def _how_to_run(d: ReportData, t, w, files) -> None:
    w(t.k('report.md.how_to_run_the_tests'))
    w("")
    script = files.get("ab_script", "run_prefetch_ab.py")
    w(t.k('report.md.on_the_npu_host_cann_torch', p0=d.plan_path))
    w("")
    w("```bash")
    w(f"cannbot prefetch verify {d.plan_path} --factory my_pkg.build:make_model_and_inputs --out verify.json")
    w(f"python {script} --factory my_pkg.build:make_model_and_inputs --steps 10 --verify-result verify.json")
    w("```")
    w("")
    w(t.k('report.md.runs_the_model_with_off_and', p0=script, p1=d.plan.switch.name))
    w("")


def _sources(d: ReportData, t, w) -> None:
    w(t.k('report.md.where_the_numbers_come_from'))
    w("")
    opt = t.k("report.md.measured_optimized", path=d.optimized.path) if d.optimized else ""
    w(t.k("report.md.measured_paths", base=d.baseline.path, opt=opt))
    srcs = d.hardware.get("sources") or {}
    hw_src = "; ".join(f"{k}: {v}" for k, v in list(srcs.items())[:4]) if isinstance(srcs, dict) else ""
    w(t.k('report.md.hardware_numbers_profile', p0=d.hardware.get('name', '?'), p1=hw_src or 'configs/hardware'))
    w(t.k('report.md.plan_numbers_sizes_caps_expected_saving'))
    for m in (d.baseline, d.optimized):
        for sm in (m.sites if m else ()):
            if sm.note:
                w(f"- {m.label} `{sm.site_id}`: {sm.note}")
    for n in d.notes:
        w(f"- {n}")
    for n in d.baseline.notes[:5]:
        w(f"- baseline: {n}")
    if d.optimized:
        for n in d.optimized.notes[:5]:
            w(f"- optimized: {n}")
