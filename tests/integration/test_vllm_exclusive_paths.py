"""The oracle for issue 32's placement in forwards with exclusive branches: the GENERATED
vLLM-style fixtures (tests/fixtures/vllm_style/exclusive/: dory's attention-or-MLP mixer,
granitemoehybrid's MoE in both arms of an `if`, zaya's MoE block that returns from its TP-1
arm) are planned (manual mode, TP 1), applied, built under the verify shim and run: every site
fires with the switch on, in the model the plan was made for, on each path its layers take
(one layer's `residual is None`, the others' not; attention and MLP layers alternating)."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

pytest.importorskip("torch")

from pathlib import Path  # noqa: E402

from cannbot_prefetch import api  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_style" / "exclusive"
CFG = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
       "num_experts": 4, "num_experts_per_tok": 2, "num_attention_heads": 4,
       "num_hidden_layers": 4, "rms_norm_eps": 1e-5, "vocab_size": 128,
       "block_types": ["attention", "mlp", "attention", "mlp"],
       "shared_intermediate_size": 0, "torch_dtype": "float32"}
FACTORY = '''import importlib, json
import torch
from transformers import PretrainedConfig
from cannbot_prefetch.verify.shims import vllm_shim

def build():
    cfg = PretrainedConfig(**json.loads(open(CONFIG).read()))
    with vllm_shim():
        from vllm.config import ModelConfig, VllmConfig
        mod = importlib.import_module("xpkg.MODULE")
        torch.manual_seed(0)
        model = mod.ROOT(vllm_config=VllmConfig(ModelConfig(cfg))).eval()
    return model, (torch.tensor([3, 5]), torch.tensor([1, 2]))
'''

CASES = {
    # module, root class, targets, config changes, how often each site fires (one per layer
    # that holds the weight: 2 of 4 layers are attention, 2 MLP; every layer holds a MoE,
    # the next-layer router 3 of 4: the last layer has no next one)
    "mixer": ("mixer_choice_vllm", "XcForCausalLM",
              ("XcAttention.qkv_proj", "XcAttention.o_proj", "XcMLP.gate_up_proj",
               "XcMLP.down_proj"), {}, "fired 2/2"),
    "runtime_arms": ("moe_arms_vllm", "XaRouterForCausalLM",
                     ("XaRouterLayer.block_sparse_moe.gate",
                      "XaRouterLayer.block_sparse_moe.experts.w13_weight"), {}, "fired 4/4"),
    "shared_arm": ("moe_arms_vllm", "XaForCausalLM", ("XaDecoderLayer.block_sparse_moe.gate",),
                   {"shared_intermediate_size": 64}, "fired 4/4"),
    "sp_return": ("sp_return_vllm", "XsForCausalLM", ("XsSparseMoeBlock.gate",), {},
                  "fired 3/3"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_site_fires_on_the_path_the_model_takes(tmp_path, case):
    pytest.importorskip("transformers")
    module, root, targets, extra, fired = CASES[case]
    shutil.copytree(FIX, tmp_path / "xpkg")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(dict(CFG, **extra)))
    (tmp_path / "xp_factory.py").write_text(
        FACTORY.replace("CONFIG", repr(str(cfg))).replace("MODULE", module)
        .replace("ROOT", root))
    res = api.analyze(None, model_src=str(tmp_path / "xpkg" / f"{module}.py"),
                      model_config=str(cfg), targets=targets, tp=1, out=str(tmp_path / "plan"))
    res.save()
    assert len(res.plan.sites) == len(targets)
    api.apply(tmp_path / "plan" / "prefetch_plan.yaml", root=str(tmp_path)).write()
    sys.path.insert(0, str(tmp_path))
    try:
        v = api.verify(tmp_path / "plan" / "prefetch_plan.yaml",
                       factory=f"{tmp_path / 'xp_factory.py'}:build")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "xpkg" or m.startswith("xpkg.")]:
            sys.modules.pop(name)
    fires = [c for c in v.checks if c.name == "fires"]
    assert len(fires) == len(targets)
    assert all(c.passed and c.detail.startswith(fired) for c in fires), \
        [c.detail for c in fires]
    failed = [c for c in v.checks if not c.passed and not c.skipped]
    assert not failed, [(c.name, c.detail) for c in failed]
