"""The real corpus end to end, planned by the tool itself (manual mode, every linear of a layer):
families that issue 14 found refused, "never run", unevaluable or silently missed. Each is
planned, applied, loaded as a tiny random model: logits bit-identical with the switch off, each
planned weight reaching the recording torch_npu stub with it on (benchmarks/corpus_sweep.py runs
the same check over every installed family)."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cannbot_prefetch import api  # noqa: E402
from cannbot_prefetch.plan import load_plan  # noqa: E402
from cannbot_prefetch.verify.stub import stub_torch_npu  # noqa: E402

from .corpus import MODELS, copy_model, loaded  # noqa: E402

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2)


CASES = {
    # target inside `return` (the one-line MLP)
    "glm": ("GlmConfig", "GlmForCausalLM", dict(TINY, head_dim=16, pad_token_id=0),
            ["GlmMLP.gate_up_proj", "GlmMLP.down_proj", "GlmAttention.q_proj", "GlmAttention.o_proj"]),
    # self.model.decoder(...) chain
    "opt": ("OPTConfig", "OPTForCausalLM", dict(vocab_size=128, hidden_size=64, ffn_dim=128,
                                                num_hidden_layers=2, num_attention_heads=4,
                                                word_embed_proj_dim=64),
            ["OPTAttention.q_proj", "OPTAttention.out_proj", "OPTDecoderLayer.fc1",
             "OPTDecoderLayer.fc2"]),
    # dense and MoE layers, the router a 2-D Parameter, fused 3-D experts
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(TINY, head_dim=16, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, decoder_sparse_step=2),
                  ["Qwen3MoeMLP.down_proj", "Qwen3MoeTopKRouter.weight",
                   "Qwen3MoeExperts.gate_up_proj", "Qwen3MoeExperts.down_proj",
                   "Qwen3MoeAttention.o_proj"]),
    # config aliases (n_embd) and the multi-query branch chosen by __init__ values
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM",
                    dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, multi_query=True),
                    ["GPTBigCodeAttention.c_attn", "GPTBigCodeAttention.c_proj",
                     "GPTBigCodeMLP.c_fc", "GPTBigCodeMLP.c_proj"]),
    # was applied, but with the switch on no prefetch of out_proj happened
    "xglm": ("XGLMConfig", "XGLMForCausalLM", dict(vocab_size=128, d_model=64, ffn_dim=128,
                                                   num_layers=2, attention_heads=4),
             ["XGLMAttention.out_proj", "XGLMAttention.q_proj", "XGLMDecoderLayer.fc1"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("family", list(CASES))
def test_planned_applied_identical_off_fires_on(family, tmp_path):
    if not (MODELS / family / f"modeling_{family}.py").is_file():
        pytest.skip(f"transformers {transformers.__version__} has no {family}")
    cfg_name, cls_name, kw, targets = CASES[family]
    cfg = getattr(transformers, cfg_name)(**kw, attn_implementation="eager")
    src = copy_model(family, tmp_path)
    (tmp_path / "config.json").write_text(cfg.to_json_string(use_diff=False))
    res = api.analyze(None, model_src=str(src), model_config=str(tmp_path / "config.json"),
                      targets=tuple(targets), out=str(tmp_path / "out"))
    res.save()
    assert res.to_json()["rejections"] == []
    plan = load_plan(tmp_path / "out" / "prefetch_plan.yaml")
    assert len(plan.sites) == len(targets)
    changes = api.apply(tmp_path / "out" / "prefetch_plan.yaml", root=tmp_path)
    changes.write()
    assert changes.refused == [] and len(changes.applied) == len(targets)

    original = __import__(f"transformers.models.{family}.modeling_{family}", fromlist=["x"])
    torch.manual_seed(0)
    base = getattr(original, cls_name)(cfg).eval()
    ids = torch.randint(3, 120, (1, 4))
    with torch.no_grad():
        ref = base(input_ids=ids, use_cache=False).logits
    with loaded(family, src, tmp_path / "_cannbot_prefetch.py") as mod:
        model = getattr(mod, cls_name)(cfg).eval()
        model.load_state_dict(base.state_dict())
        helper = sys.modules[f"transformers.models.{family}._cannbot_prefetch"]
        with torch.no_grad():
            off = model(input_ids=ids, use_cache=False).logits
            assert torch.equal(ref, off)
            for m in model.modules():
                if "enable_prefetch" in vars(m):
                    object.__setattr__(m, "enable_prefetch", True)
            helper.ENABLED = True
            with stub_torch_npu() as rec:
                on = model(input_ids=ids, use_cache=False).logits
            helper.ENABLED = False
        assert torch.equal(off, on)
        seen = {id(c.weight) for c in rec.calls}
        for s in plan.sites:
            owner, attr = s.target.cls, s.target.attr
            weights = [getattr(getattr(m, attr), "weight", getattr(m, attr)) for m in model.modules()
                       if type(m).__name__ == owner and getattr(m, attr, None) is not None]
            assert weights and any(id(w) in seen for w in weights), f"{s.id} never fired"
