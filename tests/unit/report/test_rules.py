"""The seed's success rule and failure-signal table on GENERATED baseline/optimized pairs.

Each test builds a pair that reaches one branch, then checks the verdict, the proposed action
and the next-step plan. Baseline: gate MatMul 40 µs x 4 layers, window Add 2 µs + RmsNorm 6 µs,
step ~384 µs, ±1% jitter.
"""

from __future__ import annotations

import pytest
from profgen import Variant

from cannbot_prefetch.report import VerifySummary
from cannbot_prefetch.report.nextplan import DROPPED

WEIGHT = 8192 * 2048 * 2
SITE = "llama-mlp-gate_proj"


def _v(d):
    assert len(d.verdicts) == 1, d.banners
    return d.verdicts[0]


def _ok(v, key):
    return v.check(key).ok


OK = VerifySummary("verify.json", True)


def test_target_faster_window_stable_raises_along_the_ladder(make_report):
    d = make_report(Variant(target_factor=0.8), verify=OK)
    v = _v(d)
    assert (_ok(v, "target_faster"), _ok(v, "critical_path_shorter"), _ok(v, "window_stable")) == (True, True, True)
    assert _ok(v, "outputs_identical") is True
    assert v.outcome == "success" and v.success and d.overall == "success"
    assert v.action == "raise" and v.coefficient_to == 0.7
    site = d.next_plan.sites[0]
    assert site.max_size == int(WEIGHT * 0.7) == v.max_size_to
    assert site.basis.coefficient == 0.7
    assert site.ladder == {"up": [1.0], "down": [0.5, 0.3, 0.1]}
    assert d.next_plan.status == "proposed"
    assert site.evidence["tuning"]["action"] == "raise"
    assert not d.banners


def test_a_gain_without_compared_outputs_is_not_confirmed(make_report):
    # outputs identical is a required guard: without --verify-result the gain is not a SUCCESS
    d = make_report(Variant(target_factor=0.8))
    v = _v(d)
    assert _ok(v, "target_faster") and _ok(v, "outputs_identical") is None
    assert v.outcome == "unconfirmed" and not v.success and d.overall == "unconfirmed"
    assert v.action == "raise"     # the tuning step does not wait for the guard


def test_top_of_the_ladder_keeps_the_size(make_report):
    d = make_report(Variant(target_factor=0.8), coefficient=1.0, verify=OK)
    v = _v(d)
    assert v.success and v.action == "keep"
    assert d.next_plan.sites[0].max_size == d.plan.sites[0].max_size == WEIGHT


def test_size_bound_by_the_l2_budget_keeps_and_names_the_next_target(make_report):
    d = make_report(Variant(target_factor=0.8), cap_bytes=10_000_000, cap_name="l2_budget",
                    bound_by="l2_budget")
    v = _v(d)
    assert v.action == "keep" and v.reason_code == "bound_by_cap"
    assert "--max-sites" in v.reason
    assert any("l2_budget" in n for n in v.notes)
    assert d.next_plan.sites[0].max_size == 10_000_000


def test_a_window_cap_binding_moves_the_dependency(make_report):
    # bound by what the window can carry: the real next step is a longer window (issue 10 item 5)
    d = make_report(Variant(target_factor=0.8), cap_bytes=10_000_000, cap_name="hbm_headroom",
                    bound_by="hbm_headroom")
    v = _v(d)
    assert v.action == "move_dependency" and v.reason_code == "window_too_short"
    assert d.next_plan.sites[0].evidence["tuning"]["action"] == "move_dependency"


def test_the_default_cmo_rate_never_stops_the_ladder(make_report):
    # the CMO cap is a risk (binding: false): 10 MB under it, the size still climbs 0.5 -> 0.7
    d = make_report(Variant(target_factor=0.8), cap_bytes=10_000_000, cap_binding=False)
    v = _v(d)
    assert v.action == "raise" and v.coefficient_to == 0.7
    assert d.next_plan.sites[0].max_size == int(WEIGHT * 0.7) > 10_000_000


def test_window_degraded_lowers_the_size(make_report):
    d = make_report(Variant(window_factor=1.10, cmo_us=10))
    v = _v(d)
    assert _ok(v, "window_stable") is False and _ok(v, "target_faster") is False
    assert "window_degraded" in v.signals
    assert not v.success and d.overall == "not_successful"
    assert v.action == "lower" and v.coefficient_to == 0.3
    site = d.next_plan.sites[0]
    assert site.max_size == int(WEIGHT * 0.3)
    assert site.ladder == {"up": [0.5, 0.7, 1.0], "down": [0.1]}


def test_window_severely_degraded_moves_the_dependency(make_report):
    d = make_report(Variant(target_factor=0.9, window_factor=1.5))
    v = _v(d)
    assert "window_severe" in v.signals and v.action == "move_dependency"
    site = d.next_plan.sites[0]
    assert site.max_size == d.plan.sites[0].max_size
    assert site.evidence["tuning"]["action"] == "move_dependency"


