"""report/rules.site_outcome pinned by values worked out by hand (issue 34 part 4: the lower-branch
`size1 >= size0` and the `crit.ok is False` of "waiting moved" survived the mutation run).

The measures are GENERATED here, by hand, as the values `report/measure.py` would hand over
(exact numbers, no jitter, 6 steps: at least policy `report.min_steps` = 5). Thresholds are the
policy's (configs/policy.yaml `report:`): a window is degraded when it grows by more than 5 % of
its baseline and severely by more than 20 %; a target counts as faster beyond 2 % of its
baseline (every stdev here is 0, so the sigma term is 0).

Site: a 1000 x 1000 bf16 weight (2 000 000 B) at coefficient 0.5 on the ladder 0.1 .. 1.0.
"""

from __future__ import annotations

from types import SimpleNamespace

from cannbot_prefetch.plan import Basis, Cap
from cannbot_prefetch.report.rules import Thresholds, site_outcome
from cannbot_prefetch.report.measurements import ProfileMeasure, SiteMeasure, Stat
from cannbot_prefetch.policy import Policy

WEIGHT = 1000 * 1000 * 2
TH = Thresholds.from_policy(Policy.load())


def test_the_thresholds_the_hand_values_assume():
    assert (TH.window_degraded_share, TH.window_severe_share, TH.min_change_share,
            TH.critical_path_min_change_share, TH.min_steps) == (0.05, 0.20, 0.02, 0.002, 5)


def _stat(mean: float) -> Stat:
    return Stat(mean, 0.0, 6, mean, mean)


def _site(max_size: int, cap: int):
    """cap: an l2_budget cap (binding) in bytes, beside the weight cap."""
    basis = Basis((1000, 1000), 2.0, 0.5, (Cap("weight", WEIGHT), Cap("l2_budget", cap)))
    return SimpleNamespace(id="s", basis=basis, max_size=max_size,
                           ladder={"up": [0.7, 1.0], "down": [0.3, 0.1]})


def _profile(label: str, step_us: float | None, cmo_tasks: float) -> ProfileMeasure:
    return ProfileMeasure(label, "p", tuple(range(6)), (), None if step_us is None else _stat(step_us),
                          "step_trace_time.csv" if step_us is not None else "", "1", None, None,
                          (), (), None, "", None, None, None, frozenset(), 0,
                          cmo_tasks=_stat(cmo_tasks))


def _measure(target_us: float, window_us: float) -> SiteMeasure:
    return SiteMeasure("s", True, target=_stat(target_us), window=_stat(window_us))


def _degraded(site):
    """Target 40 -> 40 µs (not faster), window 10 -> 11 µs: +1 µs > 5 % x 10 = 0.5 (degraded),
    < 20 % x 10 = 2 (not severe); the prefetch ran (4 CMO tasks per step): lower 0.5 -> 0.3."""
    return site_outcome(site, _measure(40, 10), _measure(40, 11), _profile("baseline", 400, 0),
                  _profile("optimized", 400, 4), None, TH)


def test_lower_when_a_cap_bound_both_sizes_scales_the_size_used():
    """Cap 600 000 B: at 0.5 the coefficient gives 1 000 000, the cap binds: size0 = 600 000.
    At 0.3 the coefficient gives 0.3 x 2 000 000 = 600 000 = size0 (the cap no longer below it):
    size_for returns 600 000 >= size0, so the size used is scaled, 600 000 x 0.3 / 0.5 = 360 000.
    Kills `size1 >= size0` -> `size1 > size0` (600 000 would be kept: lowering changes nothing)."""
    v = _degraded(_site(600_000, 600_000))
    assert (v.action, v.coefficient_to, v.reason_code) == ("lower", 0.3, "window_degraded")
    assert (v.max_size_from, v.max_size_to) == (600_000, 360_000)


def test_lower_below_a_cap_that_binds_the_size_used():
    """Cap 400 000 B binds at 0.5 (size0 400 000) and at 0.3 (600 000 > 400 000): size_for gives
    400 000 >= size0, scaled to 400 000 x 0.3 / 0.5 = 240 000. Kills the lower branch removed
    (400 000 kept)."""
    v = _degraded(_site(400_000, 400_000))
    assert (v.action, v.max_size_from, v.max_size_to) == ("lower", 400_000, 240_000)


def test_lower_to_a_size_the_cap_no_longer_binds_is_not_scaled():
    """Cap 700 000 B binds at 0.5 (size0 700 000); at 0.3 the coefficient's 600 000 is below it:
    size_for gives 600 000 < size0, kept as is. Kills the condition dropped (scaling always:
    700 000 x 0.3 / 0.5 = 420 000)."""
    v = _degraded(_site(700_000, 700_000))
    assert (v.action, v.max_size_from, v.max_size_to) == ("lower", 700_000, 600_000)


def test_an_unmeasured_critical_path_is_not_waiting_moved():
    """No step time in either profile: the critical-path check is not measured (ok None, source
    'not measured'), so "target faster, critical path not shorter" does not fire. Target 40 ->
    30 µs: 10 > 2 % x 40 = 0.8, faster; window 10 -> 10, stable: raise 0.5 -> 0.7, size
    0.7 x 2 000 000 = 1 400 000 (cap 10 MB does not bind). Outputs not compared: the gain is
    unconfirmed. Kills `crit.ok is False` -> `not crit.ok` (move_dependency, waiting_moved)."""
    site = _site(1_000_000, 10_000_000)
    v = site_outcome(site, _measure(40, 10), _measure(30, 10), _profile("baseline", None, 0),
               _profile("optimized", None, 4), None, TH)
    crit = v.check("critical_path_shorter")
    assert (crit.ok, crit.before, crit.after, crit.source) == (None, None, None, "not measured")
    assert v.check("target_faster").ok is True and "waiting_moved" not in v.signals
    assert (v.action, v.coefficient_to, v.max_size_to, v.outcome) == ("raise", 0.7, 1_400_000,
                                                                       "unconfirmed")
    assert v.steps is None and v.few_steps is False


def test_a_critical_path_measured_not_shorter_is_waiting_moved():
    """The same, with the step measured 400 -> 400 µs (not shorter: 0 <= 0.2 % x 400 = 0.8):
    the wait moved elsewhere, the next step moves the dependency, size unchanged."""
    site = _site(1_000_000, 10_000_000)
    v = site_outcome(site, _measure(40, 10), _measure(30, 10), _profile("baseline", 400, 0),
               _profile("optimized", 400, 4), None, TH)
    assert v.check("critical_path_shorter").ok is False and "waiting_moved" in v.signals
    assert (v.action, v.reason_code, v.max_size_to) == ("move_dependency", "waiting_moved", 1_000_000)
