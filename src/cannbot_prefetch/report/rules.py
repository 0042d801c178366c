"""The seed's success rule and failure-signal table, as pure functions over measured values.

Success rule (seed 003 "成功标准", read as CONTRACTS.md "Success rule" does): a site succeeds only
when it GAINED - the target op got faster or the critical path got shorter, beyond noise - and
both GUARDS hold: the window is not degraded and the outputs are identical (`--verify-result`).
The guards are required, never gains: "window held + outputs identical" alone is not a success.
Per site the outcome is
  success       a gain, and both guards hold;
  unconfirmed   a gain, no guard failed, but one was not measured (no verify result, window
                ops not found): not a success until it is;
  no_change     neither the target nor the critical path moved beyond noise (either way) and
                the window held: the same profile given twice lands here;
  not_successful  everything else (a guard failed, or something got slower).
A change counts only when it exceeds noise: `noise_sigma` x sqrt(sd_before^2 + sd_after^2) of the
per-step values, and at least `min_change_share` of the baseline value
(`critical_path_min_change_share` for the step time) (configs/policy.yaml `report:`). A verdict
drawn from fewer than `min_steps` steps in either profile says so and asks for more steps: the
spread of 2 steps is one degree of freedom, too few for a 2-sigma rule.

Failure-signal table (seed 003 "失败信号与调整策略" and "调整策略"), first match wins:
  outputs differ                        -> drop the site (a prefetch cannot change results: the
                                           rewrite is wrong; revert it)
  no prefetch (CMO) task in the
    optimized profile, target not
    clearly faster                      -> check the switch (nothing was prefetched: a smaller
                                           size would measure nothing either)
  window severely degraded              -> move the dependency (前移 prefetch / other window)
  window degraded                       -> lower max_size along 0.5 -> 0.3 -> 0.1 (at the bottom: move)
  new long tail on another stream       -> move the dependency, or drop the site
  target faster, critical path not
    shorter (waiting only moved)        -> move the dependency
  target faster, window stable          -> raise max_size along 0.5 -> 0.7 -> 1.0 (at the top, or
                                           bound by a cap: keep, then try the next target)
  target not clearly faster             -> keep when the critical path got shorter, else lower
                                           (at the bottom of the ladder: drop)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..i18n import pairs
from .measurements import ProfileMeasure, SiteMeasure, Stat

# Why a next step was chosen: code -> (English, Chinese with the seed's terms).
REASONS: dict[str, tuple[str, str]] = pairs("report.next")   # configs/messages.yaml

CHECKS = ("target_faster", "critical_path_shorter", "window_stable", "outputs_identical")
GAINS = ("target_faster", "critical_path_shorter")       # at least one must hold
GUARDS = ("window_stable", "outputs_identical")          # both must hold
OUTCOMES = ("success", "unconfirmed", "no_change", "not_successful")
ACTIONS = ("raise", "lower", "keep", "move_dependency", "drop", "check_switch")


@dataclass(frozen=True)
class Thresholds:
    noise_sigma: float = 2.0
    min_change_share: float = 0.02
    critical_path_min_change_share: float = 0.002
    window_degraded_share: float = 0.05
    window_severe_share: float = 0.20
    tail_us: float = 5.0
    tail_step_share: float = 0.01
    not_worth_e2e_share: float = 0.005
    model_overlap_min: float = 0.5
    min_steps: int = 5

    @staticmethod
    def from_policy(pol: dict[str, Any]) -> "Thresholds":
        section = (pol or {}).get("report") or {}
        kw = {}
        for name, f in Thresholds.__dataclass_fields__.items():
            if name in section:
                kw[name] = type(f.default)(section[name])
        return Thresholds(**kw)


@dataclass(frozen=True)
class Check:
    """One criterion of the success rule for one site. `ok` None = not measured."""

    key: str
    ok: bool | None
    before: float | None = None
    after: float | None = None
    threshold: float | None = None       # the change (us) that counts as real
    source: str = ""                     # where the numbers come from
    moved: bool | None = None            # changed beyond the threshold, either way

    @property
    def change_pct(self) -> float | None:
        if self.before in (None, 0) or self.after is None:
            return None
        return (self.after - self.before) / self.before * 100.0


@dataclass(frozen=True)
class SiteVerdict:
    site_id: str
    checks: tuple[Check, ...]
    met: int                         # checks that hold
    success: bool                    # outcome == "success"
    signals: tuple[str, ...]         # failure-table rows that fired (codes)
    action: str                      # raise | lower | keep | move_dependency | drop
    coefficient_from: float
    coefficient_to: float
    max_size_from: int
    max_size_to: int
    reason: str                      # one sentence (English); REASONS[reason_code] has both languages
    notes: tuple[str, ...] = field(default_factory=tuple)
    reason_code: str = ""
    reason_args: tuple[tuple[str, str], ...] = ()
    outcome: str = "not_successful"  # OUTCOMES
    steps: int | None = None         # steps the verdict is drawn from (the fewer of the two)
    few_steps: bool = False          # below Thresholds.min_steps: the reason asks for more

    def reason_in(self, lang: str) -> str:
        en, zh = REASONS.get(self.reason_code, (self.reason, self.reason))
        text = (zh if lang == "zh" else en).format(**dict(self.reason_args))
        if self.few_steps:
            en, zh = REASONS["few_steps"]
            text += " " + (zh if lang == "zh" else en).format(**dict(self.reason_args))
        return text

    def check(self, key: str) -> Check:
        return next(c for c in self.checks if c.key == key)


def noise_threshold(before: Stat, after: Stat, th: Thresholds, floor_share: float | None = None) -> float:
    spread = math.sqrt(before.stdev ** 2 + after.stdev ** 2)
    share = th.min_change_share if floor_share is None else floor_share
    return max(th.noise_sigma * spread, share * abs(before.mean))


def _decrease(key: str, before: Stat | None, after: Stat | None, th: Thresholds, source: str,
              floor_share: float | None = None) -> Check:
    if before is None or after is None:
        return Check(key, None, before.mean if before else None, after.mean if after else None,
                     source=source or "not measured")
    thr = noise_threshold(before, after, th, floor_share)
    return Check(key, before.mean - after.mean > thr, before.mean, after.mean, thr, source,
                 moved=abs(before.mean - after.mean) > thr)


def window_check(before: Stat | None, after: Stat | None, th: Thresholds, source: str
                 ) -> tuple[Check, str | None]:
    """(check, 'severe' | 'degraded' | None)."""
    if before is None or after is None:
        return Check("window_stable", None, before.mean if before else None,
                     after.mean if after else None, source=source or "not measured"), None
    spread = th.noise_sigma * math.sqrt(before.stdev ** 2 + after.stdev ** 2)
    grow = after.mean - before.mean
    degraded_at = max(spread, th.window_degraded_share * before.mean)
    severe_at = max(spread, th.window_severe_share * before.mean)
    level = "severe" if grow > severe_at else ("degraded" if grow > degraded_at else None)
    return Check("window_stable", level is None, before.mean, after.mean, degraded_at, source), level


def new_long_tails(base: ProfileMeasure, opt: ProfileMeasure, th: Thresholds) -> tuple[str, ...]:
    """Side streams whose tail past the compute stream grew beyond the threshold (stream ids)."""
    step = opt.step_time.mean if opt.step_time else 0.0
    limit = max(th.tail_us, th.tail_step_share * step)
    before = {s.stream: s.tail_us for s in base.streams}
    return tuple(s.stream for s in opt.streams if s.tail_us - before.get(s.stream, 0.0) > limit)


def outcome(checks: tuple[Check, ...]) -> str:
    """The success rule over one site's checks (module docstring): a gain, and both guards."""
    by = {c.key: c for c in checks}
    gained = any(by[k].ok for k in GAINS if k in by)
    guards = [by[k].ok for k in GUARDS if k in by]
    if any(g is False for g in guards):
        return "not_successful"
    if gained:
        return "success" if all(g is True for g in guards) else "unconfirmed"
    if all(by[k].moved is False for k in GAINS if k in by):
        return "no_change"
    return "not_successful"


