"""The vLLM shim's pieces for alice_ai.py: Kimi K3's attention residual (`attn_res`) in plain
torch, the offloader in place (vLLM's no-op default) and the delta-attention mixer as a named
stand-in. The `attn_res` values are worked out by hand in the comments from the kernel's meaning
(a softmax over the sources whose logits are each source's dot product with
norm_weight * qk_weight, divided by its RMS)."""

from __future__ import annotations

import importlib
import math
import sys

import pytest
import torch

from cannbot_prefetch.verify.shims import vllm_shim


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


def _args(**over):
    base = dict(prefix=torch.tensor([[1.0, 0.0]]), delta=None,
                blocks=torch.tensor([[[0.0, 2.0], [9.0, 9.0]]]),
                norm_weight=torch.tensor([1.0, 1.0]), qk_weight=torch.tensor([1.0, 0.0]),
                output_norm_weight=None, num_blocks=1, block_write_idx=-1, eps=0.0,
                output_norm_eps=0.0)
    base.update(over)
    return base


def test_attn_res_mixes_blocks_and_prefix_by_softmax():
    with vllm_shim():
        attn_res = _fresh("vllm.models.kimi_k3.nvidia.ops").attn_res
        out = attn_res(**_args())
    # block 0 [0, 2]: dot with [1, 0] is 0 -> logit 0; prefix [1, 0]: dot 1, RMS sqrt(1/2) ->
    # logit sqrt(2). Weights e^sqrt2 / (1 + e^sqrt2) on the prefix, the rest on block 0
    # (block 1 [9, 9] lies beyond num_blocks: not a source)
    wp = math.exp(math.sqrt(2)) / (1 + math.exp(math.sqrt(2)))
    assert out.tolist()[0] == pytest.approx([wp * 1.0, (1 - wp) * 2.0], rel=1e-6)


def test_attn_res_one_source_is_the_prefix_and_delta_is_written_back():
    with vllm_shim():
        attn_res = _fresh("vllm.models.kimi_k3.nvidia.ops").attn_res
        a = _args(delta=torch.tensor([[2.0, 3.0]]), num_blocks=0, block_write_idx=1)
        out = attn_res(**a)
    assert out.tolist() == [[3.0, 3.0]]                 # prefix + delta, softmax of one = 1
    assert a["prefix"].tolist() == [[3.0, 3.0]]         # the sum stored in place
    assert a["blocks"][0, 1].tolist() == [3.0, 3.0]     # and as block 1


def test_attn_res_output_norm():
    with vllm_shim():
        attn_res = _fresh("vllm.models.kimi_k3.nvidia.ops").attn_res
        out = attn_res(**_args(num_blocks=0, prefix=torch.tensor([[3.0, 4.0]]),
                               output_norm_weight=torch.tensor([1.0, 2.0])))
    rms = math.sqrt((9 + 16) / 2)                       # 3.5355...
    assert out.tolist()[0] == pytest.approx([3 / rms, 2 * 4 / rms], rel=1e-6)


def test_the_offloader_in_place_is_the_no_op_one_and_the_mixer_refuses_to_build():
    with vllm_shim():
        off = _fresh("vllm.model_executor.offloader")
        now = off.get_offloader()
        assert isinstance(now, off.NoopOffloader)
        assert not isinstance(now, (off.PrefetchOffloader, off.UVAOffloader))
        with pytest.raises(NotImplementedError, match="UVAOffloader"):
            off.UVAOffloader()
        kda = importlib.import_module("vllm.model_executor.layers.mamba.gdn.kimi_gdn_linear_attn")
        with pytest.raises(NotImplementedError, match="KimiGatedDeltaNetAttention"):
            kda.KimiGatedDeltaNetAttention(config=None)
