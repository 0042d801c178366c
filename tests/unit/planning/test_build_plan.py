"""build_plan: windows -> mapping -> sizing -> Plan on the GENERATED examples and the REAL
transformers source; manual mode; bad input."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cannbot_prefetch import hardware, reasons
from cannbot_prefetch.plan.design import render_design
from cannbot_prefetch.errors import InputError, SourceError
from cannbot_prefetch.plan import load_plan, plan_to_dict, save_plan
from cannbot_prefetch.plan.build import PlanOptions, build_plan
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.roofline.classify import classify

MIB = 2**20


@pytest.fixture(scope="module")
def llama_roof(examples_dir):
    prof = load_profile(examples_dir / "llama3.2-1b-en" / "profile")
    hw = hardware.resolve(None, prof.info)
    return classify(prof.table, hw), prof.info, hw


@pytest.fixture
def llama_src(tmp_path, copy_src, examples_dir):
    src = copy_src("llama", tmp_path / "model")
    cfg = examples_dir / "llama3.2-1b-en" / "config.json"
    return src, cfg


def test_llama_example_one_site_by_default(llama_roof, llama_src, tmp_path):
    roof, info, hw = llama_roof
    src, cfg = llama_src
    out = tmp_path / "out"
    plan, design, rej = build_plan(roof, info, hw, src, cfg, PlanOptions(out_dir=str(out)))
    assert len(plan.sites) == 1                      # the seed's minimal-change rule
    site = plan.sites[0]
    listed = [v for v in design.sites if not v.planned]
    # ranked by the one expected gain (gain.py), whatever the placement
    assert all(site.saving_us.mid >= v.site.saving_us.mid for v in listed)
    assert site.max_size > 0 and isinstance(site.max_size, int)
    assert site.basis.bound_by in {c.name for c in site.basis.caps} | {"coefficient"}
    assert site.evidence["window"]["branch"] in ("3a", "3b")
    assert site.mapping == "stack" and site.max_tokens is None
    # the decode guard reads the tokens per sequence of the dependency, [batch, seq, hidden]
    assert (site.guard.expr, site.guard.dim, site.guard.max_len) == ("hidden_states", 1, 64)
    assert site.target.file == "../model/modeling_llama.py"
    assert {r.reason_code for r in rej} >= {reasons.MAX_SITES, reasons.NO_SAFE_WINDOW}
    # the plan round-trips through YAML and validates
    save_plan(plan, out / "prefetch_plan.yaml")
    assert load_plan(out / "prefetch_plan.yaml") == plan


def test_more_sites_share_l2_and_rank_by_saving(llama_roof, llama_src):
    roof, info, hw = llama_roof
    src, cfg = llama_src
    plan, design, rej = build_plan(roof, info, hw, src, cfg, PlanOptions(max_sites=3))
    assert len(plan.sites) == 3
    mids = [s.saving_us.mid for s in plan.sites]
    assert mids == sorted(mids, reverse=True)
    # every site ranked out expects less than the last planned one, and its reason says both
    for r in rej:
        if r.reason_code == reasons.MAX_SITES:
            listed = next(v for v in design.sites if not v.planned
                          and f"{v.site.target.cls}.{v.site.target.attr}" == r.site)
            assert listed.site.saving_us.mid <= mids[-1]
            assert f"expected {listed.site.saving_us.mid:.1f} us/step" in r.reason
            assert f"expects {mids[-1]:.1f} us/step" in r.reason
    for s in plan.sites:
        l2 = next(c for c in s.basis.caps if c.name == "l2_budget")
        assert l2.bytes == int(hw.l2_bytes * 0.5 / 3)
    plan, _, _ = build_plan(roof, info, hw, src, cfg, PlanOptions(max_sites=6))
    gate = next(s for s in plan.sites if s.id == "llamamlp-gate_proj")
    assert (gate.insert.cls, gate.insert.anchor_call, gate.dependency, gate.target.weight_expr) \
        == ("LlamaDecoderLayer", "self.self_attn", "hidden_states",     # o_proj's output (3a)
            "self.mlp.gate_proj.weight")
    # CMO cap by hand: 285 GB/s x the window's usable time
    w = gate.evidence["window"]["time_us"]
    cmo = next(c for c in gate.basis.caps if c.name == "cmo_rate_x_window")
    assert cmo.bytes == int(285e9 * w * 1e-6)


def test_design_document_en_and_zh(llama_roof, llama_src):
    roof, info, hw = llama_roof
    src, cfg = llama_src
    plan, design, _ = build_plan(roof, info, hw, src, cfg, PlanOptions(max_sites=2))
    en = render_design(design)
    for part in ("## 1. Targets and why", "## 2. Roofline conclusions",
                 "## 3. Dependency windows and why", "## 4. Files to change and the switch",
                 "## 5. Sizes and their basis", "## 8. Risks",
                 "cannbot prefetch apply prefetch_plan.yaml", "enable_prefetch", "bound by"):
        assert part in en, part
    zh = render_design(replace(design, lang="zh"))
    for term in ("访存密集", "依赖窗口", "保守系数", "方案确认", "cannbot prefetch apply"):
        assert term in zh, term
    assert "## 1. Targets" not in zh


def test_3c_rejection_reaches_the_plan(tmp_path, llama_src, examples_dir):
    from synth.writer import generate
    out = generate(examples_dir / "llama3.2-1b-en" / "config.json", tmp_path / "p", layers=2,
                   steps=2, comm=["LlamaMLP.gate_proj"], stacks="outer")
    prof = load_profile(out)
    hw = hardware.load("910B3")
    src, cfg = llama_src
    plan, design, rej = build_plan(classify(prof.table, hw), prof.info, hw, src, cfg,
                                   PlanOptions(max_sites=6))
    assert "llamamlp-gate_proj" not in {s.id for s in plan.sites}
    safe = [r for r in plan.rejections if r["reason_code"] == reasons.NO_SAFE_WINDOW]
    assert safe and "communication" in safe[0]["reason"]
    assert "no_safe_window" in render_design(design)


def test_prefill_is_listed_not_planned(tmp_path, llama_src, examples_dir):
    from synth.writer import generate
    out = generate(examples_dir / "llama3.2-1b-en" / "config.json", tmp_path / "p", layers=2,
                   steps=2, phase="prefill", seq_len=128, stacks="outer")
    prof = load_profile(out)
    hw = hardware.load("910B3")
    src, cfg = llama_src
    plan, _, rej = build_plan(classify(prof.table, hw), prof.info, hw, src, cfg, PlanOptions())
    assert plan.sites == ()
    prefill = [r for r in rej if r.target and r.target.m > 64]
    assert len(prefill) >= 4 and all(r.reason_code == reasons.PREFILL for r in prefill)


# ------------------------------------------------------------------------------ manual mode

def test_manual_mode_same_schema(llama_roof, llama_src, tmp_path):
    src, cfg = llama_src
    hw = hardware.load("910B3")
    plan, design, _ = build_plan(None, None, hw, src, cfg,
                                 PlanOptions(targets=("LlamaMLP.down_proj",)))
    (site,) = plan.sites
    assert site.mapping == "manual"
    # the nearest legal dependency for a down projection: the MLP's input
    assert (site.insert.cls, site.insert.anchor_call, site.insert.position, site.dependency) == \
        ("LlamaMLP", "self.down_proj", "before", "x")
    assert site.max_size == 2048 * 8192 * 2 // 2 and site.basis.bound_by == "coefficient"
    save_plan(plan, tmp_path / "p.yaml")
    assert load_plan(tmp_path / "p.yaml") == plan
    roof, info, _ = llama_roof
    auto, _, _ = build_plan(roof, info, hw, src, cfg, PlanOptions())
    a, m = plan_to_dict(auto), plan_to_dict(plan)
    assert a.keys() == m.keys()
    assert a["sites"][0].keys() == m["sites"][0].keys()
    assert "manual" in render_design(design).lower()


def test_manual_window_names_a_module(llama_src):
    src, cfg = llama_src
    plan, _, _ = build_plan(None, None, hardware.load("910B3"), src, cfg,
                            PlanOptions(targets=("LlamaMLP.gate_proj", "LlamaMLP.up_proj"),
                                        window="post_attention_layernorm"))
    assert [s.id for s in plan.sites] == ["llamamlp-gate_proj", "llamamlp-up_proj"]
    for s in plan.sites:
        assert (s.insert.cls, s.insert.anchor_call, s.dependency) == \
            ("LlamaDecoderLayer", "self.post_attention_layernorm", "hidden_states")


@pytest.mark.parametrize("part, vocab, l2", [("910B3", 128256, 192 * MIB), ("910B4", 128256, 96 * MIB)])
def test_manual_lm_head_shows_the_l2_cap(llama_src, part, vocab, l2):
    src, cfg = llama_src
    plan, _, _ = build_plan(None, None, hardware.load(part), src, cfg,
                            PlanOptions(targets=("LlamaForCausalLM.lm_head",)))
    (s,) = plan.sites
    assert s.basis.dims == (vocab, 2048) and vocab * 2048 * 2 > l2
    assert s.basis.bound_by == "l2_budget" and s.max_size == l2 // 2


def test_manual_qwen25_3b_sizes(copy_src, tmp_path, examples_dir):
    src = copy_src("qwen2", tmp_path / "q")
    cfg = examples_dir / "qwen2.5-3b-zh" / "config.json"
    plan, _, _ = build_plan(None, None, hardware.load("910B4"), src, cfg,
                            PlanOptions(targets=("Qwen2MLP.down_proj", "Qwen2ForCausalLM.lm_head"),
                                        max_sites=2, lang="zh"))
    by = {s.target.attr: s for s in plan.sites}
    assert by["down_proj"].max_size == 11008 * 2048 * 2 // 2           # I*H*b x 0.5
    assert by["lm_head"].basis.bound_by == "l2_budget"
    assert by["lm_head"].max_size == int(96 * MIB * 0.5 / 2)           # shared by 2 sites


def test_moe_gmm_sites_use_the_seed_formulas(copy_src, tmp_path, examples_dir):
    prof = load_profile(examples_dir / "qwen3-moe" / "profile")
    hw = hardware.load("910B3")
    src = copy_src("qwen3_moe", tmp_path / "m")
    plan, design, _ = build_plan(classify(prof.table, hw), prof.info, hw, src,
                                 examples_dir / "qwen3-moe" / "config.json",
                                 PlanOptions(max_sites=6, experts_per_rank=8, moe_tp=1))
    # the seed's formula sizes the GMM; with 8 experts on the rank (EP 16) the profiled GMM's 8
    # routed rows are 8 x 128 / (8 x 8) = 16 tokens, so each of the rank's experts is hit with
    # p = 1 - (1 - 8/128)^16 = 0.644 (issue 30: the hit share uses the experts on the rank, not
    # the source's 128, which gave one token and 6 %)
    gmm = {v.site.target.attr: v.site for v in design.sites if v.site.target.cls == "Qwen3MoeExperts"}
    assert "gate_up_proj" in gmm
    assert gmm["gate_up_proj"].evidence["useful_share"] == pytest.approx(1 - (1 - 8 / 128) ** 16,
                                                                       abs=1e-4)   # kept to 4 places
    note = next(n for n in gmm["gate_up_proj"].evidence["notes"] if n.startswith("MoE:"))
    assert "of this rank's 8 experts" in note
    w = next(c for c in gmm["gate_up_proj"].basis.caps if c.name == "weight").bytes
    assert w == 2048 * 768 * 2 * 2 // 1 * 8 // 2
    assert gmm["gate_up_proj"].target.weight_expr == "self.experts.gate_up_proj"   # no .weight
    # down_proj's only insertion (before self.experts) also overlaps the gate_up GroupedMatmul:
    # no safe window (issue 10 item 4); its seed formula, named by hand (manual mode):
    down = next(r for r in plan.rejections if r.get("site") == "Qwen3MoeExperts.down_proj")
    assert down["reason_code"] == reasons.NO_SAFE_WINDOW and "GroupedMatmul" in down["reason"]
    manual, _, _ = build_plan(None, None, hw, src, examples_dir / "qwen3-moe" / "config.json",
                              PlanOptions(targets=("Qwen3MoeExperts.down_proj",),
                                          experts_per_rank=8, moe_tp=1))
    w = next(c for c in manual.sites[0].basis.caps if c.name == "weight").bytes
    assert w == 2048 * 768 * 2 // 1 * 8


# ------------------------------------------------------------------------------ bad input

def test_missing_config_key(llama_roof, llama_src, tmp_path):
    roof, info, hw = llama_roof
    src, cfg = llama_src
    data = json.loads(cfg.read_text())
    del data["intermediate_size"]
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError, match="intermediate_size") as exc:
        build_plan(None, None, hw, src, bad, PlanOptions(targets=("LlamaMLP.gate_proj",)))
    assert str(bad) in str(exc.value)
    # auto mode: the MLP shapes cannot be evaluated; q/o still map, so the MLP is unmapped
    plan, _, rej = build_plan(roof, info, hw, src, bad, PlanOptions(max_sites=6))
    assert all(s.target.cls != "LlamaMLP" for s in plan.sites)


def test_unknown_target_and_unparsable_source(llama_src, tmp_path):
    src, cfg = llama_src
    hw = hardware.load("910B3")
    with pytest.raises(SourceError, match="gate_prog") as exc:
        build_plan(None, None, hw, src, cfg, PlanOptions(targets=("LlamaMLP.gate_prog",)))
    assert "modeling_llama.py" in str(exc.value)
    with pytest.raises(SourceError, match="NoSuchClass"):
        build_plan(None, None, hw, src, cfg, PlanOptions(targets=("NoSuchClass.x",)))
    broken = tmp_path / "broken.py"
    broken.write_text(src.read_text().replace("def forward(self, x):", "def forward(self, x:", 1))
    with pytest.raises(SourceError, match="does not parse") as exc:
        build_plan(None, None, hw, broken, cfg, PlanOptions(targets=("LlamaMLP.down_proj",)))
    assert str(broken) in str(exc.value)


def test_shapes_that_match_nothing(llama_roof, llama_src, tmp_path):
    """A config of another model size: no kernel weight shape matches the source."""
    roof, info, hw = llama_roof
    src, cfg = llama_src
    data = json.loads(cfg.read_text())
    data["hidden_size"] = 3072
    other = tmp_path / "config.json"
    other.write_text(json.dumps(data))
    with pytest.raises(InputError, match="matches a linear-like attribute") as exc:
        build_plan(roof, info, hw, src, other, PlanOptions())
    assert "modeling_llama.py" in str(exc.value)


def test_bad_options(llama_src):
    src, cfg = llama_src
    hw = hardware.load("910B3")
    for opts, msg in ((PlanOptions(targets=("X",)), "CLASS.ATTR"),
                      (PlanOptions(max_sites=0), "max-sites"),
                      (PlanOptions(mode="turbo"), "--mode"),
                      (PlanOptions(targets=("LlamaMLP.down_proj",), window="nonsense_var"),
                       "--window")):
        with pytest.raises(InputError, match=msg):
            build_plan(None, None, hw, src, cfg, opts)
    with pytest.raises(InputError, match="profile is needed"):
        build_plan(None, None, hw, src, cfg, PlanOptions())


def test_cross_layer_window_plans_the_next_layer(llama_roof, llama_src):
    """With an 8 us minimum the RmsNorm window is too short: q_proj's window becomes the previous
    layer's down_proj output (3a), planned as `self.next_layer...` after this layer's MLP."""
    from cannbot_prefetch.legality import Placement, dependency_problem
    roof, info, hw = llama_roof
    src, cfg = llama_src
    plan, design, _ = build_plan(roof, info, hw, src, cfg,
                                 PlanOptions(max_sites=6, min_window_us=8.0))
    q = next(s for s in plan.sites if s.id == "llamaattention-q_proj")
    assert q.target.scope == "next_layer"
    assert q.target.weight_expr == "self.next_layer.self_attn.q_proj.weight"
    assert (q.insert.cls, q.insert.anchor_call, q.insert.position, q.dependency) == \
        ("LlamaDecoderLayer", "self.mlp", "after", "hidden_states")
    assert q.evidence["window"]["branch"] == "3a" and q.evidence["window"]["time_us"] >= 8.0
    assert dependency_problem(src.read_text(), Placement.of_site(q), q.target) is None
    # gate_proj's window moves back to o_proj's output, seen from the decoder layer
    g = next(s for s in plan.sites if s.id == "llamamlp-gate_proj")
    assert (g.insert.anchor_call, g.insert.position, g.evidence["window"]["branch"]) == \
        ("self.self_attn", "after", "3a")


@pytest.mark.parametrize("window, expected", [
    ("hidden_states", ("LlamaDecoderLayer", "self.mlp", "before", "hidden_states")),
    ("LlamaAttention.o_proj", ("LlamaDecoderLayer", "self.self_attn", "after", "hidden_states")),
    ("self.post_attention_layernorm",
     ("LlamaDecoderLayer", "self.post_attention_layernorm", "before", "hidden_states")),
])
def test_manual_window_forms(llama_src, window, expected):
    src, cfg = llama_src
    plan, _, _ = build_plan(None, None, hardware.load("910B3"), src, cfg,
                            PlanOptions(targets=("LlamaMLP.gate_proj",), window=window))
    (s,) = plan.sites
    assert (s.insert.cls, s.insert.anchor_call, s.insert.position, s.dependency) == expected
    assert s.target.weight_expr == "self.mlp.gate_proj.weight"


def test_the_cmo_rate_is_a_risk_unless_given(llama_roof, llama_src):
    # issue 10 item 5: the default 285 GB/s (one public figure) is shown, never the bound
    roof, info, hw = llama_roof
    src, cfg = llama_src
    plan, design, _ = build_plan(roof, info, hw, src, cfg, PlanOptions(max_sites=6))
    for s in plan.sites:
        cmo = next(c for c in s.basis.caps if c.name == "cmo_rate_x_window")
        assert not cmo.binding and s.basis.bound_by != "cmo_rate_x_window"
        weight = next(c.bytes for c in s.basis.caps if c.name == "weight")
        head = next(c.bytes for c in s.basis.caps if c.name == "hbm_headroom")
        # half the weight, or all the window can carry: never the 1.5-2 MiB of the CMO figure
        assert s.max_size == min(weight // 2, head)
    text = render_design(design)
    assert "risk only" in text and "does not bind" in text
    given, _, _ = build_plan(roof, info, hw, src, cfg, PlanOptions(max_sites=6, cmo_bw_gbps=285))
    assert all(s.basis.bound_by == "cmo_rate_x_window" for s in given.sites)
    assert all(next(c for c in s.basis.caps if c.name == "cmo_rate_x_window").binding
               for s in given.sites)


def test_an_earlier_placement_that_overlaps_a_matmul_has_no_safe_window(llama_roof, llama_src):
    # up_proj / down_proj of the one-line HF MLP: the legal insertion goes before the whole line,
    # so the prefetch also overlaps gate_proj (and up_proj), memory-heavy: no safe window
    # (issue 10 items 3, 4), never a window costed as Silu / Mul alone
    roof, info, hw = llama_roof
    src, cfg = llama_src
    _, design, rej = build_plan(roof, info, hw, src, cfg, PlanOptions(max_sites=6))
    assert not [v for v in design.sites if v.site.target.attr in ("up_proj", "down_proj")]
    for attr in ("up_proj", "down_proj"):
        why = next(r for r in rej if r.site == f"LlamaMLP.{attr}")
        assert why.reason_code == reasons.NO_SAFE_WINDOW, why
        assert "in LlamaMLP.forward" in why.reason
        assert "also overlaps MatMulV3" in why.reason

def test_manual_mode_without_a_profile_says_unknown_and_lists_overlaps(llama_src):
    # issue 10 item 13: nothing measured -> "unknown (no profile)", never 0.0-0.0 us/step; the
    # hardware is named as the default; calls the insertion overlaps before the target are risks
    src, cfg = llama_src
    hw = hardware.resolve(None, None)
    assert hw.detected_from.startswith("default 910B3") and "names no part" not in hw.detected_from
    assert hardware.is_assumed(hw)
    plan, design, _ = build_plan(None, None, hw, src, cfg,
                                 PlanOptions(targets=("LlamaMLP.down_proj",)))
    (site,) = plan.sites
    assert site.saving_us is None and "saving_per_op_us" not in site.evidence
    text = render_design(design)
    assert "unknown (no profile)" in text and "0.0 / 0.0 / 0.0" not in text
    assert "default 910B3" in text
    # down_proj's nearest legal dependency is the MLP's input: the call precedes gate and up
    risk = next(n for n in site.evidence["notes"] if n.startswith("risk:"))
    assert "LlamaMLP.gate_proj" in risk and "LlamaMLP.up_proj" in risk and "unknown" in risk
    assert f"`{site.id}`: risk:" in text.split("## 8.")[1]


def test_manual_mode_window_right_before_the_target_lists_no_overlap(llama_src):
    src, cfg = llama_src
    plan, _, _ = build_plan(None, None, hardware.load("910B3"), src, cfg,
                            PlanOptions(targets=("LlamaMLP.gate_proj",),
                                        window="post_attention_layernorm"))
    assert not any(n.startswith("risk:") for n in plan.sites[0].evidence.get("notes", []))



# ------------------------------------------------------------------------------ MoE (item 6)

# experts_hit itself: tests/unit/sizing/test_moe_values.py (hand values and counting)


def test_a_gmm_at_batch_1_is_not_worth_it_and_says_why(copy_src, tmp_path, examples_dir):
    prof = load_profile(examples_dir / "qwen3-moe" / "profile")
    hw = hardware.load("910B3")
    src = copy_src("qwen3_moe", tmp_path / "m")
    _, design, rej = build_plan(classify(prof.table, hw), prof.info, hw, src,
                                examples_dir / "qwen3-moe" / "config.json", PlanOptions(max_sites=6))
    why = next(r for r in rej if r.site == "Qwen3MoeExperts.gate_up_proj")
    assert why.reason_code == reasons.NOT_WORTH_IT and "experts hit 6.2%" in why.reason
    site = next(v.site for v in design.sites if v.site.target.attr == "gate_up_proj"
                and v.site.target.cls == "Qwen3MoeExperts")
    # only the hit share of the prefetched bytes counts as saved, and the offset choice is stated
    assert site.evidence["useful_share"] == pytest.approx(0.0625)
    note = next(n for n in site.evidence["notes"] if n.startswith("MoE:"))
    assert "offset 0" in note and "8.0 of this rank's 128 experts" in note


def test_more_tokens_make_the_gmm_worth_it(examples_dir):
    """The example's GMM signature seen with 96 tokens per step: the hit share passes the floor."""
    from dataclasses import replace as dc_replace
    from types import SimpleNamespace

    from cannbot_prefetch.mapping.config import load_config
    from cannbot_prefetch.plan.size import experts_hit
    from cannbot_prefetch.policy import Policy
    from cannbot_prefetch.windows import TargetSig
    cfg, _ = load_config(examples_dir / "qwen3-moe" / "config.json")
    roof = classify(load_profile(examples_dir / "qwen3-moe" / "profile").table, hardware.load("910B3"))
    t = dc_replace(TargetSig.of(next(s for s in roof.signatures if s.family == "gmm")), m=96 * 8)
    gmm = SimpleNamespace(role="gmm1", target=SimpleNamespace(dims=(128, 1536, 2048)))
    hit = experts_hit(gmm, t, cfg)
    assert hit.share > 0.99 > float(Policy.load()["sizing"]["moe_min_hit_share"])


def test_manual_sizes_follow_tp(llama_src):
    # issue 10 item 12: manual mode sizes the shard, not the whole weight
    src, cfg = llama_src
    plan, _, _ = build_plan(None, None, hardware.load("910B3"), src, cfg,
                            PlanOptions(targets=("LlamaMLP.down_proj", "LlamaAttention.q_proj"), tp=2))
    by = {s.target.attr: s for s in plan.sites}
    assert by["down_proj"].basis.dims == (2048, 4096) and by["down_proj"].max_size == 2048 * 4096 * 2 // 2
    assert by["q_proj"].basis.dims == (1024, 2048)


def test_a_model_source_that_does_not_parse_is_said_by_build_plan(llama_src, tmp_path):
    src, cfg = llama_src
    broken = tmp_path / "broken.py"
    broken.write_text(src.read_text().replace("def forward(self, x):", "def forward(self, x:", 1))
    with pytest.raises(SourceError, match="does not parse"):
        build_plan(None, None, hardware.load("910B3"), str(broken), str(cfg),
                   PlanOptions(targets=("LlamaMLP.down_proj",)))
