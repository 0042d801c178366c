"""Baseline only: the expected improvement from the benefit model, with its bounds.

Per site: the plan's saving per target kernel (`evidence.saving_per_op_us`, else the per-step
`saving_us{low, mid, high}` over the kernels per step; the benefit model of
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

from .measure import ProfileMeasure
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


REASONS: dict[str, tuple[str, str]] = {
    "not_found": ("no planned site was found in the baseline profile",
                  "baseline profiling 中找不到方案中的任何位置"),
    "no_saving": ("the benefit model predicts no saving", "收益模型预测没有收益"),
    "below_threshold": ("the expected end-to-end gain ({gain}% of the step) is below {limit}%",
                        "预期端到端收益(step 的 {gain}%)低于 {limit}%"),
    "below_noise": ("the expected gain is smaller than the step-to-step noise",
                    "预期收益小于 step 间的波动,无法测出"),
    "worth": ("the expected gain is above the threshold and the noise",
              "预期收益高于阈值且高于 step 间波动"),
}


@dataclass(frozen=True)
class SiteExpectation:
    site_id: str
    found: bool
    target_us: float | None          # measured mean per kernel (baseline)
    target_stdev: float | None
    per_step: float                  # target kernels per step (baseline)
    saving_us: tuple[float, float, float]        # plan's low / mid / high per kernel (per_op_saving)
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
    reason_code: str = ""
    reason_args: tuple[tuple[str, str], ...] = ()

    def reason_in(self, lang: str) -> str:
        en, zh = REASONS.get(self.reason_code, (self.reason, self.reason))
        return (zh if lang == "zh" else en).format(**dict(self.reason_args))


def per_op_saving(site, measured_per_step: float) -> tuple[float, float, float]:
    """The plan's saving per target kernel: `evidence.saving_per_op_us` when present, else
    `saving_us` (per step, CONTRACTS.md / sizing.py) over the plan's `instances_per_step`, else over
    the kernels per step measured in the baseline."""
    ev = site.evidence or {}
    per_op = ev.get("saving_per_op_us")
    if isinstance(per_op, dict) and all(isinstance(per_op.get(k), (int, float)) for k in ("low", "mid", "high")):
        vals = (per_op["low"], per_op["mid"], per_op["high"])
    else:
        n = ev.get("instances_per_step")
        n = float(n) if isinstance(n, (int, float)) and n > 0 else (measured_per_step or 1.0)
        s = site.saving_us
        vals = (s.low / n, s.mid / n, s.high / n)
    return tuple(max(0.0, float(v)) for v in vals)


def expected_gain(plan, base: ProfileMeasure, th: Thresholds) -> Expectation:
    rows = []
    for site in plan.sites:
        sm = base.site(site.id)
        raw = per_op_saving(site, sm.per_step if sm and sm.found else 0.0)
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
    args: dict[str, str] = {}
    if not any(r.found for r in rows):
        worth, code = False, "not_found"
    elif total[1] <= 0:
        worth, code = False, "no_saving"
    elif e2e is not None and e2e[1] < th.not_worth_e2e_share:
        worth, code = False, "below_threshold"
        args = {"gain": f"{e2e[1] * 100:.2f}", "limit": f"{th.not_worth_e2e_share * 100:.1f}"}
    elif measurable is False:
        worth, code = False, "below_noise"
    else:
        worth, code = True, "worth"
    reason = REASONS[code][0].format(**args)
    return Expectation(tuple(rows), step.mean if step else None, step.stdev if step else None,
                       base.step_time_source, e2e, measurable, worth, reason, code,
                       tuple(sorted(args.items())))
