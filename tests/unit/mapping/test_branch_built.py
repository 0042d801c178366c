"""A module built in one branch of an `if` in `__init__` (or in a helper method it calls) exists
only when the config takes that branch: vLLM 0.34's minicpm builds `self.mlp` as MiniCPMMLP
when `num_experts == 0` and MiniCPMMoE otherwise (in `_init_ffn_block`), deepseek_v2's MLA
attention builds `kv_a_proj_with_mqa` only when `q_lora_rank is None`; the tool wrote
`self.mlp.gate_up_proj.weight` into the decoder layer with num_experts 8 and the model raised
AttributeError with the switch on. Mapping now decides each branch test on the weight's path with
the config (mapping/built.py) and refuses a path built only under a test it cannot decide.

Fixtures: tests/fixtures/vllm_style/branch_built/ (GENERATED for these tests: serving_layer.py
in vLLM's style, modeling_tiny_mla.py in transformers' style). Which branch each config takes is
worked out by hand from the fixtures' `if` tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.errors import InputError, SourceError
from cannbot_prefetch.mapping.built import never_built, unbuilt, unguarded
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan.build import PlanOptions, build_plan

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_style" / "branch_built"
CFG = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
       "num_key_value_heads": 2, "num_hidden_layers": 2, "rms_norm_eps": 1e-6,
       "vocab_size": 1000, "torch_dtype": "bfloat16"}


def _serving(**extra):
    return load_model_source(FIX / "serving_layer.py", {**CFG, **extra}, "config.json", tp=1)


def _plan(file: str, target: str, **extra):
    plan, _, _ = build_plan(None, None, hardware.load("910B3"), FIX / file, {**CFG, **extra},
                            PlanOptions(targets=(target,), tp=1))
    return [(s.insert.cls, s.target.weight_expr) for s in plan.sites]


def test_helper_branch_dense_builds_the_mlp_only():
    # num_experts 0: `if self.num_experts == 0` is true, self.mlp is TinyMLP
    ms = _serving(num_experts=0)
    assert unbuilt(ms, "TinyDecoderLayer", "self.mlp.gate_up_proj.weight", "TinyMLP") is None
    why = unbuilt(ms, "TinyDecoderLayer", "self.mlp.gate.weight", "TinyMoE").why
    assert why == ("TinyDecoderLayer.mlp (TinyMoE) is not built under this config: it is built "
                   "only when `not (self.num_experts == 0)`, which the config makes false")


def test_helper_branch_moe_builds_the_moe_only():
    # num_experts 4: the else branch, self.mlp is TinyMoE
    ms = _serving(num_experts=4)
    assert unbuilt(ms, "TinyDecoderLayer", "self.mlp.gate.weight", "TinyMoE") is None
    why = unbuilt(ms, "TinyDecoderLayer", "self.mlp.gate_up_proj.weight", "TinyMLP").why
    assert why == ("TinyDecoderLayer.mlp (TinyMLP) is not built under this config: it is built "
                   "only when `self.num_experts == 0`, which the config makes false")
    # inside the MLP's own forward the path does not cross the branch: nothing to refuse there
    assert unbuilt(ms, "TinyMLP", "self.gate_up_proj.weight", "TinyMLP") is None


def test_missing_key_takes_the_getattr_default():
    # no num_experts key: getattr(self.config, "num_experts", 0) is 0, the dense branch
    ms = _serving()
    assert unbuilt(ms, "TinyDecoderLayer", "self.mlp.gate_up_proj.weight", "TinyMLP") is None
    assert unbuilt(ms, "TinyDecoderLayer", "self.mlp.gate.weight", "TinyMoE") is not None


def test_undecidable_test_is_named():
    # `kv_cache_dtype == "fp8"`: the dtype comes from the engine's cache config, no config key
    why = unbuilt(_serving(num_experts=0), "TinyDecoderLayer",
                  "self.self_attn.k_scale_proj.weight", "TinyAttention").why
    assert why is not None
    assert why.startswith("TinyAttention.k_scale_proj is built only when "
                          "`kv_cache_dtype == \"fp8\"`, which the config does not decide")
    # an unconditional sibling of the same class is built
    assert unbuilt(_serving(num_experts=0), "TinyDecoderLayer",
                   "self.self_attn.qkv_proj.weight", "TinyAttention") is None


def test_plan_never_reaches_through_an_unbuilt_module():
    # dense: planned in the decoder layer through self.mlp
    assert _plan("serving_layer.py", "TinyMLP.gate_up_proj", num_experts=0) == \
        [("TinyDecoderLayer", "self.mlp.gate_up_proj.weight")]
    # MoE: self.mlp is TinyMoE; the decoder-layer placement is refused, and so is one in
    # TinyMLP's own forward (the model never builds TinyMLP: such a line would never run)
    with pytest.raises((InputError, SourceError)) as exc:
        _plan("serving_layer.py", "TinyMLP.gate_up_proj", num_experts=4)
    assert "--target TinyMLP.gate_up_proj" in str(exc.value)
    assert "which the config makes false" in str(exc.value)
    assert _plan("serving_layer.py", "TinyMoE.gate", num_experts=4) == \
        [("TinyDecoderLayer", "self.mlp.gate.weight")]


@pytest.mark.parametrize("experts, built, unbuilt_cls", [(0, "TinyMLP", "TinyMoE"),
                                                         (4, "TinyMoE", "TinyMLP")])
def test_a_class_only_an_unbuilt_branch_builds_is_never_built(experts, built, unbuilt_cls):
    ms = _serving(num_experts=experts)
    assert never_built(ms, built) is None
    assert never_built(ms, "TinyAttention") is None      # built unconditionally
    test = "self.num_experts == 0"
    assert never_built(ms, unbuilt_cls) == (
        f"the model never builds {unbuilt_cls} under this config (TinyDecoderLayer.mlp "
        f"({unbuilt_cls}) is not built under this config: it is built only when "
        f"`{test if experts else f'not ({test})'}`, which the config makes false)")


def test_an_undecidable_branch_is_planned_only_behind_the_presence_check(tmp_path):
    """`k_scale_proj` exists only when `kv_cache_dtype == "fp8"`: the plan reaches it through
    the next layer, and the rewritten line runs only when the module is present."""
    import json
    import shutil

    from cannbot_prefetch import api
    shutil.copy(FIX / "serving_layer.py", tmp_path / "serving_layer.py")
    (tmp_path / "config.json").write_text(json.dumps({**CFG, "num_experts": 0}))
    res = api.analyze(None, model_src=str(tmp_path / "serving_layer.py"),
                      model_config=str(tmp_path / "config.json"),
                      targets=("TinyAttention.k_scale_proj",), out=str(tmp_path / "out"))
    res.save()
    changes = api.apply(tmp_path / "out" / "prefetch_plan.yaml", root=tmp_path)
    changes.write()
    assert changes.refused == [] and len(changes.applied) == 1
    text = (tmp_path / "serving_layer.py").read_text()
    line, = [ln for ln in text.splitlines() if "k_scale_proj.weight" in ln]
    assert '.attr(self, "next_layer.self_attn.k_scale_proj") is not None' in line


@pytest.mark.parametrize("rank, built, absent", [(None, "q_proj", "q_b_proj"),
                                                 (64, "q_b_proj", "q_proj")])
def test_transformers_style_low_rank_branch(rank, built, absent):
    ms = load_model_source(FIX / "modeling_tiny_mla.py", {**CFG, "head_dim": 32,
                                                          "q_lora_rank": rank}, "config.json")
    assert unbuilt(ms, "TinyDecoderLayer", f"self.self_attn.{built}.weight",
                   "TinyMlaAttention") is None
    why = unbuilt(ms, "TinyDecoderLayer", f"self.self_attn.{absent}.weight",
                  "TinyMlaAttention").why
    test = "self.q_lora_rank is None"
    assert why == (f"TinyMlaAttention.{absent} is not built under this config: it is built only "
                   f"when `{test if rank is not None else f'not ({test})'}`, which the config "
                   f"makes false")


def test_an_undecided_module_the_rewrite_guards_is_planned():
    """The rewrite's presence check (`_cbp.attr(self, "self_attn.k_scale_proj") is not None`,
    written when the path may be absent) is the safety net for a test the config cannot decide;
    without it the site is refused. A path the config rules out is refused guarded or not: it
    would never fire."""
    ms = _serving(num_experts=4)
    path = "self.self_attn.k_scale_proj.weight"
    assert unguarded(ms, "TinyDecoderLayer", (path,), ("self.self_attn.k_scale_proj",),
                     "TinyAttention") is None
    assert "does not decide" in unguarded(ms, "TinyDecoderLayer", (path,), (None,),
                                          "TinyAttention")
    # a guard that stops above the undecided step (an index cuts it: `self.self_attn`) is none
    assert unguarded(ms, "TinyDecoderLayer", (path,), ("self.self_attn",), "TinyAttention")
    dense = "self.mlp.gate_up_proj.weight"
    assert "makes false" in unguarded(ms, "TinyDecoderLayer", (dense,),
                                      ("self.mlp.gate_up_proj",), "TinyMLP")
    # two paths of one weight, each guarded (one built is enough): test_two_paths.py


def test_a_target_named_through_a_chosen_module_finds_the_class_that_holds_it():
    """`--target TinyDecoderLayer.mlp.shared`: `mlp` may be TinyMLP or TinyMoE; the class that
    has `shared` is meant (before: the first class the file assigns, TinyMLP, 'does not
    exist'); the config then decides whether that class is built."""
    assert _plan("serving_layer.py", "TinyDecoderLayer.mlp.shared", num_experts=4) == \
        [("TinyDecoderLayer", "self.mlp.shared.weight")]
    with pytest.raises(SourceError) as exc:
        _plan("serving_layer.py", "TinyDecoderLayer.mlp.shared", num_experts=0)
    assert "TinyDecoderLayer.mlp (TinyMoE) is not built under this config" in str(exc.value)