def test_new_long_tail_on_the_side_stream_moves_the_dependency(make_report):
    d = make_report(Variant(target_factor=0.8, cmo_us=10, cmo_tail_us=40))
    v = _v(d)
    assert "new_long_tail" in v.signals
    assert v.action == "move_dependency"
    side = {s.stream: s for s in d.optimized.streams}["7"]
    assert side.cmo_kernels > 0 and side.tail_us > 30


def test_waiting_moved_target_faster_but_critical_path_not_shorter(make_report):
    d = make_report(Variant(target_factor=0.8, idle_us=8.0))
    v = _v(d)
    assert _ok(v, "target_faster") is True and _ok(v, "critical_path_shorter") is False
    assert "waiting_moved" in v.signals and v.action == "move_dependency"
    # the target op is faster (a gain) and the guards hold: a success whose next step moves the wait
    d = make_report(Variant(target_factor=0.8, idle_us=8.0), verify=OK)
    assert _v(d).success and _v(d).action == "move_dependency"
    assert d.optimized.compute_idle.mean > d.baseline.compute_idle.mean + 20


def test_no_gain_lowers_then_drops_at_the_bottom(make_report, tmp_path):
    d = make_report(Variant(cmo_us=10))     # the prefetch ran (CMO tasks) and gained nothing
    v = _v(d)
    assert _ok(v, "target_faster") is False and "target_not_faster" in v.signals
    assert v.action == "lower" and v.coefficient_to == 0.3


def test_no_prefetch_task_checks_the_switch_not_the_size(make_report):
    # issue 30 part 4: no CMO task in the optimized profile = the prefetch never ran; lowering
    # the size would measure nothing either
    d = make_report(Variant())
    v = _v(d)
    assert "no_prefetch_task" in v.signals
    assert v.action == "check_switch" and v.reason_code == "no_prefetch_task"
    assert v.coefficient_to == v.coefficient_from and v.max_size_to == v.max_size_from
    assert "switch" in v.reason and "开关" in v.reason_in("zh")
    assert d.next_plan.sites[0].max_size == v.max_size_from
    from cannbot_prefetch.report.build import data_to_json
    doc = data_to_json(d, {})
    assert doc["sites"][0]["action"] == "check_switch" and doc["sites"][0]["steps"] == 5
    assert doc["sites"][0]["few_steps"] is False


def test_a_verdict_from_two_steps_says_so(make_report):
    # profgen writes steps + 1 (the first is warm-up, excluded): 2 measured steps per profile
    d = make_report(Variant(target_factor=0.8, cmo_us=10), verify=OK,
                    base_kw={"steps": 3}, opt_kw={"steps": 3})
    v = _v(d)
    assert v.steps == 2 and v.few_steps
    assert "2 step(s)" in v.reason and "profile more steps" in v.reason
    assert "2 个 step" in v.reason_in("zh")


def test_no_gain_at_the_bottom_drops_the_site(make_report):
    d = make_report(Variant(cmo_us=10), coefficient=0.1)
    v = _v(d)
    assert v.action == "drop"
    assert d.next_plan.sites == ()
    rej = d.next_plan.rejections[-1]
    assert rej["reason_code"] == DROPPED and rej["site_id"] == SITE


def test_small_change_within_noise_does_not_count(make_report):
    d = make_report(Variant(target_factor=0.99))
    v = _v(d)
    c = v.check("target_faster")
    assert c.after < c.before and c.ok is False
    assert c.threshold >= 0.02 * c.before


def test_guards_alone_are_not_a_success(make_report):
    # window held + outputs identical, but nothing got faster: "no change", never SUCCESS
    d = make_report(Variant(), verify=OK)
    v = _v(d)
    assert _ok(v, "outputs_identical") is True and _ok(v, "window_stable") is True
    assert not _ok(v, "target_faster") and not _ok(v, "critical_path_shorter")
    assert v.outcome == "no_change" and not v.success and d.overall == "no_change"


def test_the_same_profile_twice_is_no_change(tmp_path):
    from profgen import write_plan, write_profile

    from cannbot_prefetch import hardware
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.report import build_report
    from cannbot_prefetch.policy import Policy

    a = load_profile(write_profile(tmp_path / "a"))
    r = build_report(load_plan(write_plan(tmp_path)), "plan.yaml", a, a,
                     hardware=hardware.resolve(None, a.info), verify=OK, policy=Policy.load())
    v = r.verdicts[0]
    assert all(c.moved is False for c in v.checks if c.key in ("target_faster", "critical_path_shorter"))
    assert v.outcome == "no_change" and r.overall == "no_change" and not v.success


def test_a_slower_target_is_not_no_change(make_report):
    d = make_report(Variant(target_factor=1.3), verify=OK)
    assert _v(d).outcome == "not_successful" and d.overall == "not_successful"


