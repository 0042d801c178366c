"""Baseline only (or the plan alone): the expected improvement, with its bounds.

Per site the expected saving comes from gain.py, the one function analyze and the design use too:
recomputed from the plan's recorded benefit inputs (`evidence.mean_us`, `bytes_per_op`,
`instances_per_step`, `window.effective_us` / `bytes`, `max_size`) with the report's hardware
(the plan's, unless `--hardware` overrides it), else the figures the plan recorded. Its per-step
value counts the plan's kernels per step (the call site it maps), not every kernel that shares the
signature in the baseline (k_proj and v_proj do); a different measured count is noted. The
baseline supplies what only a measurement knows: whether the target is there, its measured time
(the share of the op is against it) and the step time. End to end: the summed per-step saving
over the measured step time, next to the public measurements. Below `not_worth_e2e_share` (0.5%)
of the step, or below the step-to-step noise, the answer is "not worth enabling". With no
profile the share of the step is "unknown (no profile)".
"""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import pairs
from ..policy import Policy
from ..gain import optimistic_share, per_call_bound, site_gain
from .measurements import ProfileMeasure
from .rules import Thresholds

# REFERENCE.md §5, "Measured gains in public": (who, what they measured); the measurement's
# wording in both languages is configs/messages.yaml `report.public.<key>`.
PUBLIC_MEASUREMENTS: tuple[tuple[str, str], ...] = (
    ("vllm-ascend PR 1509", "pr1509"),
    ("vllm-ascend PR 2550", "pr2550"),
    ("pypto-lib PR 963", "pypto963"),
    ("vllm-ascend, 2026-07", "removed"),
)
PUBLIC_SOURCE = "docs/sources.md"
PUBLIC_E2E_RANGE = (0.0035, 0.089)   # the span of the end-to-end figures above, as shares


REASONS: dict[str, tuple[str, str]] = pairs("report.expected")   # configs/messages.yaml


@dataclass(frozen=True)
class SiteExpectation:
    site_id: str
    found: bool                      # the target is in the baseline (False also: no baseline)
    target_us: float | None          # measured mean per kernel (baseline)
    target_stdev: float | None
    per_step: float                  # target kernels per step the gain counts (the plan's)
    measured_per_step: float | None  # kernels with the plan's signature per step in the baseline
    saving_us: tuple[float, float, float] | None       # per kernel, low / mid / high (gain.py)
    step_saving_us: tuple[float, float, float] | None  # per step (gain.py): THE number
    share: tuple[float, float, float] | None           # of the target's time
    optimistic: bool
    source: str = "recomputed"       # recomputed | recorded | unknown (gain.site_gain)
    note: str = ""
    bound_per_op: tuple[float, float, float] | None = None   # gain.per_call_bound (no profile)


@dataclass(frozen=True)
class Expectation:
    sites: tuple[SiteExpectation, ...]
    step_us: float | None
    step_stdev: float | None
    step_source: str
    e2e_share: tuple[float, float, float] | None   # low / mid / high, of the step time
    measurable: bool | None                         # mid saving above the step noise
    worth_enabling: bool | None                     # None: cannot be judged without a profile
    reason: str
    reason_code: str = ""
    reason_args: tuple[tuple[str, str], ...] = ()
    step_saving_us: tuple[float, float, float] | None = None   # summed over sites
    optimistic_share: float = 0.0    # the policy's threshold the sites were flagged by (gain.py)

    def reason_in(self, lang: str) -> str:
        en, zh = REASONS.get(self.reason_code, (self.reason, self.reason))
        return (zh if lang == "zh" else en).format(**dict(self.reason_args))


def _site(site, sm, hw, pol) -> SiteExpectation:
    sg = site_gain(site, hw, pol)
    g = sg.gain
    ev = site.evidence or {}
    n = ev.get("instances_per_step")
    found = bool(sm is not None and sm.found and sm.target is not None)
    measured_n = sm.per_step if found else None
    per_step = float(n) if isinstance(n, (int, float)) and n > 0 else (measured_n or 0.0)
    rb = per_call_bound(site, hw, pol)
    bound = (rb.low, rb.mid, rb.high) if rb is not None else None
    if g is None:
        return SiteExpectation(site.id, found, sm.target.mean if found else None,
                               sm.target.stdev if found else None, per_step, measured_n,
                               None, None, None, False, sg.source, bound_per_op=bound)
    per_op = (g.per_op.low, g.per_op.mid, g.per_op.high)
    if isinstance(n, (int, float)) and n > 0:
        step = (g.per_step.low, g.per_step.mid, g.per_step.high)
    else:   # a plan without a count: the kernels per step measured in the baseline
        step = tuple(round(x * per_step, 3) for x in per_op)
    t = sm.target.mean if found else ev.get("mean_us")
    share = tuple(x / t for x in per_op) if isinstance(t, (int, float)) and t > 0 else None
    note = ""
    if found and abs(measured_n - per_step) > 0.5:
        note = (f"the baseline has {measured_n:g} kernels per step with this signature; the plan "
                f"counts {per_step:g} (its call site), and so does the expected gain")
    return SiteExpectation(site.id, found, sm.target.mean if found else None,
                           sm.target.stdev if found else None, per_step, measured_n, per_op, step,
                           share, bool(share) and share[1] > optimistic_share(pol), sg.source, note,
                           bound)


def expected_gain(plan, base: ProfileMeasure | None, th: Thresholds, hw,
                  pol: Policy) -> Expectation:
    """The expected gain of `plan` on `hw`; `base` None = no profile (`report --plan` alone)."""
    rows = [_site(site, base.site(site.id) if base else None, hw, pol) for site in plan.sites]
    known = [r for r in rows if r.step_saving_us is not None]
    total = tuple(round(sum(r.step_saving_us[i] for r in known), 3) for i in range(3)) if known else None
    step = base.step_time if base is not None else None
    e2e = tuple(x / step.mean for x in total) if total and step and step.mean > 0 else None
    measurable = None
    if total and step is not None and step.n > 1:
        measurable = total[1] > th.noise_sigma * step.stdev
    args: dict[str, str] = {}
    worth: bool | None
    if base is not None and not any(r.found for r in rows):
        worth, code = False, "not_found"
    elif total is None:
        worth, code = None, "unknown"
    elif total[1] <= 0:
        worth, code = False, "no_saving"
    elif base is None:
        worth, code = None, "no_baseline"
        args = {"gain": f"{total[1]:.1f}"}
    elif e2e is not None and e2e[1] < th.not_worth_e2e_share:
        worth, code = False, "below_threshold"
        args = {"gain": f"{e2e[1] * 100:.2f}", "limit": f"{th.not_worth_e2e_share * 100:.1f}"}
    elif measurable is False:
        worth, code = False, "below_noise"
    else:
        worth, code = True, "worth"
    reason = REASONS[code][0].format(**args)
    return Expectation(tuple(rows), step.mean if step else None, step.stdev if step else None,
                       base.step_time_source if base is not None else "", e2e, measurable, worth,
                       reason, code, tuple(sorted(args.items())), total, optimistic_share(pol))
