"""Item 6 of the report ("做了哪些验证"): the before/after tables, the checklist and success rule
(A/B mode), or the expected improvement (baseline-only and plan-only modes)."""

from __future__ import annotations

import math

from .build import ReportData
from .expected import PUBLIC_E2E_RANGE, PUBLIC_MEASUREMENTS, PUBLIC_SOURCE
from ..fmt import mib
from .md_common import CHECK_NAMES, SIGNAL_NAMES, SITE_OUTCOMES, _f, _mark, _pct, _stat
from .measurements import Stat
from .rules import Check


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
    e = d.expectation
    if e is not None and e.step_saving_us and b.step_time and o.step_time:
        lo, mid, hi = e.step_saving_us
        w(t.k('report.md.step_saved_expected_vs_measured', lo=lo, mid=mid, hi=hi,
              got=b.step_time.mean - o.step_time.mean))
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


def _render_plan_only(d: ReportData, t, w) -> None:
    """What the plan's shapes and hardware give without any profile (`report --plan` alone)."""
    unknown = t.k('report.md.unknown_no_profile')
    w(t.k('report.md.plan_only_intro', hw=d.hardware.get("name", "?")))
    w("")
    w(t.k('report.md.plan_only_head'))
    w("|---|---|---|---|---|---|---|")
    for site, s in zip(d.plan.sites, d.expectation.sites):
        weight = math.prod(site.basis.dims) * site.basis.dtype_bytes
        bound = " / ".join(f"{x:.2f}" for x in s.bound_per_op) if s.bound_per_op else unknown
        per_step = " / ".join(f"{x:.1f}" for x in s.step_saving_us) if s.step_saving_us else unknown
        w(f"| `{s.site_id}` | {mib(weight)} | {mib(site.max_size)} | {bound} | "
          f"{unknown} | {per_step} | {unknown} |")
    w("")


def _expected(d: ReportData, t, w) -> None:
    e = d.expectation
    hw = d.hardware.get("name", "?")
    if d.baseline is None:
        _render_plan_only(d, t, w)
        if not any(s.step_saving_us for s in e.sites):
            _closing(d, t, w)
            return
        w(t.k('report.md.plan_records_inputs', hw=hw))
    else:
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
        flag = t.k('report.md.optimistic_per_op', p0=e.optimistic_share * 100) if s.optimistic else ""
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
    for who, key in PUBLIC_MEASUREMENTS:
        w(f"- {who}{t.k('report.public.' + key)}")
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
    _closing(d, t, w, public=False)


def _closing(d: ReportData, t, w, public: bool = True) -> None:
    """The public measurements (unless shown already), how to measure, the verdict."""
    e = d.expectation
    if public:
        w(t.k('report.md.public_measurements_for_comparison', p0=PUBLIC_SOURCE))
        w("")
        for who, key in PUBLIC_MEASUREMENTS:
            w(f"- {who}{t.k('report.public.' + key)}")
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
