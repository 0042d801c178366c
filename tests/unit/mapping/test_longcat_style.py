"""Seed 003's LongCat-Flash sites (its "LongCat-Flash 实际使用模式" table) in manual mode, on a
fixture written here with the same structures (tests/fixtures/longcat_style): planned with the
seed's target and dependency window, applied, and run on CPU with the switch off and on."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import types
from pathlib import Path

import pytest

from cannbot_prefetch.errors import InputError
from cannbot_prefetch import api
from cannbot_prefetch.plan import load_plan

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "longcat_style"
CONFIG = {"vocab_size": 64, "hidden_size": 32, "ffn_hidden_size": 64, "expert_ffn_hidden_size": 16,
          "num_layers": 3, "num_attention_heads": 2, "n_routed_experts": 4, "zero_expert_num": 2,
          "moe_topk": 2, "q_lora_rank": 16, "kv_lora_rank": 8, "qk_rope_head_dim": 4,
          "qk_nope_head_dim": 8, "v_head_dim": 8, "dtype": "bfloat16"}


# (seed 003 row, --target, --window): the seed's target and its dependency window
SEED = [
    ("router.classifier <- o_proj output", "DecoderLayer.mlp.router.classifier", "Attention.o_proj"),
    ("gate_up_proj <- o_proj output", "MLP.gate_up_proj", "Attention.o_proj"),
    ("down_proj <- gate_up_proj input x", "MLP.down_proj", "x"),
    ("q_a_proj (next layer) <- down_proj output", "Attention.q_a_proj", "MLP.down_proj"),
    ("q_b_proj (next layer) <- down_proj output", "Attention.q_b_proj", "MLP.down_proj"),
    ("kv_a_proj (next layer) <- down_proj output", "Attention.kv_a_proj_with_mqa", "MLP.down_proj"),
    ("experts.w2_weight <- router_logits", "FFN.experts.w2_weight", "TopkRouter.classifier"),
    ("router.classifier (next layer) <- gmm2_out", "FFN.router.classifier", "FusedMoEGMM.w2_weight"),
    ("experts.w13_weight (next layer) <- gmm2_out", "FFN.experts.w13_weight", "FusedMoEGMM.w2_weight"),
]


@pytest.fixture
def project(tmp_path):
    pkg = tmp_path / "lcstyle"
    shutil.copytree(FIXTURE, pkg, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    return tmp_path


def _plan(project, targets, windows):
    res = api.analyze(None, model_src=str(project / "lcstyle"),
                      model_config=str(project / "config.json"), targets=tuple(targets),
                      window=tuple(windows), out=str(project / "out"))
    res.save()
    return res.to_json(), load_plan(project / "out" / "prefetch_plan.yaml")


def test_seed_sites_are_placed_where_the_seed_puts_them(project):
    doc, plan = _plan(project, [t for _, t, _ in SEED], [w for _, _, w in SEED])
    assert doc["rejections"] == []
    by = {s.id: s for s in plan.sites}
    assert len(plan.sites) == len(SEED)
    # router and gate_up: right after the first attention's output (its tuple unpacked), before
    # the post-attention norm; the dependency is the seed's, o_proj's output: the attention
    # computes the output it returns first from it (`attn_output = o_proj * 1.0`), so it flows
    # into both targets through the returned tuple (legality/tuples.py)
    for sid, weight in (("topkrouter-classifier", "self.mlp.router.classifier.weight"),
                        ("mlp-gate_up_proj", "self.mlps[0].gate_up_proj.weight")):
        s = by[sid]
        assert (s.insert.cls, s.insert.method, s.insert.anchor_call, s.insert.position) == \
            ("DecoderLayer", "forward", "self.post_attention_layernorm[0]", "before")
        assert (s.target.weight_expr, s.dependency) == (weight, "o_proj")
    # down_proj on the MLP input x, before the method bound in __init__ that runs gate_up
    s = by["mlp-down_proj"]
    assert (s.insert.cls, s.insert.method, s.insert.anchor_call, s.dependency) == \
        ("MLP", "_forward_impl", "self.mlp_forward", "x")
    # the next layer's attention after this layer's last MLP
    for attr in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa"):
        s = by[f"attention-{attr}"]
        assert s.target.scope == "next_layer"
        assert s.target.weight_expr == f"self.next_layer.self_attn[0].{attr}.weight"
        assert (s.insert.cls, s.insert.anchor_call, s.insert.position) == \
            ("DecoderLayer", "self.mlps[1]", "after")
    # the FFN side (ffn.py): experts and router inherited from modeling.MoE
    s = by["ffn-experts-w2_weight"]
    assert (s.target.cls, s.target.attr, s.target.weight_expr) == \
        ("FFN", "experts.w2_weight", "self.experts.w2_weight")
    assert (s.insert.cls, s.insert.anchor_call, s.insert.position, s.dependency) == \
        ("FFN", "self.router", "after", "topk_ids")
    assert s.target.file.endswith("ffn.py")
    for sid, weight in (("ffn-router-classifier", "self.next_layer.router.classifier.weight"),
                        ("ffn-experts-w13_weight", "self.next_layer.experts.w13_weight")):
        s = by[sid]
        assert (s.target.weight_expr, s.target.scope) == (weight, "next_layer")
        assert (s.insert.cls, s.insert.anchor_call, s.insert.position) == \
            ("FFN", "self.dispatch_combine", "after")
    # sizes: the fp32 router (params_dtype) at 4 B, the fused experts at the config's bf16
    assert by["topkrouter-classifier"].basis.dtype_bytes == 4
    assert by["topkrouter-classifier"].max_size == 6 * 32 * 4 // 2
    assert by["ffn-experts-w13_weight"].basis.dims == (4, 32, 32)
    assert by["ffn-experts-w13_weight"].max_size == 4 * 32 * 32 * 2 // 2


def _load(project):
    name = f"lcstyle_{id(project)}"
    sys.path.insert(0, str(project))
    try:
        shutil.move(str(project / "lcstyle"), str(project / name))
        return (importlib.import_module(f"{name}.modeling"), importlib.import_module(f"{name}.ffn"),
                importlib.import_module(f"{name}._cannbot_prefetch"))
    finally:
        sys.path.remove(str(project))


@pytest.mark.slow
def test_seed_sites_applied_run_and_fire(project):
    torch = pytest.importorskip("torch")
    from cannbot_prefetch.verify.stub import stub_torch_npu

    _, plan = _plan(project, [t for _, t, _ in SEED], [w for _, _, w in SEED])
    changes = api.apply(project / "out" / "prefetch_plan.yaml", root=project)
    changes.write()
    assert changes.refused == [] and sorted(changes.applied) == sorted(s.id for s in plan.sites)
    modeling, ffn, helper = _load(project)
    cfg = types.SimpleNamespace(**CONFIG)
    torch.manual_seed(0)
    lm = modeling.ForCausalLM(cfg).eval()
    ffn_model = ffn.FFNForCausalLM(cfg).eval()
    for m in (*lm.modules(), *ffn_model.modules()):     # weights made by create_weights
        for p in m.parameters(recurse=False):
            torch.nn.init.normal_(p, std=0.2)
    ids = torch.randint(0, 64, (2, 1))
    h = torch.randn(2, 32)
    with torch.no_grad():
        off = (lm(ids), ffn_model(h))
        for m in (*lm.modules(), *ffn_model.modules()):
            if "enable_prefetch" in vars(m):
                object.__setattr__(m, "enable_prefetch", True)
        helper.ENABLED = True
        with stub_torch_npu() as rec:
            on = (lm(ids), ffn_model(h))
    assert all(torch.equal(a, b) for a, b in zip(off, on))
    seen = [id(c.weight) for c in rec.calls]
    layers = list(lm.model.layers)
    flayers = list(ffn_model.model.layers)
    # the next layer's weights are prefetched by every layer but the last
    for attr in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa"):
        got = [seen.count(id(getattr(L.self_attn[0], attr).weight)) for L in layers]
        assert got == [0, 1, 1], attr
    assert [seen.count(id(L.mlp.router.classifier.weight)) for L in flayers] == [0, 1, 1]
    assert [seen.count(id(L.mlp.experts.w13_weight)) for L in flayers] == [0, 1, 1]
    # the same layer's weights, every layer
    assert all(seen.count(id(L.mlp.router.classifier.weight)) == 1 for L in layers)
    assert all(seen.count(id(L.mlps[0].gate_up_proj.weight)) == 1 for L in layers)
    assert all(seen.count(id(L.mlps[k].down_proj.weight)) == 1 for L in layers for k in (0, 1))
    assert all(seen.count(id(L.mlp.experts.w2_weight)) == 1 for L in flayers)


def test_window_once_or_once_per_target(project):
    with pytest.raises(InputError, match="--window is given 2 times for 3 --target"):
        _plan(project, ["MLP.down_proj", "MLP.gate_up_proj", "Attention.o_proj"], ["x", "x"])
    _, plan = _plan(project, ["MLP.down_proj", "MLP.gate_up_proj"], ["x"])
    assert {s.dependency for s in plan.sites} == {"x"}


def test_seed_dependencies_named_as_values(project):
    """The seed's dependencies as the experts write them: the values `down_proj` (an element of
    the MLP's returned tuple) and `gmm2_out` (computed after the target in the same layer: the
    next layer's weight, cross-layer), planned with exactly that dependency."""
    rows = [("Attention.q_a_proj", "down_proj"), ("FFN.router.classifier", "gmm2_out"),
            ("FFN.experts.w13_weight", "gmm2_out"), ("MoE.router.classifier", "o_proj")]
    doc, plan = _plan(project, [t for t, _ in rows], [w for _, w in rows])
    assert doc["rejections"] == []
    got = {(s.target.weight_expr, s.dependency, s.target.scope) for s in plan.sites}
    assert got == {("self.next_layer.self_attn[0].q_a_proj.weight", "down_proj", "next_layer"),
                   ("self.next_layer.router.classifier.weight", "gmm2_out", "next_layer"),
                   ("self.next_layer.experts.w13_weight", "gmm2_out", "next_layer"),
                   ("self.mlp.router.classifier.weight", "o_proj", "same")}


