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
