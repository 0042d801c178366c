"""benchmarks/vllm_sweep.py's tiny config: each key keeps the kind the family uses (a list stays
a list), the names a vLLM-own config class stores as standard keys are tiny, and a sub-config
handed to a class that names its transformers config class is that class built tiny. The model
and config files here are GENERATED in vLLM's layout (written for this test, not copied); the
expected values are worked out by hand from the sweep's TINY (hidden_size 256, moe_num_experts 8,
moe_intermediate_size 128)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

SWEEP = Path(__file__).resolve().parents[2] / "benchmarks" / "vllm_sweep.py"

MODEL = '''# GENERATED for tests/unit/test_vllm_sweep_config.py, in vLLM's style
from transformers import BartConfig
from vllm.transformers_utils.configs.toy import ToyTextConfig


class ToyMoE(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.text = FusedMoE(num_experts=config.moe_num_experts[0])
        self.vision = FusedMoE(num_experts=config.moe_num_experts[1])
        self.first = self.layers[3]          # not a config key: left alone


class ToyDecoder(nn.Module):
    def __init__(self, config: BartConfig, prefix: str = ""):
        super().__init__()
        self.width = config.d_model
        self.clamp = config.clamp


class ToyForCausalLM(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        config = vllm_config.model_config.hf_config
        self.decoder = ToyDecoder(config.decoder, prefix="decoder")
'''

CONFIG = '''# GENERATED for tests/unit/test_vllm_sweep_config.py, in vLLM's configs' style
from transformers import PreTrainedConfig


class ToyTextConfig(PreTrainedConfig):
    def __init__(self, dim: int = 2048, ff_dim: int = 8192, max_crops: int = 12,
                 use_bias: bool = False, clamp: float | None = None,
                 note: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.dim = dim
        self.ff_dim = ff_dim
        self.hidden_size = dim
        self.intermediate_size = ff_dim
'''


@pytest.fixture
def sweep():
    spec = importlib.util.spec_from_file_location("vllm_sweep_under_test", SWEEP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def model(tmp_path):
    models = tmp_path / "vllm" / "model_executor" / "models"
    configs = tmp_path / "vllm" / "transformers_utils" / "configs"
    models.mkdir(parents=True)
    configs.mkdir(parents=True)
    (models / "toy.py").write_text(MODEL)
    (configs / "toy.py").write_text(CONFIG)
    return models / "toy.py"


def test_a_key_the_file_indexes_or_the_class_lists_stays_a_list(sweep, model):
    tree = ast.parse(model.read_text())
    got = sweep._listed({"moe_num_experts": 8, "moe_intermediate_size": 128, "hidden_size": 256,
                         "layers": 2}, {"moe_intermediate_size": [1536, 512, 7]}, tree)
    assert got["moe_num_experts"] == [8, 8]            # indexed [0] and [1]
    assert got["moe_intermediate_size"] == [128, 128, 128]   # the class default's length
    assert got["hidden_size"] == 256                   # read plainly: stays a number
    assert got["layers"] == 2                          # self.layers[3] is not a config read


def test_a_vllm_config_class_stores_its_names_as_standard_keys(sweep, model):
    got = sweep._vllm_config_keys(model, ast.parse(model.read_text()))
    # dim is stored as hidden_size (TINY 256), ff_dim as intermediate_size (TINY 512);
    # max_crops and the flag use_bias keep their defaults; clamp's None is kept (the file
    # reads config.clamp), note's is not (never read)
    assert got == {"dim": 256, "ff_dim": 512, "max_crops": 12, "use_bias": False,
                   "clamp": None}


def test_a_sub_config_handed_to_a_class_naming_its_config_class(sweep, model):
    got = sweep._sub_configs(ast.parse(model.read_text()))
    assert set(got) == {"decoder"}
    # BartConfig stores hidden_size as d_model (its attribute_map): TINY's 256
    assert got["decoder"]["d_model"] == 256
    assert got["decoder"]["model_type"] == "bart"


def test_the_family_config_joins_the_three(sweep, model):
    cfg = sweep.family_config(model)        # no transformers class for ToyForCausalLM
    assert cfg["dim"] == 256 and cfg["decoder"]["d_model"] == 256
    assert cfg["moe_num_experts"] == [8, 8] and cfg["hidden_size"] == 256


def test_per_layer_keys_follow_the_tiny_depth(sweep, model):
    """A list the class keeps one per layer (gemma3n's intermediate_size, 35 for 35 layers) has
    TINY's 2; a count of some layers the tiny depth cannot hold (num_kv_shared_layers 15 of 35)
    keeps its share: round(2 * 15 / 35) = 1, at least one layer left outside it; a count that
    fits (num_dense_layers 2 of 2) is left alone."""
    tree = ast.parse(model.read_text())
    got = sweep._listed({"intermediate_size": 512, "num_kv_shared_layers": 15,
                         "num_dense_layers": 2},
                        {"num_hidden_layers": 35, "intermediate_size": [16384] * 35}, tree)
    assert got["intermediate_size"] == [512, 512]
    assert got["num_kv_shared_layers"] == 1
    assert got["num_dense_layers"] == 2


def test_a_remote_key_is_added_only_where_the_file_reads_it(sweep):
    tree = ast.parse("class A:\n    def __init__(self, config):\n"
                     "        self.r = config.norm_topk_prob\n"
                     "        self.t = self.config.bskcn_tv[1]\n        self.h = config.hidden_size\n")
    got = sweep._remote_keys({"hidden_size": 256, "bskcn_tv": [0.5, 0.5]}, tree)
    # norm_topk_prob read and missing: added (True); bskcn_tv given: kept; rope_local_theta
    # never read: absent
    assert got == {"hidden_size": 256, "bskcn_tv": [0.5, 0.5], "norm_topk_prob": True}


def test_the_loaded_config_gets_rope_parameters_from_rope_theta(sweep):
    got = sweep.vllm_loaded({"rope_theta": 500000.0, "partial_rotary_factor": 0.5,
                             "text_config": {"rope_theta": 10000.0},
                             "vision_config": {"rope_theta": 7.0}})
    assert got["rope_parameters"] == {"rope_type": "default", "rope_theta": 500000.0,
                                      "partial_rotary_factor": 0.5}
    assert got["text_config"]["rope_parameters"] == {"rope_type": "default",
                                                     "rope_theta": 10000.0}
    assert "rope_parameters" not in got["vision_config"]      # not a text sub-config
    given = {"rope_theta": 1.0, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}}
    assert sweep.vllm_loaded(given)["rope_parameters"] == given["rope_parameters"]


def test_done_when_counts_verified_families_and_groups_failures(sweep):
    rows = [{"family": "a", "passed": True, "verify": "ok"},
            {"family": "b", "passed": True, "verify": "verify: AttributeError: x has no y"},
            {"family": "c", "passed": True, "verify": "verify: AttributeError: x has no y"},
            {"family": "d", "passed": False, "why": "analyze: refused"},
            {"family": "e", "passed": True, "verify": "fires: site s did not fire"}]
    got = sweep.done_when(rows)
    # 1 of 5 verified: 20 %
    assert (got["verified"], got["families"], got["percent"]) == (1, 5, 20.0)
    assert got["verify_failures"] == {
        "build/run: AttributeError: x has no y": ["b", "c"],
        "check failed: fires": ["e"],
        "not planned+applied (verify not run)": ["d"]}


KV_MODEL = '''# GENERATED for tests/unit/test_vllm_sweep_config.py, in vLLM's style
class OptAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads=None, prefix=""):
        super().__init__()
        self.qkv_proj = QKVParallelLinear(hidden_size=dim, head_size=dim // heads,
                                          total_num_heads=heads, total_num_kv_heads=kv_heads)


class OptLayer(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        self.self_attn = OptAttention(config.hidden_size, config.num_attention_heads,
                                      kv_heads=getattr(config, "opt_kv_heads", None))
'''


@pytest.mark.parametrize("cfg, want", [
    # TINY: hidden 256, 8 heads of 32, 4 kv heads, TP 2; the key absent: kv = 8 heads,
    # (8/2 + 2 x 8/2) x 32 = 384
    ({}, (384, 256)),
    # the key set (in a sub-config too): TINY's 4 kv heads, (8/2 + 2 x 4/2) x 32 = 256
    ({"decoder": {"opt_kv_heads": 4}}, (256, 256)),
])
def test_kv_heads_passed_as_getattr_none_expect_the_head_count(sweep, tmp_path, cfg, want):
    f = tmp_path / "opt.py"
    f.write_text(KV_MODEL)
    layer = sweep.targets(f)["OptAttention.qkv_proj"]
    assert layer == "QKVParallelLinear/kv-or-heads:opt_kv_heads"
    assert sweep.expected_dims("OptAttention.qkv_proj", layer, cfg) == want