def test_outputs_differ_drops_the_site_and_is_never_a_success(make_report):
    bad = VerifySummary("verify.json", False)
    d = make_report(Variant(target_factor=0.8), verify=bad)
    v = _v(d)
    assert v.met == 3 and not v.success and v.outcome == "not_successful"
    assert v.signals[0] == "outputs_differ" and v.action == "drop"
    assert d.next_plan.sites == ()


@pytest.mark.parametrize("variant,kw,code", [
    (Variant(other_model=True, target_factor=0.8), {}, "different_models"),
    (Variant(target_factor=0.8), {"opt_kw": {"mhz": 1500}}, "different_hardware"),
    (Variant(drop_target=True), {}, "site_not_in_optimized"),
    (Variant(target_factor=0.8), {"shapes": "3,5;7,5"}, "site_missing"),
])
def test_mismatches_raise_a_banner(make_report, variant, kw, code):
    d = make_report(variant, **kw)
    assert code in [b.code for b in d.banners]


def test_matching_pair_has_no_banner(make_report):
    assert make_report(Variant(target_factor=0.8)).banners == ()


def test_two_sites_each_get_their_own_verdict(tmp_path):
    import copy

    import yaml
    from profgen import DOWN, plan_dict, write_profile

    from cannbot_prefetch import hardware
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.report import build_report
    from cannbot_prefetch.policy import Policy

    d = plan_dict()
    down = copy.deepcopy(d["sites"][0])
    down["id"] = "llama-mlp-down_proj"
    down["evidence"]["signature"]["input_shapes"] = DOWN[1]
    down["evidence"]["window"]["ops"] = ["Silu"]
    d["sites"].append(down)
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(d))
    a = load_profile(write_profile(tmp_path / "a"))
    b = load_profile(write_profile(tmp_path / "b", Variant(target_factor=0.8, cmo_us=10), seed=2))
    r = build_report(load_plan(tmp_path / "plan.yaml"), "plan.yaml", a, b,
                     hardware=hardware.resolve(None, a.info), verify=OK, policy=Policy.load())
    v = {x.site_id: x for x in r.verdicts}
    assert v[SITE].action == "raise" and v[SITE].success
    # down_proj did not change: not faster, though the shared critical path got shorter -> keep
    assert v["llama-mlp-down_proj"].check("target_faster").ok is False
    assert v["llama-mlp-down_proj"].action == "keep"
    assert r.baseline.site("llama-mlp-down_proj").window_ops == ("Silu",)
    assert [s.max_size for s in r.next_plan.sites] == [int(WEIGHT * 0.7), d["sites"][1]["max_size"]]


def test_the_cmo_rate_is_calibrated_from_the_optimized_profile(make_report):
    # GENERATED pair: one 10 us CMO task per layer (4 per step) prefetching max_size each time
    d = make_report(Variant(target_factor=0.8, cmo_us=10), verify=OK, cap_binding=False)
    c = d.cmo
    size = d.plan.sites[0].max_size
    assert c is not None and c.tasks_per_step == pytest.approx(4)
    assert c.gbps == pytest.approx(size * 4 / (c.us_per_step * 1e-6) / 1e9, rel=1e-3)
    assert c.us_per_step == pytest.approx(40, rel=0.05)
    cap = next(x for x in d.next_plan.sites[0].basis.caps if x.name == "cmo_rate_x_window")
    assert cap.binding and "measured" in cap.note
    assert cap.bytes == int(c.gbps * 1e9 * 10.0 * 1e-6)        # x the plan's 10 us window
    # measured ~1.7 TB/s x 10 us = 16.8 MB < 0.7 x 32 MiB: the calibrated cap now bounds the
    # raise, and the window is what limits, so the next step is a longer window
    v = _v(d)
    assert v.action == "move_dependency" and v.reason_code == "window_too_short"


def test_no_cmo_task_leaves_the_rate_uncalibrated(make_report):
    d = make_report(Variant(target_factor=0.8), verify=OK)
    assert d.cmo is None


def test_the_next_plan_carries_its_rungs_in_bytes(make_report):
    # the next plan's evidence.ladder_bytes follows the new size: after a raise to 0.7 of a
    # 32 MiB weight (no binding cap below it), up 1.0 = the whole weight, down 0.5 / 0.3 / 0.1
    # scale the new size by rung / 0.7 (sizing.rung_sizes)
    from dataclasses import replace

    from cannbot_prefetch.report.nextplan import next_plan

    d = make_report(Variant(target_factor=0.8), verify=OK)
    site = d.plan.sites[0]
    site = replace(site, evidence={**site.evidence, "ladder_bytes": {"up": [1, 1], "down": [1, 1]}})
    nxt = next_plan(replace(d.plan, sites=(site,)), {v.site_id: v for v in d.verdicts}, {})
    new = int(WEIGHT * 0.7)
    assert nxt.sites[0].max_size == new
    assert nxt.sites[0].evidence["ladder_bytes"] == {
        "up": [WEIGHT], "down": [int(new * 0.5 / 0.7), int(new * 0.3 / 0.7), int(new * 0.1 / 0.7)]}