def overall(outcomes: list[str]) -> str:
    """Every site must succeed for SUCCESS; the same input twice is "no change", never SUCCESS."""
    if not outcomes:
        return "not_successful"
    if all(o == "success" for o in outcomes):
        return "success"
    if all(o == "no_change" for o in outcomes):
        return "no_change"
    if all(o in ("success", "unconfirmed") for o in outcomes):
        return "unconfirmed"
    return "not_successful"


def _ladder(site) -> list[float]:
    rungs = set(site.ladder.get("up", [])) | set(site.ladder.get("down", [])) | {site.basis.coefficient}
    return sorted(float(x) for x in rungs if x > 0)


def next_rung(site, direction: str) -> float | None:
    c = site.basis.coefficient
    rungs = _ladder(site)
    if direction == "up":
        ups = [r for r in rungs if r > c + 1e-9]
        return ups[0] if ups else None
    downs = [r for r in rungs if r < c - 1e-9]
    return downs[-1] if downs else None


def weight_bytes(site) -> int:
    for cap in site.basis.caps:
        if cap.name == "weight" and cap.bytes > 0:
            return int(cap.bytes)
    return int(math.prod(site.basis.dims) * site.basis.dtype_bytes)


WINDOW_CAPS = ("hbm_headroom", "cmo_rate_x_window")   # caps that a longer window lifts


