"""`quant_config: QuantizationConfig | None` is the checkpoint's quantization config, not the
model's (a "...Config" annotation made it the model's before: `getattr(quant_config, k, d)` read
config.json). vLLM's loader hands None for a checkpoint whose config.json has no
`quantization_config`, so a padding helper that returns its width unchanged when the checkpoint
is not block-FP8 (vLLM 0.34 bailing_moe_v3.py sizes its shared experts so) evaluates; a
quantized checkpoint's config is not read, and the shape is refused naming why. The statements
after a return the helper takes never run, so they cannot refuse it. The model file below is
GENERATED for this test in vLLM's style (written for this project, not copied); each expected
dim is worked out by hand beside it."""

from __future__ import annotations

from cannbot_prefetch.mapping.source import load_model_source

MODEL = '''
# GENERATED for tests/unit/mapping/test_quant_config_param.py in vLLM 0.34's style
from math import lcm

import torch
from torch import nn

from vllm.model_executor.layers.linear import ColumnParallelLinear, RowParallelLinear
from vllm.model_executor.layers.quantization.base_config import QuantizationConfig
from vllm.model_executor.layers.quantization.fp8 import Fp8Config


def _is_block_fp8(quant_config: QuantizationConfig | None) -> bool:
    return isinstance(quant_config, Fp8Config) and quant_config.weight_block_size is not None


def _padded(quant_config: QuantizationConfig | None, width: int) -> int:
    if not _is_block_fp8(quant_config):
        return width
    block = quant_config.weight_block_size
    sizes = []
    sizes.append(int(block[0]))
    step = lcm(*sizes)
    return (width + step - 1) // step * step


class MLP(nn.Module):
    def __init__(self, config, quant_config: QuantizationConfig | None = None, prefix: str = ""):
        super().__init__()
        inner = _padded(quant_config, config.intermediate_size)
        self.up_proj = ColumnParallelLinear(config.hidden_size, inner, bias=False,
                                            quant_config=quant_config)
        self.down_proj = RowParallelLinear(inner, config.hidden_size, bias=False,
                                           quant_config=quant_config)
        width = getattr(quant_config, "hidden_size", None) or config.hidden_size
        self.gate = ColumnParallelLinear(width, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.up_proj(x)
        out, _ = self.down_proj(h)
        return out


class Layer(nn.Module):
    def __init__(self, config, quant_config: QuantizationConfig | None = None, prefix: str = ""):
        super().__init__()
        self.mlp = MLP(config, quant_config=quant_config, prefix=f"{prefix}.mlp")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)
'''

CFG = {"hidden_size": 64, "intermediate_size": 100, "num_hidden_layers": 2, "vocab_size": 128}


def _lin(tmp_path, **over):
    f = tmp_path / "padded_vllm.py"
    f.write_text(MODEL)
    ms = load_model_source(f, {**CFG, **over}, "config.json", tp=2)
    return {a: lin for (c, a), lin in ms.linears.items() if c == "MLP"}


def test_an_unquantized_checkpoint_passes_none_and_the_helper_returns_early(tmp_path):
    lin = _lin(tmp_path)
    # RowParallelLinear at TP 2: (output 64, input 100 / 2); the `sizes.append` after the taken
    # return never runs; ColumnParallelLinear: (100 / 2, 64)
    assert lin["down_proj"].dims == (64, 50), lin["down_proj"].error
    assert lin["up_proj"].dims == (50, 64), lin["up_proj"].error


def test_the_quant_config_is_not_the_model_config(tmp_path):
    # config.json's hidden_size must not be read through quant_config: with quant_config None
    # the getattr default (None) falls back to config.hidden_size, the same 64 here, so ask
    # for a key only config.json has: it must not leak into the quant config
    lin = _lin(tmp_path, hidden_size=64)
    assert lin["gate"].dims == (4, 64), lin["gate"].error          # 8 / 2 outputs, 64 inputs


def test_a_quantized_checkpoint_is_not_read(tmp_path):
    q = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    lin = _lin(tmp_path, quantization_config=q)
    assert lin["down_proj"].dims is None
    assert "quant_config" in lin["down_proj"].error
