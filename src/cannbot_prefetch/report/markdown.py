"""Render ReportData as Markdown (pure: data in, text out), in English or Chinese.

Layout: banner, verdict, inputs, then the workflow's seven items ("输出要求"):
  1 targets and why  2 roofline conclusions  3 why each window  4 switches and code path
  5 max_size basis   6 validations (before/after tables, checklist, success rule, or the expected
  gain in baseline-only mode)  7 risks and next steps; then how to run, and where every number
came from. Chinese uses the workflow's terms (目标算子, 依赖窗口, 关键路径, 成功标准, 后续调优建议 ...).
"""

from __future__ import annotations

import re

from .build import ReportData
from ..fmt import size_text
from .md_common import ACTION_NAMES, BANNER_NAMES, OVERALL, SIGNAL_NAMES, _T, _f, _stat
from .md_validations import _item6
from ..contract.plan import decode_guard_text


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
    return plain("\n".join(out)).rstrip() + "\n"


def _inputs(d: ReportData, t, w, files) -> None:
    b, o = d.baseline, d.optimized
    hw = d.hardware
    w(t.k('report.md.inputs'))
    w("")
    w(t.k('report.md.input_value'))
    w("|---|---|")
    w(t.k('report.md.plan_status_mode', p0=d.plan_path, p1=d.plan.status, p2=d.plan.mode))
    if b is None:
        w(t.k('report.md.profiles_none'))
    else:
        w(t.k('report.md.baseline_profile_false_steps_warm_up', p0=d.plan.switch.name, p1=b.path, p2=list(b.steps) or '–', p3=list(b.warmup_excluded) or '–', p4=b.rows))
    if b is None:
        pass
    elif o is not None:
        w(t.k('report.md.optimized_profile_true_steps_warm_up', p0=d.plan.switch.name, p1=o.path, p2=list(o.steps) or '–', p3=list(o.warmup_excluded) or '–', p4=o.rows))
    else:
        w(t.k('report.md.optimized_profile_none_baseline_only_mode'))
    w(t.k('report.md.hardware_hbm_tb_s', p0=hw.get('name', '?'), p1=t.loc(hw.get('detected_from', '')), p2=hw.get('hbm_bw_tbps', hw.get('hbm_bw', '?'))))
    if d.verify is not None:
        w(t.k('report.md.verify_result_passed', p0=d.verify.path, p1=d.verify.passed))
    th = d.thresholds
    w(t.k('report.md.thresholds_configs_policy_yaml_report_success', p0=th.noise_sigma, p1=th.min_change_share * 100))
    w("")


_CONTROL = {c: None for c in (*range(0x20), *range(0x7f, 0xa0)) if c != 0x0a}


_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def plain(text: str) -> str:
    """Without control characters (terminal escapes that retitle or clear a terminal when the
    report is printed, BEL, CR...); newlines kept."""
    return text.translate(_CONTROL)


def md(value) -> str:
    """Free text from a plan or a profile as one Markdown table/line cell: on one line, no
    control characters, `|` escaped, no raw HTML: a `<` that could open a tag or comment is
    `&lt;` (`<script>` shows as text; `a < b` stays as written)."""
    text = " ".join(plain(str(value).replace("\t", " ")).splitlines())
    return _TAG.sub("&lt;", text.replace("|", "\\|"))


def _sig(site) -> str:
    s = site.evidence.get("signature") or {}
    return f"{md(s.get('type', '?'))} `{md(s.get('input_shapes', '?'))}` {md(s.get('dtypes', ''))}"


def _item1(d: ReportData, t, w) -> None:
    w(t.k('report.md.1_target_ops_and_why'))
    w("")
    w(t.k('report.md.site_target_class_attr_kernel_signature'))
    w("|---|---|---|---|---|---|")
    unknown = t.k('report.md.unknown_no_profile')
    for s in d.plan.sites:
        ev = s.evidence
        sig = _sig(s) if ev.get("signature") else unknown
        verdict = (f"{md(ev.get('verdict') or '–')} / {md(ev.get('measured_verdict') or '–')}"
                   if ev.get("verdict") else t.k('report.md.named_with_target'))
        mean = _f(ev.get("mean_us")) if ev.get("mean_us") is not None else unknown
        w(f"| `{s.id}` | `{s.target.cls}.{s.target.attr}` | {sig} | {s.mapping} | {verdict} | {mean} |")
    src = d.plan.created_from.get("profile")
    w("")
    w(t.k('report.md.source_the_plan_s_evidence_measured', p0=md(src)) if src
      else t.k('report.md.source_manual_no_profile'))
    if d.plan.rejections:
        w("")
        w(t.k('report.md.candidates_not_planned'))
        for r in d.plan.rejections[:10]:
            w(f"- {md(r.get('signature', '?'))}: {md(r.get('reason_code', ''))} — "
              f"{md(t.loc(r.get('reason', '')))}")
    w("")


def _item2(d: ReportData, t, w, files) -> None:
    w(t.k('report.md.2_roofline_conclusions'))
    w("")
    b = d.baseline
    if b is None:
        w(t.k('report.md.no_profile_no_roofline'))
        w("")
        return
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
        bm = d.baseline.site(s.id) if d.baseline is not None else None
        ops = md(", ".join(map(str, win.get("ops") or [])) or "–")
        w(f"| `{s.id}` | `{s.dependency}` | {ops} | {md(win.get('start', '–'))} | "
          f"{_f(win.get('time_us'))} | {md(t.loc(win.get('reason', '–')))} | {_stat(bm.window) if bm else '–'} |")
    w("")
    w(t.k('report.md.a_window_is_a_light_predecessor'))
    w("")


