"""One expected gain for one plan and hardware: analyze JSON, plan, design and report show the
value worked out by hand (issue 10 item 8, issue 34 part 4), on the bundled GENERATED
Llama-3.2-1B example profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.gain import site_gain
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

REPO = Path(__file__).resolve().parents[3]
LLAMA = REPO / "examples" / "llama3.2-1b-en"


@pytest.fixture(scope="module")
def llama_run(tmp_path_factory):
    pytest.importorskip("transformers")
    from cannbot_prefetch import analyze
    src = "transformers.models.llama.modeling_llama"
    out = tmp_path_factory.mktemp("llama")
    res = analyze(str(LLAMA / "profile"), model_src=src,
                  model_config=str(LLAMA / "config.json"), out=str(out),
                  src_map=(("/usr/local/lib/python3.10/site-packages",
                            str(Path(__import__("transformers").__file__).parents[1])),),
                  max_sites=3)
    res.save()
    return res, out


# The three sites analyze plans on the example, worked out by hand from the inputs the plan
# records (asserted below, so a changed example profile fails here rather than moving the pins).
# 910B3 (configs/hardware/910B3.yaml): HBM 1.6e12 B/s, one CMO stream 285 GB/s, so the low / mid
# / high rates are 285, 942.5, 1600 GB/s; L2/HBM ratios 3.4 / 4.2 / 5.0 (policy benefit); 16
# instances per step (16 layers).
#   idle   = window - window bytes / HBM;  hidden = min(max_size, idle x rate)
#   e      = op bytes / op time / HBM (below 1: the op's own rate)
#   per op = hidden / (e x HBM) x (1 - e / ratio), rounded to 0.001 µs, x 16 per step
# q_proj:  8396800 B in 10.526 µs, e = 0.498575; window 9.901 µs (the previous layer's down_proj
#          output, rule 3a: Add + RmsNorm) moving 12288 + 12292 = 24580 B: idle 9.885637;
#          max_size 4194304; hidden 2817406 / 4194304 / 4194304 B
#          -> 3.531823 x 0.853360 = 3.014; 5.257865 x 0.881292 = 4.634; 5.257865 x 0.900285 = 4.734
#          -> 48.224 / 74.144 / 75.744 µs per step
# o_proj:  8396800 B in 10.513 µs, e = 0.499191; window 7.369 µs moving 2105352 B: idle 6.053155;
#          max_size 4194304; hidden 1725149 / 4194304 / 4194304
#          -> 2.159929 x 0.853179 = 1.843; 5.251372 x 0.881145 = 4.627; x 0.900162 = 4.727
#          -> 29.488 / 74.032 / 75.632
# gate_proj: 33574912 B in 32.977 µs, e = 0.636332; window 9.741 µs (o_proj's output, rule 3a:
#          Add + RmsNorm) moving 24580 B: idle 9.725637; max_size 15561020 (the HBM headroom,
#          idle x 1.6e12); hidden 2771806 / 9166413 / 15561020
#          -> 2.722445 x 0.812844 = 2.213; 9.003175 x 0.848492 = 7.639; 15.283905 x 0.872734 = 13.339
#          -> 35.408 / 122.224 / 213.424
HAND = {
    "llamaattention-q_proj": ((10.526, 8396800, 9.901, 24580, 4194304), (48.224, 74.144, 75.744)),
    "llamaattention-o_proj": ((10.513, 8396800, 7.369, 2105352, 4194304), (29.488, 74.032, 75.632)),
    "llamamlp-gate_proj": ((32.977, 33574912, 9.741, 24580, 15561020), (35.408, 122.224, 213.424)),
}


def test_plan_design_json_and_report_give_one_number(llama_run):
    """Every face shows the hand-worked saving (HAND) for each site: the plan's record, the gain
    recomputed from it, analyze's JSON, the report (baseline only and A/B) and the design."""
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.report import build_report
    from cannbot_prefetch.report.run import plan_hardware
    from cannbot_prefetch.policy import Policy

    res, out = llama_run
    plan = load_plan(out / "prefetch_plan.yaml")
    assert sorted(s.id for s in plan.sites) == sorted(HAND)
    hw = plan_hardware(plan, None)
    assert hw.name == "910B3" and "the plan's hardware" in hw.detected_from
    design = (out / "prefetch_design.md").read_text()
    by_json = {c["site"]: c["saving_us"] for c in res.to_json()["candidates"]}
    base = load_profile(str(LLAMA / "profile"))
    rep = build_report(plan, "plan", base, None, hardware=hw, verify=None, policy=Policy.load())
    by_report = {s.site_id: s.step_saving_us for s in rep.expectation.sites}
    ab = build_report(plan, "plan", base, base, hardware=hw, verify=None, policy=Policy.load())
    by_ab = {s.site_id: s.step_saving_us for s in ab.expectation.sites}
    for site in plan.sites:
        inputs, want = HAND[site.id]
        ev = site.evidence
        assert (ev["mean_us"], ev["bytes_per_op"], ev["window"]["effective_us"], ev["window"]["bytes"],
                site.max_size) == inputs                                  # what the hand values used
        assert ev["instances_per_step"] == 16 and ev["useful_share"] == 1.0
        sg = site_gain(site, hw, POLICY)
        assert sg.source == "recomputed"
        assert (site.saving_us.low, site.saving_us.mid, site.saving_us.high) == want   # plan
        assert tuple(sg.gain.per_step.__dict__.values()) == want          # recomputed
        assert tuple(by_json[site.id].values()) == want                    # analyze JSON
        assert by_report[site.id] == want and by_ab[site.id] == want       # report, both modes
        line = re.search(rf"- {re.escape(site.id)}: ([\d.]+) / ([\d.]+) / ([\d.]+) µs per step", design)
        assert tuple(float(x) for x in line.groups()) == tuple(round(x, 1) for x in want)
    # 48.224 + 29.488 + 35.408, 74.144 + 74.032 + 122.224, 75.744 + 75.632 + 213.424
    assert rep.expectation.step_saving_us == pytest.approx((113.12, 270.4, 364.8), abs=1e-9)


