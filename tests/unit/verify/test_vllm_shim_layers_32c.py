"""The vLLM shim's layers that vLLM 0.34 families of issue 32's group c rely on to build and run
one decode step (minicpm's own MoE, minimax_m2's q/k norm, nemotron's CustomOp norm, the
multimodal families' text-only build, muse_glimmer's rotary). Values worked out by hand from the
calls' meaning in vLLM."""

from __future__ import annotations

import importlib
import math
import sys

import torch
from torch import nn

from cannbot_prefetch.verify.shims import vllm_shim


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


def test_fused_topk_and_experts_weight_each_expert_by_its_routing_share():
    """Two experts, hidden 2, expert width 1; gating [0, ln 3]: softmax (0.25, 0.75), top 2 not
    renormalised: ids (1, 0), weights (0.75, 0.25). Expert 0: gate 1, up 2 ->
    silu(1) * 2 = 1.462117 on lane 0; expert 1: gate 2, up 1 -> silu(2) = 1.761594 on lane 1.
    Out: (0.25 * 1.462117, 0.75 * 1.761594) = (0.365529, 1.321196)."""
    with vllm_shim():
        moe = _fresh("vllm.model_executor.layers.fused_moe")
        x = torch.tensor([[1.0, 0.0]])
        w, ids, _ = moe.fused_topk(x, torch.tensor([[0.0, math.log(3.0)]]), 2, False)
        assert ids.tolist() == [[1, 0]]
        assert torch.allclose(w, torch.tensor([[0.75, 0.25]]))
        w1 = torch.tensor([[[1.0, 0.0], [2.0, 0.0]], [[2.0, 0.0], [1.0, 0.0]]])   # [E, 2I, H]
        w2 = torch.tensor([[[1.0], [0.0]], [[0.0], [1.0]]])                       # [E, H, I]
        out = moe.fused_experts(x, w1, w2, w, ids)
        assert torch.allclose(out, torch.tensor([[0.365529, 1.321196]]), atol=1e-5)
        # minimax_m2 and mimo_v2 import the router from its own module
        gl = _fresh("vllm.model_executor.layers.fused_moe.router.gate_linear")
        assert gl.GateLinear.__name__ == "GateLinear"


def test_minimax_norm_normalises_q_and_k_over_their_whole_width_and_leaves_v():
    """qkv (3, 4 | 1, 1 | 5, 6), q and kv width 2: q / rms(q) with rms = sqrt(12.5) ->
    (0.848528, 1.131371); k (1, 1) unchanged; v passed through."""
    with vllm_shim():
        mm = _fresh("vllm.model_executor.layers.minimax_rms_norm")
        n = mm.MiniMaxText01RMSNormTP
        q, k, v = n.forward_qkv(n(2, eps=0.0), n(2, eps=0.0),
                                torch.tensor([[3.0, 4.0, 1.0, 1.0, 5.0, 6.0]]), 2, 2)
        assert torch.allclose(q, torch.tensor([[0.848528, 1.131371]]), atol=1e-5)
        assert torch.allclose(k, torch.tensor([[1.0, 1.0]]))
        assert torch.equal(v, torch.tensor([[5.0, 6.0]]))


def test_custom_op_registers_as_the_identity_and_runs_forward_native():
    with vllm_shim():
        co = _fresh("vllm.model_executor.custom_op")

        @co.CustomOp.register("doubling")
        class Doubling(co.CustomOp):
            def forward_native(self, x):
                return 2 * x

        assert Doubling.__name__ == "Doubling"
        assert torch.equal(Doubling()(torch.tensor([1.5])), torch.tensor([3.0]))


def test_text_only_build_skips_towers_and_builds_the_language_model():
    """A text-only run (no item of any modality per prompt): the tower built inside
    `_mark_tower_model` holds no weights afterwards, the language model's linear is real."""
    with vllm_shim():
        itf = _fresh("vllm.model_executor.models.interfaces")
        cfg = importlib.import_module("vllm.config")

        class M(nn.Module, itf.SupportsMultiModal):
            def __init__(self):
                super().__init__()
                with self._mark_tower_model(None, "image"):
                    self.vision = nn.Linear(1000, 1000)
                with self._mark_language_model(None):
                    self.lm = nn.Linear(2, 3)

        m = M()
        assert sum(p.numel() for p in m.vision.parameters()) == 0
        assert m.lm.weight.device.type == "cpu" and tuple(m.lm.weight.shape) == (3, 2)
        assert cfg.ModelConfig().get_multimodal_config().get_limit_per_prompt("image") == 0


def test_model_config_standardizes_rope_parameters_from_rope_theta():
    """vLLM's config loading gives a config with only `rope_theta` its `rope_parameters`."""
    from transformers import PretrainedConfig
    with vllm_shim():
        cfg = _fresh("vllm.config")
        hf = PretrainedConfig(rope_theta=500000.0)
        cfg.ModelConfig(hf)
        assert hf.rope_parameters == {"rope_type": "default", "rope_theta": 500000.0}


def test_apply_rotary_emb_turns_each_pair_by_its_angle():
    """A quarter turn (cos 0, sin 1): neox halves (1 | 0) -> (0 | 1); GPT-J lanes (1, 0) ->
    (0, 1)."""
    with vllm_shim():
        common = _fresh("vllm.model_executor.layers.rotary_embedding.common")
        x = torch.tensor([[[1.0, 0.0]]])                     # [tokens, heads, head_size]
        cos, sin = torch.tensor([[0.0]]), torch.tensor([[1.0]])
        for neox in (True, False):
            got = common.ApplyRotaryEmb(is_neox_style=neox)(x, cos, sin)
            assert torch.allclose(got, torch.tensor([[[0.0, 1.0]]]))


def test_attention_sink_starts_at_minus_infinity_per_head():
    with vllm_shim():
        wu = _fresh("vllm.model_executor.model_loader.weight_utils")
        sink = wu.make_attention_sink(3)
        assert sink.shape == (3,) and bool(torch.isinf(sink).all()) and bool((sink < 0).all())
