"""The vLLM shim's hybrid-model pieces (issue 32h): the state-space / linear-attention mixers
are shape-faithful stand-ins built from vLLM's constructor arguments, whose projections run
and whose token mix is `x * silu(gate)`; non-gated fused experts; a model file's own custom op
registered on the CPU; the forward context's registered layers. Values worked out by hand
(silu(1) = 0.731059, silu(2) = 1.761594)."""

from __future__ import annotations

import importlib
import sys

import torch

from cannbot_prefetch.verify.shims import vllm_shim

SILU1, SILU2 = 0.731059, 1.761594


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


def _set(linear, weight):
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(weight, dtype=torch.float32))


def test_mamba2_mixer_projects_in_and_out_with_vllms_widths():
    """MambaMixer2(hidden 2, state 1, conv 4, intermediate 2, heads 1, head dim 2): in_proj
    gives gate (2), x (2), B (1), C (1), dt (1) = 7 rows as vLLM's; out_proj 2 -> 2. Input
    [1, 0] picks in_proj's first column: gate [1, 2], x [3, 4]; out_proj the identity:
    [3 * silu(1), 4 * silu(2)]."""
    with vllm_shim():
        m2 = _fresh("vllm.model_executor.layers.mamba.mamba_mixer2")
        mixer = m2.MambaMixer2(2, 1, 4, 2, use_conv_bias=True, use_bias=False, n_groups=1,
                               num_heads=1, head_dim=2, prefix="model.layers.0.mixer")
        assert tuple(mixer.in_proj.weight.shape) == (7, 2)
        assert tuple(mixer.out_proj.weight.shape) == (2, 2)
        _set(mixer.in_proj, [[1, 0], [2, 0], [3, 0], [4, 0], [0, 0], [0, 0], [0, 0]])
        _set(mixer.out_proj, [[1, 0], [0, 1]])
        out = mixer(torch.tensor([[1.0, 0.0]]))
        assert torch.allclose(out, torch.tensor([[3 * SILU1, 4 * SILU2]]), atol=1e-5)
        assert mixer.n_groups == 1 and mixer.tped_intermediate_size == 2


def test_short_conv_writes_into_the_callers_output():
    """ShortConv(dim 1): in_proj gives B, C, x (3 rows); `conv(h, output)` fills `output` as
    vLLM's custom op does: out_proj(B * x * silu(C)) = 2 * (2 * 3 * silu(1)) for input 1 with
    in_proj [2, 1, 3] and out_proj [2]."""
    with vllm_shim():
        sc = _fresh("vllm.model_executor.layers.mamba.short_conv")

        class Cfg:
            conv_L_cache, conv_bias = 3, False

        conv = sc.ShortConv(Cfg(), 1, 0, prefix="model.layers.0.conv")
        _set(conv.in_proj, [[2], [1], [3]])
        _set(conv.out_proj, [[2]])
        out = torch.zeros(1, 1)
        assert conv(torch.tensor([[1.0]]), out) is None
        assert torch.allclose(out, torch.tensor([[2 * 2 * 3 * SILU1]]), atol=1e-5)


def test_qwen_gated_delta_net_sizes_from_the_config_and_returns_its_output():
    """QwenGatedDeltaNetAttention: key dim = 1 head x 1, value dim = 1 head x 2, so in_proj_qkvz
    has 1 + 1 + 2 + 2 rows, in_proj_ba 2, out_proj 2 -> hidden 2; the output is
    out_proj(v * silu(z)) for v, z the last two pairs of rows."""
    with vllm_shim():
        gdn = _fresh("vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn")
        from vllm.config import ModelConfig, VllmConfig

        class Cfg:
            hidden_size, hidden_act, rms_norm_eps = 2, "silu", 1e-6
            linear_num_key_heads, linear_num_value_heads = 1, 1
            linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim = 1, 2, 4

        layer = gdn.QwenGatedDeltaNetAttention(Cfg(), VllmConfig(ModelConfig(Cfg())),
                                               prefix="model.layers.0.linear_attn")
        assert tuple(layer.in_proj_qkvz.weight.shape) == (6, 2)
        assert tuple(layer.in_proj_ba.weight.shape) == (2, 2)
        _set(layer.in_proj_qkvz, [[0, 0], [0, 0], [3, 0], [4, 0], [1, 0], [2, 0]])
        _set(layer.out_proj, [[1, 0], [0, 1]])
        out = layer(torch.tensor([[1.0, 0.0]]))
        assert torch.allclose(out, torch.tensor([[3 * SILU1, 4 * SILU2]]), atol=1e-5)


def test_fused_moe_without_mul_has_no_up_half():
    """`activation_without_mul("relu2")` (nemotron_h): w13 [E, I, H], not [E, 2I, H]; one expert,
    top 1: relu(x . w13)^2 . w2 = relu(3 - 1)^2 * [2, 3] = [8, 12] for x [3, 1]."""
    with vllm_shim():
        fm = _fresh("vllm.model_executor.layers.fused_moe")
        assert fm.activation_without_mul("relu2") == "relu2_no_mul"
        moe = fm.FusedMoE(1, 1, 2, 1, activation=fm.activation_without_mul("relu2"))
        assert tuple(moe.w13_weight.shape) == (1, 1, 2)
        with torch.no_grad():
            moe.w13_weight.copy_(torch.tensor([[[1.0, -1.0]]]))
            moe.w2_weight.copy_(torch.tensor([[[2.0], [3.0]]]))
        x = torch.tensor([[3.0, 1.0]])
        assert torch.allclose(moe(x, torch.zeros(1, 1)), torch.tensor([[8.0, 12.0]]))
        assert tuple(fm.FusedMoE(1, 1, 2, 1).w13_weight.shape) == (1, 2, 2)   # gated: 2I


def test_a_model_files_custom_op_runs_on_the_cpu_and_fills_its_output():
    """zaya registers `zaya_cca` with `direct_register_custom_op` and calls
    `torch.ops.vllm.zaya_cca(h, out, name)`; the op runs the function it was given."""
    with vllm_shim():
        tu = _fresh("vllm.utils.torch_utils")

        def _double(x: torch.Tensor, out: torch.Tensor, name: str) -> None:
            out.copy_(2 * x)

        tu.direct_register_custom_op("cannbot_test_double", _double, mutates_args=["out"])
        out = torch.zeros(2)
        torch.ops.vllm.cannbot_test_double(torch.tensor([1.0, 3.0]), out, "x")
        assert torch.equal(out, torch.tensor([2.0, 6.0]))


def test_forward_context_has_no_metadata_and_the_registered_layers():
    """A step on the shim keeps no state: `attn_metadata` is None (vLLM's profile-run path);
    `no_compile_layers` holds what layers registered in the current config by prefix."""
    with vllm_shim():
        fc = _fresh("vllm.forward_context")
        from vllm.config import get_current_vllm_config

        layer = object()
        get_current_vllm_config().compilation_config.static_forward_context["a.b"] = layer
        ctx = fc.get_forward_context()
        assert ctx.attn_metadata is None and ctx.no_compile_layers["a.b"] is layer
