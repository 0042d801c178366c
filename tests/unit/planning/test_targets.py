"""Issue 10 item 1: where counters exist the measured verdict decides the targets; latency- and
compute-bound ops are listed with their reason code, never planned; the design says which verdict
made the choice. Profiles are GENERATED (examples/synth: counters follow each op's roofline), the
model source is the REAL transformers file copied at test time."""

from __future__ import annotations

import pytest

from cannbot_prefetch import hardware, reasons
from cannbot_prefetch.plan.build import PlanOptions, build_plan
from cannbot_prefetch.plan.design import render_design
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.roofline.classify import classify

# Llama-3.2-3B's public config.json sizes (hf.co/meta-llama/Llama-3.2-3B), 3 layers generated.
LLAMA_3B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 3072,
            "intermediate_size": 8192, "num_attention_heads": 24, "num_key_value_heads": 8,
            "head_dim": 128, "num_hidden_layers": 3, "vocab_size": 128256,
            "tie_word_embeddings": True, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5,
            "max_position_embeddings": 131072, "rope_theta": 500000.0}
KV = "1,3072;1024,3072"          # k_proj / v_proj: 6 MiB weights


@pytest.fixture(scope="module")
def llama3b(tmp_path_factory):
    from synth.writer import generate
    out = generate(LLAMA_3B, tmp_path_factory.mktemp("p3b"), layers=3, steps=2, stacks="outer")
    return load_profile(out)


@pytest.fixture
def src(tmp_path, copy_src):
    return copy_src("llama", tmp_path / "model")


def test_latency_bound_by_counters_is_listed_not_planned(llama3b, src):
    hw = hardware.load("910B3")
    roof = classify(llama3b.table, hw)
    kv = next(s for s in roof.signatures if s.input_shapes == KV)
    # the generated counters put k/v just under the policy's 0.8 (issue 10: mte2 0.76-0.79):
    # within its 0.05 margin, so borderline (issue 31: cliffs become margins)
    assert kv.verdict == "memory-bound" and kv.measured_verdict == "borderline"
    plan, design, rej = build_plan(roof, llama3b.info, hw, src, dict(LLAMA_3B),
                                   PlanOptions(max_sites=10))
    assert plan.sites
    assert not [s for s in plan.sites if s.evidence["signature"]["input_shapes"] == KV]
    listed = [r for r in rej if r.signature == f"MatMulV3 {KV}"]
    assert [r.reason_code for r in listed] == [reasons.BORDERLINE]
    assert "counters say borderline" in listed[0].reason and "within 0.05 of 0.8" in listed[0].reason
    assert "the measured verdict decides" in listed[0].reason
    for s in plan.sites:                      # every planned target: memory-bound by counters
        assert s.evidence["measured_verdict"] == "memory-bound"
        assert s.evidence["verdict_by"] == "counters"
    assert "**borderline**" in render_design(design)


def test_memory_bound_only_by_counters_says_so(llama3b, src):
    """A roofline that does not say memory-bound (an 8 TB/s HBM puts every MatMul's roofline
    time under 30 % of the measured one: latency-bound; AI ~1 stays under ridge 36.9 / 2) must not
    be written as 'AI < ridge': the design names the counters as what decided, and what the
    roofline said."""
    hw = hardware.load("910B3").with_overrides(hbm_bw_tbps=8.0)
    roof = classify(llama3b.table, hw)
    plan, design, _ = build_plan(roof, llama3b.info, hw, src, dict(LLAMA_3B),
                                 PlanOptions(max_sites=10))
    assert plan.sites
    for s in plan.sites:
        assert (s.evidence["verdict"], s.evidence["measured_verdict"]) == \
            ("latency-bound", "memory-bound")
        assert s.evidence["verdict_by"] == "counters"
    targets = render_design(design).split("## 1.")[1].split("## 2.")[0]
    assert "by its counters (mte2" in targets and "roofline: latency-bound (roofline time" in targets
    # the counters' evidence names the intensity it agrees with (issue 31); the roofline's own
    # verdict is never written as memory-bound
    assert "; AI 0.999 < ridge 36.9)" in targets and "roofline: memory-bound" not in targets


def test_compute_bound_roofline_with_memory_bound_counters(llama3b):
    """Issue 10 item 11's case: AI above the ridge, counters memory-bound -> the counters decide
    and the roofline's reason says '>=' (a 0.5 TFLOPS peak puts the ridge at 0.31, under AI 1).
    That peak makes the measured time faster than the compute roof (100 us vs ~40): the shapes'
    intensity is flagged and is no evidence (issue 31), so it cannot overrule the counters."""
    from cannbot_prefetch.roofline.verdict import verdict_for
    from cannbot_prefetch.policy import Policy
    roof = classify(llama3b.table, hardware.load("910B3").with_overrides(peaks={"bf16": 0.5}))
    gate = next(s for s in roof.signatures if s.input_shapes == "1,3072;8192,3072")
    d = verdict_for(gate, Policy.load()["verdict"])
    assert "inconsistent_shapes" in gate.flags
    assert (d.verdict, d.by, d.roofline) == ("memory-bound", "counters", "compute-bound")
    assert d.why.startswith("mte2 ") and ">= ridge" in d.roofline_why


def test_without_counters_the_roofline_decides(llama3b, src):
    hw = hardware.load("910B3")
    df = llama3b.table.df.drop([c for c in llama3b.table.df.columns if c.startswith(("aic_", "aiv_"))])
    from cannbot_prefetch.profiling.table import KernelTable
    roof = classify(KernelTable(df), hw)
    assert all(s.measured_verdict is None for s in roof.signatures)
    plan, design, _ = build_plan(roof, llama3b.info, hw, src, dict(LLAMA_3B), PlanOptions())
    assert plan.sites and plan.sites[0].evidence["verdict_by"] == "roofline"
    targets = render_design(design).split("## 1.")[1].split("## 2.")[0]
    assert "by the roofline (AI" in targets and "no counters" in targets


def test_analyze_without_model_src_lists_the_latency_bound(llama3b):
    from cannbot_prefetch import analyze
    doc = analyze(llama3b.info.path, hardware="910B3").to_json()
    assert f"MatMulV3 {KV}" not in [c["signature"] for c in doc["candidates"]]
    assert {"signature": f"MatMulV3 {KV}", "reason_code": reasons.BORDERLINE} .items() <= \
        next(r for r in doc["rejections"] if r["signature"] == f"MatMulV3 {KV}").items()