def size_for(site, coefficient: float) -> tuple[int, str]:
    """max_size for a coefficient under the plan's binding caps: (bytes, what bound it), by
    sizing.bound_size, the rule analyze sized the site with."""
    from ..sizing import bound_size

    limit, bound = bound_size(int(weight_bytes(site) * coefficient), site.basis.caps)
    return max(1, limit), bound


def site_outcome(site, sm_base: SiteMeasure, sm_opt: SiteMeasure, base: ProfileMeasure,
           opt: ProfileMeasure, verify_passed: bool | None, th: Thresholds,
           verify_source: str = "") -> SiteVerdict:
    """Apply the success rule and the failure table to one site found in both profiles."""
    prefetched = bool(opt.cmo_tasks is not None and opt.cmo_tasks.mean > 0)
    src_t = f"target kernels per step: {base.label} vs {opt.label} profile"
    target = _decrease("target_faster", sm_base.target, sm_opt.target, th, src_t)
    crit = _decrease("critical_path_shorter", base.step_time, opt.step_time, th,
                     opt.step_time_source or base.step_time_source,
                     floor_share=th.critical_path_min_change_share)
    win, level = window_check(sm_base.window, sm_opt.window, th,
                              "window ops before each target kernel, same stream")
    outputs = Check("outputs_identical", verify_passed, source=verify_source or "no --verify-result given")
    checks = (target, crit, win, outputs)
    met = sum(1 for c in checks if c.ok)
    result = outcome(checks)
    success = result == "success"

    tails = new_long_tails(base, opt, th)
    signals: list[str] = []
    if verify_passed is False:
        signals.append("outputs_differ")
    if level == "severe":
        signals.append("window_severe")
    elif level == "degraded":
        signals.append("window_degraded")
    if tails:
        signals.append("new_long_tail")
    if target.ok and crit.ok is False:
        signals.append("waiting_moved")
    if target.ok is False:
        signals.append("target_not_faster")
    if target.ok and level is None:
        signals.append("target_faster_window_stable")

    c0, size0 = site.basis.coefficient, site.max_size
    action, coef, code, notes = "keep", c0, "", []
    args: dict[str, str] = {}

    def step(direction: str, fallback: str, why: str, why_fallback: str):
        nonlocal action, coef, code
        rung = next_rung(site, direction)
        if rung is None:
            action, code = fallback, why_fallback
        else:
            action, coef, code = ("raise" if direction == "up" else "lower"), rung, why

    if not prefetched:
        signals.append("no_prefetch_task")
    if "outputs_differ" in signals:
        action, code = "drop", "outputs_differ"
    elif not prefetched and not target.ok:
        action, code = "check_switch", "no_prefetch_task"
    elif "window_severe" in signals:
        action, code = "move_dependency", "window_severe"
    elif "window_degraded" in signals:
        step("down", "move_dependency", "window_degraded", "window_degraded_bottom")
    elif "new_long_tail" in signals:
        action, code = "move_dependency", "new_long_tail"
        args["streams"] = ", ".join(tails)
    elif "waiting_moved" in signals:
        action, code = "move_dependency", "waiting_moved"
    elif "target_faster_window_stable" in signals:
        step("up", "keep", "raise", "top_of_ladder")
    elif target.ok is False or target.ok is None:
        if crit.ok:
            action, code = "keep", "critical_path_only"
        else:
            step("down", "drop", "no_gain", "no_gain_bottom")

    size1 = size0
    if action in ("raise", "lower"):
        size1, bound = size_for(site, coef)
        if action == "lower" and size1 >= size0:   # a cap bound the size: scale what was used
            size1 = max(1, int(size0 * coef / c0))
        if size1 <= size0 and action == "raise":
            notes.append(f"max_size is bound by {bound}: a larger coefficient changes nothing")
            args["bound"] = bound
            if bound in WINDOW_CAPS:   # the window is what limits: the next step is a longer one
                action, coef, code = "move_dependency", c0, "window_too_short"
            else:
                action, coef, code = "keep", c0, "bound_by_cap"
    counts = [m.step_time.n for m in (base, opt) if m.step_time is not None]
    steps = min(counts) if counts else None
    few = steps is not None and steps < th.min_steps
    reason = REASONS[code][0].format(**args)
    if few:
        args.update(steps=str(steps), min_steps=str(th.min_steps))
        reason += " " + REASONS["few_steps"][0].format(**args)
    return SiteVerdict(site.id, checks, met, success, tuple(signals), action, c0, coef, size0, size1,
                       reason, tuple(notes), code, tuple(sorted(args.items())), result, steps, few)