def _item4(d: ReportData, t, w) -> None:
    sw = d.plan.switch
    w(t.k('report.md.4_switches_and_code_path'))
    w("")
    cfg = f"`{md(sw.config_file)}` → " if sw.config_file else ""
    w(t.k('report.md.switch_default_config_key_model_init', p0=sw.name, p1=sw.default, p2=cfg, p3=sw.config_path, p4=d.plan.mode))
    w("")
    w(t.k('report.md.site_file_inserted_in_anchor_weight'))
    w("|---|---|---|---|---|---|---|")
    for s in d.plan.sites:
        w(f"| `{s.id}` | `{md(s.target.file)}` | `{s.insert.cls}.{s.insert.method}` | {s.insert.position} "
          f"`{s.insert.anchor_call}` | `{s.target.weight_expr}` | `{s.join.cls}.{s.join.method}` {s.join.position} | "
          f"`{decode_guard_text(s)}` |")
    w("")
    w(t.k('report.md.inserted_code_carries_the_marker_cannbot', p0=d.plan_path))
    w("")


def _item5(d: ReportData, t, w) -> None:
    w(t.k('report.md.5_max_size_basis'))
    w("")
    for s in d.plan.sites:
        b = s.basis
        dims = " × ".join(str(x) for x in b.dims)
        w(t.k('report.md.weight_b_coefficient_formula_max_size', p0=s.id, p1=dims, p2=b.dtype_bytes, p3=b.coefficient, p4=md(b.formula or 'dims*b*c'), p5=size_text(s.max_size), p6=md(b.bound_by)))
        for c in b.caps:
            risk = "" if c.binding else t.k('report.md.risk_not_binding')
            w(f"  - {c.name}{risk}: {size_text(c.bytes)} {('— ' + t.loc(c.note)) if c.note else ''}")
        ladder = s.ladder
        w(t.k('report.md.ladder_up_down', p0=ladder.get('up', []), p1=ladder.get('down', [])))
    w("")
    if d.cmo is not None:
        c = d.cmo
        w(t.k('report.md.cmo_rate_measured_in_the_optimized', p0=c.gbps, p1=t.loc(c.note)))
        w("")
    elif d.optimized is not None:
        w(t.k('report.md.no_cmo_prefetch_task_was_found'))
        w("")


def _item7(d: ReportData, t, w, files) -> None:
    w(t.k('report.md.7_risks_and_next_steps'))
    w("")
    if d.verdicts:
        w(t.k('report.md.site_failure_signals_next_step_max'))
        w("|---|---|---|---|---|")
        for v in d.verdicts:
            sig = "; ".join(t(*SIGNAL_NAMES.get(s, (s, s))) for s in v.signals) or "–"
            size = (f"{size_text(v.max_size_from)} → {size_text(v.max_size_to)} (c {v.coefficient_from:g} → {v.coefficient_to:g})"
                    if v.max_size_to != v.max_size_from else size_text(v.max_size_from))
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
    for s in d.plan.sites:   # what analyze found about this site (overlaps, optimism, ...)
        for n in s.evidence.get("notes", []) or []:
            if str(n).startswith(("risk:", "optimistic")):
                w("- " + t.k("joined.about", who=f"`{s.id}`", what=md(t.loc(n))))
    w("")


def _how_to_run(d: ReportData, t, w, files) -> None:
    w(t.k('report.md.how_to_run_the_tests'))
    w("")
    script = files.get("ab_script", "run_prefetch_ab.py")
    w(t.k('report.md.on_the_npu_host_cann_torch', p0=d.plan_path))
    w("")
    w("```bash")
    # the built-in factory (a tiny model from the config.json beside the model file or the
    # plan): runs as printed; a --factory of the user's own is in `verify --help`
    w(f"cannbot prefetch verify {d.plan_path} --out verify.json")
    w(f"python {script} --factory my_pkg.build:make_model_and_inputs --steps 10 --verify-result verify.json")
    w("```")
    w("")
    w(t.k('report.md.runs_the_model_with_off_and', p0=script, p1=d.plan.switch.name))
    w("")


def _sources(d: ReportData, t, w) -> None:
    w(t.k('report.md.where_the_numbers_come_from'))
    w("")
    if d.baseline is None:
        w(t.k("report.md.measured_nothing"))
    else:
        opt = t.k("report.md.measured_optimized", path=d.optimized.path) if d.optimized else ""
        w(t.k("report.md.measured_paths", base=d.baseline.path, opt=opt))
    srcs = d.hardware.get("sources") or {}
    srcs = dict(list(srcs.items())[:4]) if isinstance(srcs, dict) else {}
    # the notes are configs/hardware/*.yaml's citations, in English; Chinese names the fields and
    # the command that prints each number with its source
    hw_src = ("; ".join(f"{k}: {v}" for k, v in srcs.items()) if not t.zh else
              t.k("report.md.hardware_sources_at", fields=t.k("joined.list").join(srcs), name=d.hardware.get("name", "?"))
              if srcs else "")
    w(t.k('report.md.hardware_numbers_profile', p0=d.hardware.get('name', '?'), p1=hw_src or 'configs/hardware'))
    w(t.k('report.md.plan_numbers_sizes_caps_expected_saving'))
    for m in (d.baseline, d.optimized):
        for sm in (m.sites if m else ()):
            if sm.note:
                w("- " + t.k("joined.about", who=f"{m.label} `{sm.site_id}`", what=t.loc(sm.note)))
    for n in d.notes:
        w(f"- {t.loc(n)}")
    for n in (d.baseline.notes[:5] if d.baseline is not None else ()):
        w("- " + t.k("joined.about", who="baseline", what=t.loc(n)))
    if d.optimized:
        for n in d.optimized.notes[:5]:
            w("- " + t.k("joined.about", who="optimized", what=t.loc(n)))
