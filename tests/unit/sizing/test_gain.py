"""One expected gain for one plan and hardware: analyze JSON, plan, design and report agree
(issue 10 item 8), on the bundled GENERATED Llama-3.2-1B example profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.gain import expected, inputs_of, site_gain

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


def test_plan_design_json_and_report_give_one_number(llama_run):
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.report import build_report
    from cannbot_prefetch.report.run import plan_hardware
    from cannbot_prefetch.settings import policy

    res, out = llama_run
    plan = load_plan(out / "prefetch_plan.yaml")
    assert plan.sites
    hw = plan_hardware(plan, None)
    assert hw.name == "910B3" and "the plan's hardware" in hw.detected_from
    design = (out / "prefetch_design.md").read_text()
    by_json = {c["site"]: c["saving_us"] for c in res.to_json()["candidates"]}
    base = load_profile(str(LLAMA / "profile"))
    rep = build_report(plan, "plan", base, None, hardware=hw, verify=None, policy=policy())
    by_report = {s.site_id: s.step_saving_us for s in rep.expectation.sites}
    ab = build_report(plan, "plan", base, base, hardware=hw, verify=None, policy=policy())
    assert {s.site_id: s.step_saving_us for s in ab.expectation.sites} == by_report   # A/B too
    for site in plan.sites:
        sg = site_gain(site, hw)
        assert sg.source == "recomputed"
        want = (site.saving_us.low, site.saving_us.mid, site.saving_us.high)
        assert tuple(sg.gain.per_step.__dict__.values()) == want         # plan == recomputed
        assert tuple(by_json[site.id].values()) == want                    # analyze JSON
        assert by_report[site.id] == want                                  # report, baseline only
        line = re.search(rf"- {re.escape(site.id)}: ([\d.]+) / ([\d.]+) / ([\d.]+) µs per step", design)
        assert tuple(float(x) for x in line.groups()) == tuple(round(x, 1) for x in want)
    total = tuple(round(sum(getattr(s.saving_us, k) for s in plan.sites), 3) for k in ("low", "mid", "high"))
    assert rep.expectation.step_saving_us == total


def test_report_recomputes_for_another_part_and_says_so(llama_run):
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.report.run import plan_hardware

    _, out = llama_run
    plan = load_plan(out / "prefetch_plan.yaml")
    b4 = plan_hardware(plan, "910B4")
    assert "--hardware 910B4" in b4.detected_from and "made for 910B3" in b4.detected_from
    site = plan.sites[0]
    assert site_gain(site, b4).gain != site_gain(site, plan_hardware(plan, None)).gain


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
    g = inputs_of(plan.sites[0])
    assert site_gain(plan.sites[0], hw).gain == expected(plan.sites[0].max_size, g, hw)
    assert site_gain(plan.sites[0], hw).gain != site_gain(plan.sites[0], hardware.load("910B3")).gain


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
