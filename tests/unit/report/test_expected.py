"""Baseline-only mode: expected gain with bounds, the 30% flag, and "not worth enabling"."""

from __future__ import annotations

import pytest

from cannbot_prefetch.report.expected import PUBLIC_MEASUREMENTS
from cannbot_prefetch.report.markdown import render
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down


def test_expected_gain_from_the_plan_against_measured_time(make_report):
    d = make_report(None)
    e = d.expectation
    s = e.sites[0]
    assert s.found and s.per_step == 4
    assert s.target_us == pytest.approx(40.0, rel=0.02)
    assert s.share[1] == pytest.approx(6.0 / s.target_us)
    assert not s.optimistic
    # 4 kernels x 6 µs over a ~384 µs step
    assert e.e2e_share[1] == pytest.approx(24.0 / e.step_us)
    assert e.worth_enabling and d.overall == "worth_trying"
    assert d.verdicts == () and d.next_plan.sites == d.plan.sites


def test_more_than_30_percent_of_the_op_is_flagged_optimistic(make_report):
    d = make_report(None, saving=(10.0, 15.0, 60.0))
    s = d.expectation.sites[0]
    assert s.optimistic                     # 15 of ~40 µs per op
    text = render(d, "en", {})
    assert "optimistic" in text


def test_tiny_gain_is_not_worth_enabling(make_report):
    d = make_report(None, saving=(0.05, 0.1, 0.2))
    assert not d.expectation.worth_enabling
    assert d.overall == "not_worth_enabling"
    en, zh = render(d, "en", {}), render(d, "zh", {})
    assert "Not worth enabling" in en and "不建议开启" in zh
    assert "预期端到端收益（step 的 0.10%）低于 0.5%" in zh
    for who, _ in PUBLIC_MEASUREMENTS:   # the public numbers are cited next to ours
        assert who in en and who in zh
    assert "docs/sources.md" in en
    assert "below the smallest public end-to-end gain (0.35%)" in en


def test_site_missing_from_the_baseline_is_a_banner(make_report):
    d = make_report(None, shapes="3,5;7,5")
    assert [b.code for b in d.banners] == ["site_missing"]
    assert not d.expectation.worth_enabling


def test_a_plan_without_benefit_inputs_uses_its_recorded_figures(make_report):
    from dataclasses import replace

    from cannbot_prefetch.gain import site_gain
    d = make_report(None)
    site = d.plan.sites[0]
    sg = site_gain(site, None, POLICY)
    assert sg.source == "recorded"
    assert tuple(sg.gain.per_op.__dict__.values()) == (3.0, 6.0, 9.0)      # evidence.saving_per_op_us
    assert tuple(sg.gain.per_step.__dict__.values()) == (12.0, 24.0, 36.0)  # saving_us, per step
    ev = {k: v for k, v in site.evidence.items() if k != "saving_per_op_us"}
    sg = site_gain(replace(site, evidence=ev), None, POLICY)
    assert tuple(sg.gain.per_op.__dict__.values()) == (3.0, 6.0, 9.0)      # 12/24/36 over 4
    assert site_gain(replace(site, saving_us=None, evidence=ev), None, POLICY).source == "unknown"
    # the report's per-step number is the plan's, not the kernels the baseline happens to count
    assert d.expectation.step_saving_us == (12.0, 24.0, 36.0)
