"""Assemble the report's data: measurements, verdicts, expectations, banners, next plan, chart.

No file IO here: profiles arrive loaded (with their companion frames), the verify result
arrives parsed; report/run.py reads, api/reporting.py writes. Rendering: markdown.py / console.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..policy import Policy
from ..plan import Plan
from .measure import measure_profile
from .sites import signature_key
from .measurements import ProfileMeasure, shape_overlap
from .chart import Point, Roof, points_from_roofline
from .cmo import CmoRate, calibrate as calibrate_cmo, with_rate
from .expected import Expectation, expected_gain
from .nextplan import next_plan
from .rules import SiteVerdict, Thresholds, overall as overall_of, site_outcome


@dataclass(frozen=True)
class VerifySummary:
    path: str
    passed: bool | None
    checks: tuple[tuple[str, bool | None, str], ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Banner:
    code: str     # different_hardware | different_models | site_missing | site_not_in_optimized | ...
    text: str     # English; the renderer translates by code


@dataclass(frozen=True)
class SignatureRow:
    label: str
    mean_us: float | None
    count: int
    share: float | None
    verdict: str
    measured_verdict: str | None
    target: bool


@dataclass(frozen=True)
class ReportData:
    plan: Plan
    plan_path: str
    baseline: ProfileMeasure | None      # None: the plan alone (no profile)
    optimized: ProfileMeasure | None
    hardware: dict[str, Any]
    verify: VerifySummary | None
    verdicts: tuple[SiteVerdict, ...]
    expectation: Expectation | None
    banners: tuple[Banner, ...]
    overall: str          # success | unconfirmed | no_change | not_successful | worth_trying |
                          # not_worth_enabling | expected_only (no profile) | inconclusive
    next_plan: Plan
    points: tuple[Point, ...]
    roof: Roof | None
    memory_bound: tuple[SignatureRow, ...]
    thresholds: Thresholds
    notes: tuple[str, ...] = field(default_factory=tuple)
    cmo: CmoRate | None = None       # the CMO rate measured in the optimized profile

    @property
    def mode(self) -> str:
        if self.baseline is None:
            return "plan"
        return "ab" if self.optimized is not None else "baseline"

    def verdict(self, site_id: str) -> SiteVerdict | None:
        return next((v for v in self.verdicts if v.site_id == site_id), None)


# ---------------------------------------------------------------- verify.json

def parse_verify(text: str, path: str) -> VerifySummary:
    """verify.json from the verify engineer: top-level `passed: bool`, per-check entries. Read
    defensively: unknown shapes of the per-check part are tolerated, a missing `passed` is not."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON (line {exc.lineno})", path=path) from None
    if not isinstance(data, dict):
        raise InputError("verify result must be a JSON object with a top-level 'passed'", path=path)
    passed = data.get("passed")
    if not isinstance(passed, bool):
        raise InputError("verify result has no boolean 'passed'", path=path,
                         hint="pass the file written by `cannbot prefetch verify --out`")
    raw = data.get("checks", data.get("results", []))
    items: list[tuple[str, bool | None, str]] = []
    if isinstance(raw, dict):
        raw = [{"name": k, **(v if isinstance(v, dict) else {"passed": v})} for k, v in raw.items()]
    if isinstance(raw, list):
        for k, c in enumerate(raw):
            if not isinstance(c, dict):
                continue
            name = str(c.get("name") or c.get("check") or c.get("id") or f"check {k + 1}")
            ok = c.get("passed", c.get("ok"))
            ok = ok if isinstance(ok, bool) else None
            detail = c.get("detail") or c.get("message") or c.get("reason") or ""
            if not detail and "max_abs_diff" in c:
                detail = f"max_abs_diff {c['max_abs_diff']}"
            items.append((name, ok, str(detail)[:200]))
    return VerifySummary(path, passed, tuple(items))


# ---------------------------------------------------------------- banners

def _hw_facts(m: ProfileMeasure) -> tuple:
    return (m.soc, m.cube_cores, m.freq_mhz)


