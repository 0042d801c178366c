"""benchmarks/vllm_sweep.py's tiny config for hybrid families (issue 32h): one layer of each
kind the class's default pattern holds, a key the class derives kept, the family's own
activation, a property the file reads stored. The model files here are GENERATED (a few lines
in vLLM's style naming the family's *ForCausalLM so transformers' own config class is used);
the expected values are worked out by hand from TINY (hidden_size 256, 8 heads, 2 layers) and
the transformers classes' rules (Zamba2Config: attention_head_dim = 2 * hidden / heads = 64;
JambaConfig: attention every 8th layer from offset 4)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SWEEP = Path(__file__).resolve().parents[2] / "benchmarks" / "vllm_sweep.py"


@pytest.fixture
def sweep():
    spec = importlib.util.spec_from_file_location("vllm_sweep_hybrid_under_test", SWEEP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _model(tmp_path, cls: str, reads: str) -> Path:
    f = tmp_path / "vllm" / "model_executor" / "models" / "fam.py"
    f.parent.mkdir(parents=True)
    f.write_text(f"# GENERATED for tests/unit/test_vllm_sweep_hybrid.py, in vLLM's style\n"
                 f"class {cls}(nn.Module):\n"
                 f"    def __init__(self, *, vllm_config, prefix=''):\n"
                 f"        config = vllm_config.model_config.hf_config\n"
                 f"        self.x = {reads}\n")
    return f


def test_mixer_layers_one_of_each_kind_at_least_two(sweep):
    # nemotron_h's default pattern: mamba, MoE, attention, MLP kinds (4 layers, in order)
    got = sweep._mixer_layers({"layers_block_type": ["linear_attention", "moe", "linear_attention",
                                                     "full_attention", "mlp"]})
    assert got == {"layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"],
                   "num_hidden_layers": 4}
    # one kind repeated to TINY's 2 layers
    assert sweep._mixer_layers({"layer_types": ["hybrid"] * 40}) == {
        "layer_types": ["hybrid", "hybrid"], "num_hidden_layers": 2}
    # mamba only (granitemoehybrid's default): TINY's full attention joins
    assert sweep._mixer_layers({"layer_types": ["linear_attention"] * 40}) == {
        "layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2}
    # attention kinds only: TINY's own layers stay (gemma's sliding / full)
    assert sweep._mixer_layers({"layer_types": ["sliding_attention", "full_attention"]}) == {}
    assert sweep._mixer_layers({}) == {}


def test_zamba2_keeps_its_derived_head_dim_and_gelu(sweep, tmp_path):
    cfg = sweep.family_config(_model(tmp_path, "Zamba2ForCausalLM", "config.hidden_act"))
    # attention_hidden_size = 2 * 256 = 512, over 8 heads: 64 (TINY's head_dim 32 would break
    # heads * head_dim == attention_hidden_size, which vLLM's zamba2 checks)
    assert cfg["attention_hidden_size"] == 512
    assert cfg["attention_head_dim"] == 64 and cfg["head_dim"] == 64
    assert cfg["hidden_act"] == "gelu"                 # Zamba2Config's own (TINY: silu)
    # default pattern: mamba ("linear_attention") and hybrid layers: one of each
    assert cfg["layers_block_type"] == ["linear_attention", "hybrid"]
    assert cfg["num_hidden_layers"] == 2


def test_a_property_the_file_reads_is_stored(sweep, tmp_path):
    cfg = sweep.family_config(_model(tmp_path, "JambaForCausalLM", "config.layers_block_type"))
    # JambaConfig: mamba at layer 0, attention first at layer 4 (period 8, offset 4): made tiny,
    # one layer of each kind in that order
    assert cfg["layers_block_type"] == ["mamba", "attention"]
    assert cfg["num_hidden_layers"] == 2


def test_block_kinds_one_of_each_in_order_of_first_appearance(sweep):
    # Step3p7TextConfig's default (model type step3p5): 3 dense then 42 sparse MLP blocks
    default = {"num_hidden_layers": 45, "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 42,
               "layer_types": ["full_attention"] * 45}
    assert sweep._block_kinds(default, 2) == {"mlp_layer_types": ["dense", "sparse"],
                                              "num_hidden_layers": 2}
    # three kinds need three layers; the attention pattern is `_mixer_layers`' / TINY's
    assert sweep._block_kinds({"num_hidden_layers": 4, "mlp_layer_types":
                               ["dense", "hash_moe", "moe", "moe"]}, 2) == {
        "mlp_layer_types": ["dense", "hash_moe", "moe"], "num_hidden_layers": 3}
    # one kind, or a list that is not one per layer (a backbone's stage names): left alone
    assert sweep._block_kinds({"num_hidden_layers": 4, "mlp_layer_types": ["sparse"] * 4}, 2) \
        == {}
    assert sweep._block_kinds({"num_hidden_layers": 12, "stage_names": ["stem", "s1"]}, 2) == {}


def test_step3p5s_tiny_config_builds_a_moe_block(sweep, tmp_path):
    """Built with 2 layers, Step3p7TextConfig derives its MLP kinds from the layer count (MoE
    from layer 3 on): none of the 2 would be MoE, and vLLM's file asserts one is. (transformers
    maps no causal-LM class to the type: the file's stem names it, as vLLM's step3p5.py's)"""
    f = _model(tmp_path, "Step3p5ForCausalLM", "config.mlp_layer_types")
    cfg = sweep.family_config(f.rename(f.with_name("step3p5.py")))
    assert cfg["mlp_layer_types"] == ["dense", "sparse"]
    assert cfg["num_hidden_layers"] == 2 and cfg["layer_types"] == ["full_attention"] * 2


def test_the_factory_types_a_sub_config_left_a_dict(sweep):
    """A plain config keeps a nested dict as a dict; the factory makes one that names its model
    type an object of that type's class (BartConfig for "bart"), or a plain config."""
    src = sweep.FACTORY.format(cls="X", stem="x", config="c.json", own="", here="h", models="m",
                               configs="c", subs=sweep.TEXT_SUBCONFIGS)
    ns: dict = {}
    exec(compile(src, "sweep_factory.py", "exec"), ns)      # defines build / _config only
    from transformers import BartConfig, PretrainedConfig
    cfg = ns["_config"]({"hidden_size": 256, "rope_parameters": {"rope_type": "default"},
                         "decoder": {"model_type": "bart", "d_model": 64, "vocab_size": 96},
                         "encoder": {"model_type": "", "patch_size": 16,
                                     "args": {"model": "vit_huge_patch16_224"}}})
    assert isinstance(cfg.decoder, BartConfig) and cfg.decoder.d_model == 64
    assert cfg.decoder.vocab_size == 96
    assert isinstance(cfg.encoder, PretrainedConfig) and cfg.encoder.patch_size == 16
    assert cfg.encoder.args == {"model": "vit_huge_patch16_224"}
    assert cfg.rope_parameters == {"rope_type": "default"}      # no model_type: stays a dict