def test_report_recomputes_for_another_part_and_says_so(llama_run):
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.report.run import plan_hardware

    _, out = llama_run
    plan = load_plan(out / "prefetch_plan.yaml")
    b4 = plan_hardware(plan, "910B4")
    assert "--hardware 910B4" in b4.detected_from and "made for 910B3" in b4.detected_from
    site = plan.sites[0]
    assert site_gain(site, b4, POLICY).gain != site_gain(site, plan_hardware(plan, None), POLICY).gain


def test_hardware_overrides_travel_with_the_plan(tmp_path):
    from cannbot_prefetch.plan import Basis, Insert, Join, Plan, Saving, Site, Target
    from cannbot_prefetch.report.run import plan_hardware

    ev = {"mean_us": 33.0, "bytes_per_op": 33558528, "t_compute_us": 0.1, "instances_per_step": 16,
          "window": {"effective_us": 12.0, "bytes": 4096}}
    site = Site("s", Target("m.py", "M", "gate_proj", "self.gate_proj.weight"),
                Insert("M", "forward", "self.norm", "before"), "x", Join("M", "forward"),
                8 * 2**20, Basis((8192, 2048), 2.0, 0.5), {}, "shape", ev, Saving(0, 0, 0), "0" * 64)
    plan = Plan((site,), created_from={"hardware": "910B3",
                                       "hardware_overrides": {"hbm_bw_tbps": 1.2, "cmo_bw_gbps": 300.0}})
    hw = plan_hardware(plan, None)
    assert hw.hbm_bw_tbps == 1.2 and hw.cmo_bw_gbps == 300.0 and "overrides" in hw.detected_from
    # by hand (gain.py's model, policy L2/HBM ratios 3.4 / 4.2 / 5.0): HBM 1.2e12, CMO 300e9
    # -> rates 300 / 750 / 1200 GB/s. idle = 12 - 4096 / 1.2e12 s = 11.996587 µs; hidden =
    # min(8388608, idle x rate) = 3598976 (3.6e6 - 1024) / 8388608 / 8388608 B. The op: 33558528 B
    # in 33 µs, e = 1.0169251e12 / 1.2e12 = 0.847438. Per op hidden / 1.0169251e12 x (1 - e/r):
    # 3.539077 x 0.750754 = 2.657; 8.248993 x 0.798229 = 6.585; 8.248993 x 0.830512 = 6.851 µs
    # (ceiling 33 - 0.1 does not bind); x 16 per step: 42.512 / 105.36 / 109.616.
    got = site_gain(plan.sites[0], hw, POLICY).gain
    assert (got.per_op.low, got.per_op.mid, got.per_op.high) == (2.657, 6.585, 6.851)
    assert (got.per_step.low, got.per_step.mid, got.per_step.high) == pytest.approx(
        (42.512, 105.36, 109.616), abs=1e-9)
    assert site_gain(plan.sites[0], hw, POLICY).gain != site_gain(plan.sites[0], hardware.load("910B3"), POLICY).gain


def test_json_shows_the_bounds_with_the_low_at_the_cmo_rate(llama_run):
    # issue 30 part 4: every gain low / mid / high, the low at one CMO stream (285 GB/s,
    # configs/hardware/910B3.yaml), the high at HBM (1.6 TB/s)
    res, _ = llama_run
    doc = res.to_json()
    for c in doc["candidates"]:
        gb = c["gain_bounds"]
        assert gb["rate_gbps"] == {"low": 285.0, "mid": 942.5, "high": 1600.0}
        ev = next(s for s in res.design.sites if s.site.id == c["site"]).site.evidence
        # idle = window - its own ops' bytes at HBM; hidden = min(max_size, idle x rate)
        idle = ev["window"]["effective_us"] - ev["window"]["bytes"] / 1.6e12 * 1e6
        assert gb["idle_us"] == pytest.approx(max(idle, 0.0), abs=1e-3)
        for k, rate in (("low", 285e9), ("mid", 942.5e9), ("high", 1.6e12)):
            assert gb["hidden_bytes"][k] == pytest.approx(min(c["max_size"], idle * 1e-6 * rate), abs=1)
        assert c["saving_us"]["low"] <= c["saving_us"]["mid"] <= c["saving_us"]["high"]
        if gb["hidden_bytes"]["low"] < gb["hidden_bytes"]["high"]:
            assert c["saving_us"]["low"] < c["saving_us"]["high"]
