"""Baseline only: the expected improvement from the benefit model, with its bounds.

Per site: the plan's `saving_us{low, mid, high}` per target kernel (the benefit model of
REFERENCE.md §5: saved ~= P / BW_eff x (1 - BW_eff / BW_L2), bounded by the op time minus its
compute floor, minus any window slowdown; computed by `analyze`), set against the target's time
measured in the baseline. A predicted saving above `optimistic_op_share` (30%) of the op is
flagged optimistic. End to end: the saving per step (saving per kernel x kernels per step, summed
over sites) as a share of the measured step time, shown next to the public measurements. Below
`not_worth_e2e_share` (0.5%) of the step, or below the step-time noise, the answer is
"not worth enabling".
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiling.compare import ProfileMeasure
from .rules import Thresholds

# REFERENCE.md §5, "Measured gains in public".
PUBLIC_MEASUREMENTS: tuple[tuple[str, str, str], ...] = (
    ("vllm-ascend PR 1509", "MoE w1 prefetch", "+0.35% to +2.1% throughput; worse past 100 MB"),
    ("vllm-ascend PR 2550", "Qwen3-235B on A3", "2.9% to 8.9% lower P90 TPOT"),
    ("pypto-lib PR 963", "attention weights", "-2.1% decode time; 5.6-7.5% per attention layer"),
    ("vllm-ascend, July 2026", "feature removed", "removed as \"underutilized and low-value\""),
)
PUBLIC_SOURCE = "REFERENCE.md §5 (public measurements)"
PUBLIC_E2E_RANGE = (0.0035, 0.089)   # the span of the end-to-end figures above, as shares


@dataclass(frozen=True)
class SiteExpectation:
    site_id: str
    found: bool
    target_us: float | None          # measured mean per kernel (baseline)
    target_stdev: float | None
    per_step: float                  # target kernels per step (baseline)
    saving_us: tuple[float, float, float]        # plan's low / mid / high per kernel
    saving_clamped: tuple[float, float, float]   # bounded by the measured op time
    share: tuple[float, float, float] | None     # of the target's time
    optimistic: bool
    step_saving_us: tuple[float, float, float]   # per step, clamped


@dataclass(frozen=True)
class Expectation:
    sites: tuple[SiteExpectation, ...]
    step_us: float | None
    step_stdev: float | None
    step_source: str
    e2e_share: tuple[float, float, float] | None   # low / mid / high, of the step time
    measurable: bool | None                         # mid saving above the step noise
    worth_enabling: bool
    reason: str


def expected_gain(plan, base: ProfileMeasure, th: Thresholds) -> Expectation:
    rows = []
    for site in plan.sites:
        sm = base.site(site.id)
        s = site.saving_us
        raw = (max(0.0, s.low), max(0.0, s.mid), max(0.0, s.high))
        if sm is None or not sm.found or sm.target is None:
            rows.append(SiteExpectation(site.id, False, None, None, 0.0, raw, raw, None, False,
                                        (0.0, 0.0, 0.0)))
            continue
        t = sm.target.mean
        clamped = tuple(min(x, t) for x in raw)
        share = tuple(x / t for x in clamped) if t > 0 else None
        optimistic = bool(share) and share[1] > th.optimistic_op_share
        per_step = sm.per_step
        rows.append(SiteExpectation(site.id, True, t, sm.target.stdev, per_step, raw, clamped,
                                    share, optimistic, tuple(x * per_step for x in clamped)))
    step = base.step_time
    total = tuple(sum(r.step_saving_us[i] for r in rows) for i in range(3))
    e2e = tuple(x / step.mean for x in total) if step and step.mean > 0 else None
    measurable = None
    if step is not None and step.n > 1:
        measurable = total[1] > th.noise_sigma * step.stdev
    if not any(r.found for r in rows):
        worth, reason = False, "no planned site was found in the baseline profile"
    elif total[1] <= 0:
        worth, reason = False, "the benefit model predicts no saving"
    elif e2e is not None and e2e[1] < th.not_worth_e2e_share:
        worth, reason = False, (f"the expected end-to-end gain ({e2e[1] * 100:.2f}% of the step) is "
                                f"below {th.not_worth_e2e_share * 100:.1f}%")
    elif measurable is False:
        worth, reason = False, "the expected gain is smaller than the step-to-step noise"
    else:
        worth, reason = True, "the expected gain is above the threshold and the noise"
    return Expectation(tuple(rows), step.mean if step else None, step.stdev if step else None,
                       base.step_time_source, e2e, measurable, worth, reason)
