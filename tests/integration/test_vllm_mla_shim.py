"""An MLA attention in vLLM's style (tests/fixtures/vllm_style/mla_wrapper_vllm.py, written for
this project) end to end without vLLM: analyze (manual mode, TP 1) plans kv_b_proj and o_proj
before `self.mla_attn(...)`, the call that runs them; apply; verify builds the rewritten file
under the shim, whose MultiHeadLatentAttentionWrapper runs every projection it is handed, and
every site fires, with the switch flipped and with `CANNBOT_PREFETCH=1` alone on a fresh model."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cannbot_prefetch import api  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_style" / "mla_wrapper_vllm.py"
CFG = ('{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, '
       '"num_hidden_layers": 2, "rms_norm_eps": 1e-5, "qk_nope_head_dim": 8, '
       '"qk_rope_head_dim": 4, "v_head_dim": 8, "kv_lora_rank": 16, "torch_dtype": "float32"}')
FACTORY = '''import importlib, json, sys
import torch
from transformers import PretrainedConfig
from cannbot_prefetch.verify.shims import vllm_shim

def build():
    cfg = PretrainedConfig(**json.loads(open(sys.argv_cfg).read()))
    with vllm_shim():
        from vllm.config import ModelConfig, VllmConfig
        mod = importlib.import_module("mla_wrapper_vllm")
        torch.manual_seed(0)
        model = mod.LatentForCausalLM(vllm_config=VllmConfig(ModelConfig(cfg))).eval()
    return model, (torch.tensor([3, 5]), torch.tensor([1, 2]), torch.randn(2, 64))
'''


@pytest.mark.slow
def test_mla_sites_fire_under_the_shim(tmp_path):
    pytest.importorskip("transformers")
    shutil.copy(FIX, tmp_path / FIX.name)
    (tmp_path / "config.json").write_text(CFG)
    (tmp_path / "mla_factory.py").write_text(
        FACTORY.replace("sys.argv_cfg", repr(str(tmp_path / "config.json"))))
    res = api.analyze(None, model_src=str(tmp_path / FIX.name),
                      model_config=str(tmp_path / "config.json"),
                      targets=("LatentAttention.kv_b_proj", "LatentAttention.o_proj"), tp=1,
                      out=str(tmp_path / "plan"))
    res.save()
    api.apply(tmp_path / "plan" / "prefetch_plan.yaml", root=str(tmp_path)).write()
    sys.path.insert(0, str(tmp_path))
    try:
        v = api.verify(tmp_path / "plan" / "prefetch_plan.yaml",
                       factory=f"{tmp_path / 'mla_factory.py'}:build")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mla_wrapper_vllm", None)
    failed = [c for c in v.checks if not c.passed and not c.skipped]
    assert not failed, failed
    fires = [c for c in v.checks if c.name == "fires"]
    # two layers build each weight once: each site fires twice
    assert len(fires) == 2 and all(c.passed and c.detail.startswith("fired 2/2") for c in fires)
    env = [c for c in v.checks if c.name.startswith("switch by environment")]
    assert env and env[0].passed