def test_targets_named_by_index(project):
    """`self_attn[1]` and `mlps[1]`: the element the user names, each its own site (the seed's
    L1431-1435 prefetch the second attention's q_a / q_b at the first MLP's `dsq`, right after
    that MLP; named twice without an index, one gate_up site used to be dropped)."""
    rows = [("DecoderLayer.mlps[0].gate_up_proj", "o_proj"),
            ("DecoderLayer.mlps[1].gate_up_proj", "post_attention_layernorm"),
            ("DecoderLayer.self_attn[1].q_a_proj", "dsq"),
            ("DecoderLayer.self_attn[1].q_b_proj", "dsq")]
    doc, plan = _plan(project, [t for t, _ in rows], [w for _, w in rows])
    assert doc["rejections"] == []
    got = {(s.target.weight_expr, s.dependency, s.insert.anchor_call, s.insert.position)
           for s in plan.sites}
    assert got == {
        ("self.mlps[0].gate_up_proj.weight", "o_proj", "self.post_attention_layernorm[0]", "before"),
        ("self.mlps[1].gate_up_proj.weight", "hidden_states", "self.post_attention_layernorm[1]",
         "before"),
        ("self.self_attn[1].q_a_proj.weight", "dsq", "self.mlps[0]", "after"),
        ("self.self_attn[1].q_b_proj.weight", "dsq", "self.mlps[0]", "after")}