def _banners(plan: Plan, base: ProfileMeasure, opt: ProfileMeasure | None, th: Thresholds
             ) -> list[Banner]:
    out: list[Banner] = []
    if opt is not None:
        diffs = [f"{name} {a} vs {b}" for name, a, b in
                 zip(("SoC", "cube cores", "MHz"), _hw_facts(base), _hw_facts(opt))
                 if a is not None and b is not None and a != b]
        if diffs:
            out.append(Banner("different_hardware",
                              "the two profiles come from different hardware: " + ", ".join(diffs)))
        overlap = shape_overlap(base.signatures, opt.signatures)
        if overlap is not None and overlap < th.model_overlap_min:
            out.append(Banner("different_models",
                              f"the two profiles share only {overlap * 100:.0f}% of their MatMul "
                              "signatures: they look like different models or batch shapes"))
    for site in plan.sites:
        b = base.site(site.id)
        o = opt.site(site.id) if opt is not None else None
        in_b = bool(b and b.found)
        in_o = bool(o and o.found)
        if opt is None:
            if not in_b:
                out.append(Banner("site_missing", f"site {site.id}: its target is not in the baseline profile"))
        elif not in_b and not in_o:
            out.append(Banner("site_missing", f"site {site.id}: its target is in neither profile"))
        elif not in_o:
            out.append(Banner("site_not_in_optimized",
                              f"site {site.id}: its target is missing from the optimized profile"))
        elif not in_b:
            out.append(Banner("site_not_in_baseline",
                              f"site {site.id}: its target is missing from the baseline profile"))
    if not plan.sites:
        out.append(Banner("no_sites", "the plan has no sites"))
    return out


# ---------------------------------------------------------------- roofline

def _roofline(roof_obj, hw, target_keys: set[str], top_n: int):
    """(points, roof, memory-bound rows, notes) from the baseline's roofline."""
    points = points_from_roofline(roof_obj, target_keys)
    dtype = "bf16"
    if roof_obj.signatures and roof_obj.signatures[0].dtypes:
        dtype = roof_obj.signatures[0].dtypes.split(";")[0]
    key, _ = hw.peak_basis(dtype)
    roof = Roof(hw.name, hw.peak_for(dtype), f"{key} peak {hw.peak_for(dtype):g} TFLOPS",
                hw.hbm_bw_tbps)
    rows = []
    for s in roof_obj.signatures:
        if s.verdict != "memory-bound" and s.measured_verdict != "memory-bound":
            continue
        rows.append(SignatureRow(f"{s.type} {s.input_shapes}", s.mean_us, s.count, s.share,
                                 s.verdict, s.measured_verdict,
                                 signature_key(s.type, s.input_shapes, s.dtypes) in target_keys))
        if len(rows) >= top_n:
            break
    return points, roof, rows, list(roof_obj.notes)


def _hw_json(hw) -> dict[str, Any]:
    try:
        return hw.to_json()
    except Exception:  # noqa: BLE001 - a partial profile still names itself
        return {"name": getattr(hw, "name", "?")}


# ---------------------------------------------------------------- entry point

def build_report(plan: Plan, plan_path: str, baseline, optimized, *, hardware,
                 verify: VerifySummary | None, policy: Policy,
                 companions: dict[str, dict[str, Any]] | None = None) -> ReportData:
    """`baseline` / `optimized`: loaded `Profile`s (optimized may be None: baseline-only mode;
    both None: the plan alone, the expected gain from its shapes and hardware).
    `companions`: {"baseline": {"step_times": df, "l2_cache": df}, "optimized": {...}}."""
    th = Thresholds.from_policy(policy)
    if baseline is None:
        return _plan_only_data(plan, plan_path, hardware, th, policy)
    lookback = int((policy.get("windows") or {}).get("lookback", 3))
    comp = companions or {}
    from ..roofline import classify
    base_roof = classify(baseline.table, hardware, policy=policy)
    base = measure_profile(baseline, plan, "baseline", roofline=base_roof, lookback=lookback,
                           step_times=comp.get("baseline", {}).get("step_times"),
                           l2_cache=comp.get("baseline", {}).get("l2_cache"), policy=policy)
    opt = None
    if optimized is not None:
        opt = measure_profile(optimized, plan, "optimized", lookback=lookback,
                              roofline=classify(optimized.table, hardware, policy=policy),
                              step_times=comp.get("optimized", {}).get("step_times"),
                              l2_cache=comp.get("optimized", {}).get("l2_cache"),
                              policy=policy)
    banners = _banners(plan, base, opt, th)
    verdicts: list[SiteVerdict] = []
    prov: dict[str, Any] = {"report_baseline": base.path}
    cmo = calibrate_cmo(plan, opt)
    tuned = plan
    if opt is not None:
        prov["report_optimized"] = opt.path
        if cmo is not None:   # the measured rate replaces the public figure: its cap binds now
            tuned = replace(plan, sites=tuple(with_rate(s, cmo) for s in plan.sites))
            prov["cmo_bw_gbps_measured"] = cmo.gbps
        for site in tuned.sites:
            b, o = base.site(site.id), opt.site(site.id)
            if b and o and b.found and o.found:
                verdicts.append(site_outcome(site, b, o, base, opt,
                                             verify.passed if verify else None, th,
                                             verify_source=verify.path if verify else ""))
        overall = overall_of([v.outcome for v in verdicts])
    # the plan's expected gain (gain.py), in both modes: A/B shows it next to the measurement
    expectation = expected_gain(plan, base, th, hardware, policy)
    if opt is None:
        overall = "worth_trying" if expectation.worth_enabling else "not_worth_enabling"
    if banners:
        overall = "inconclusive"
    nxt = next_plan(tuned, {v.site_id: v for v in verdicts}, prov)
    target_keys = {signature_key((s.evidence.get("signature") or {}).get("type"),
                                 (s.evidence.get("signature") or {}).get("input_shapes"),
                                 (s.evidence.get("signature") or {}).get("dtypes"))
                   for s in plan.sites if isinstance(s.evidence.get("signature"), dict)}
    top_n = int((policy.get("report") or {}).get("top_n", 10))
    points, roof, rows, notes = _roofline(base_roof, hardware, target_keys, top_n)
    planned_hw = str(plan.created_from.get("hardware") or "")
    if planned_hw and hasattr(hardware, "matches") and not hardware.matches(planned_hw):
        notes.insert(0, f"the plan was made for {planned_hw}; this report uses {hardware.name} "
                        f"({hardware.detected_from}): expected savings are recomputed for it, "
                        "the plan's sizes and caps stay as planned")
    return ReportData(plan, str(plan_path), base, opt, _hw_json(hardware), verify,
                      tuple(verdicts), expectation, tuple(banners), overall, nxt, tuple(points),
                      roof, tuple(rows), th, tuple(notes), cmo)


