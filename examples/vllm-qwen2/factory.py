"""`cannbot prefetch verify PLAN --factory factory.py:build`: the rewritten model file built at
TP 1 under cannbot-prefetch's vLLM shim (vLLM need not be installed), and one decode step's
inputs (a batch of 2 sequences, one new token each, flattened as vLLM does)."""
import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from cannbot_prefetch.verify.shims import vllm_shim

MODEL = "qwen2_vllm_model"


def build(src_dir: str | None = None):
    here = Path(src_dir) if src_dir else Path(__file__).resolve().parent
    cfg = SimpleNamespace(**json.loads((here / "config.json").read_text()))
    with vllm_shim():
        from vllm.config import ModelConfig, VllmConfig
        sys.path.insert(0, str(here))
        try:
            mod = importlib.import_module(MODEL)
        finally:
            sys.path.remove(str(here))
        torch.manual_seed(0)
        model = mod.Qwen2ForCausalLM(vllm_config=VllmConfig(ModelConfig(cfg))).eval()
    ids = torch.tensor([7, 11])
    positions = torch.tensor([5, 9])
    return model, (ids, positions)