def _plan_only_data(plan: Plan, plan_path: str, hardware, th: Thresholds, policy) -> ReportData:
    """No profile at all (manual mode, no NPU): what the plan's shapes and hardware give, and
    "unknown (no profile)" for the rest; the A/B script measures it."""
    banners = [Banner("no_sites", "the plan has no sites")] if not plan.sites else []
    expectation = expected_gain(plan, None, th, hardware, policy)
    notes = ("no profile: nothing was measured; the before/after tables come from the A/B script",)
    return ReportData(plan, str(plan_path), None, None, _hw_json(hardware), None, (), expectation,
                      tuple(banners), "inconclusive" if banners else "expected_only", plan, (),
                      None, (), th, notes)


def data_to_json(d: ReportData, files: dict[str, str]) -> dict[str, Any]:
    """The `report --json` document."""
    def check(c):
        return {"key": c.key, "ok": c.ok, "before": c.before, "after": c.after,
                "threshold": c.threshold, "change_pct": c.change_pct, "source": c.source}
    exp = None
    if d.expectation is not None:
        e = d.expectation
        exp = {"step_us": e.step_us, "step_stdev": e.step_stdev, "step_source": e.step_source,
               "e2e_share": list(e.e2e_share) if e.e2e_share else None,
               "measurable": e.measurable, "worth_enabling": e.worth_enabling, "reason": e.reason,
               "step_saving_us": list(e.step_saving_us) if e.step_saving_us else None,
               "sites": [{"site_id": s.site_id, "found": s.found, "target_us": s.target_us,
                          "per_step": s.per_step, "measured_per_step": s.measured_per_step,
                          "saving_per_op_us": list(s.saving_us) if s.saving_us else None,
                          "saving_per_step_us": (list(s.step_saving_us) if s.step_saving_us
                                                 else None),
                          "gain_source": s.source,
                          "bound_per_op_us": list(s.bound_per_op) if s.bound_per_op else None,
                          "share": list(s.share) if s.share else None,
                          "optimistic": s.optimistic, "note": s.note} for s in e.sites]}
    return {
        "schema_version": 1,
        "mode": d.mode,
        "overall": d.overall,
        "banners": [{"code": b.code, "text": b.text} for b in d.banners],
        "plan": d.plan_path,
        "hardware": d.hardware,
        "baseline": d.baseline.to_json() if d.baseline is not None else None,
        "optimized": d.optimized.to_json() if d.optimized else None,
        "verify": ({"path": d.verify.path, "passed": d.verify.passed} if d.verify else None),
        "sites": [{"site_id": v.site_id, "outcome": v.outcome, "success": v.success, "met": v.met,
                   "checks": [check(c) for c in v.checks], "signals": list(v.signals),
                   "action": v.action, "coefficient": [v.coefficient_from, v.coefficient_to],
                   "max_size": [v.max_size_from, v.max_size_to], "reason": v.reason,
                   "steps": v.steps, "few_steps": v.few_steps,
                   "notes": list(v.notes)} for v in d.verdicts],
        "expected": exp,
        "thresholds": dict(d.thresholds.__dict__),
        "cmo_rate": d.cmo.to_json() if d.cmo else None,
        "files": files,
        "notes": list(d.notes),
    }


def relpath(target: str | Path, start: Path) -> str:
    try:
        return str(Path(target).resolve().relative_to(start.resolve()))
    except ValueError:
        return str(Path(target).resolve())
