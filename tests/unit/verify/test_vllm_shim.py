"""The vLLM shim's model-building helpers (verify/shims): what a vLLM 0.34 model file calls while
its classes are defined and built, at one rank and one pipeline stage. Values worked out from the
calls' meaning in vLLM (make_layers: (start, end, layers) on the one stage; a gated activation:
act(first half) * second half)."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch
from torch import nn

from cannbot_prefetch.verify.shims import vllm_shim


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


def test_compile_decorator_is_the_identity_with_or_without_arguments():
    with vllm_shim():
        dec = _fresh("vllm.compilation.decorators")

        class A(nn.Module):
            pass

        assert dec.support_torch_compile(A) is A
        assert dec.support_torch_compile(dynamic_arg_dims={"x": 0})(A) is A


def test_one_stage_builds_every_layer():
    with vllm_shim():
        utils = _fresh("vllm.model_executor.models.utils")
        dist = _fresh("vllm.distributed")
        start, end, layers = utils.make_layers(3, lambda prefix: nn.Linear(2, 2),
                                               prefix="model.layers")
        assert (start, end, len(layers)) == (0, 3, 3)
        pp = dist.get_pp_group()
        assert pp.is_first_rank and pp.is_last_rank and pp.world_size == 1
        assert utils.maybe_prefix("model", "layers") == "model.layers"
        assert utils.maybe_prefix("", "layers") == "layers"
        assert utils.extract_layer_index("model.layers.7.mlp") == 7


def test_gated_activations_split_the_last_dim():
    with vllm_shim():
        act = _fresh("vllm.model_executor.layers.activation")
        x = torch.tensor([[1.0, -2.0, 3.0, 4.0]])
        # gelu(1) * 3, gelu(-2) * 4 (erf gelu: 0.841345, -0.045500)
        got = act.GeluAndMul()(x)
        assert torch.allclose(got, torch.tensor([[0.841345 * 3, -0.045500 * 4]]), atol=1e-5)
        # relu: max(1, 0) * 3, max(-2, 0) * 4
        assert torch.equal(act.get_act_and_mul_fn("relu")(x), torch.tensor([[3.0, 0.0]]))


class _Counting(nn.Module):
    """A linear returning (out, None) as vLLM's do, counting its calls."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin, self.calls = nn.Linear(n_in, n_out, bias=False), 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x), None


def test_mla_wrapper_runs_every_projection_it_is_handed_once():
    """vLLM's MLA wrapper runs the attention's projections (the model file calls only the
    wrapper): each handed projection once per call, shapes from the head split. 2 heads,
    nope 4 + rope 2, v 4, kv rank 6, q rank 5, hidden 8, 3 tokens: out [3, 8]."""
    with vllm_shim():
        mla = _fresh("vllm.model_executor.layers.mla")
        h, nope, rope, v, kvr, qr, hid = 2, 4, 2, 4, 6, 5, 8
        mods = dict(q_a_proj=_Counting(hid, qr), q_b_proj=_Counting(qr, h * (nope + rope)),
                    kv_a_proj_with_mqa=_Counting(hid, kvr + rope),
                    kv_b_proj=_Counting(kvr, h * (nope + v)), o_proj=_Counting(h * v, hid))
        w = mla.MultiHeadLatentAttentionWrapper(
            hid, h, 0.5, nope, rope, v, qr, kvr,
            mla.MLAModules(q_a_layernorm=nn.Identity(), kv_a_layernorm=nn.Identity(),
                           q_proj=None, fused_qkv_a_proj=None, **mods))
        out = w(torch.arange(3), torch.randn(3, hid))
        assert out.shape == (3, hid)
        assert {k: m.calls for k, m in mods.items()} == dict.fromkeys(mods, 1)
        # the projections stay the attention's modules: the wrapper registers none of its own
        assert not list(w.parameters())


def test_fused_moe_runs_the_router_and_shared_experts_it_is_handed():
    """`FusedMoE(gate=self.gate, shared_experts=self.shared_expert)` (vLLM 0.34 qwen3_moe,
    deepseek_v2): the router's logits replace the argument, the shared expert's output is added.
    With zero expert weights the routed part is 0: the output is the shared expert's."""
    with vllm_shim():
        fm = _fresh("vllm.model_executor.layers.fused_moe")
        gate, shared = _Counting(4, 3), _Counting(4, 4)
        moe = fm.FusedMoE(3, 2, 4, 6, gate=gate, shared_experts=shared)
        with torch.no_grad():
            moe.w13_weight.zero_()
            moe.w2_weight.zero_()
        x = torch.randn(5, 4)
        out = moe(x, x)
        assert (gate.calls, shared.calls) == (1, 1)
        assert torch.allclose(out, shared.lin(x))
        g = fm.GateLinear(4, 3, out_dtype=torch.float64)
        assert g(x)[0].dtype == torch.float64


def test_stand_ins_import_and_raise_naming_what_is_missing():
    """Kernels and DeepSeek V3.2's indexer import (deepseek_v2 names them while its classes are
    defined) and raise, naming themselves, only when built or called."""
    import pytest

    with vllm_shim():
        ops = _fresh("vllm._custom_ops")
        idx = _fresh("vllm.model_executor.layers.sparse_attn_indexer")
        envs = _fresh("vllm.envs")
        with pytest.raises(NotImplementedError, match="fused_add_rms_norm"):
            ops.fused_add_rms_norm()
        with pytest.raises(NotImplementedError, match="SparseAttnIndexer"):
            idx.SparseAttnIndexer(1)
        assert envs.VLLM_DCP_Q_REPLICATE is False and not envs.is_set("VLLM_DCP_Q_REPLICATE")


def test_attention_reads_the_steps_kv_when_given_none_and_shares_a_target_layers():
    """vLLM's attention with no new key and value reads the cache of the step (iquest's loop
    attention calls its first loop's layer again with `(q, None, None)`); a layer built with
    `kv_sharing_target_layer_name` reads its target's (gemma3n, gemma4). Keys all zero: token 0
    attends to itself (v0 = [2, 4]), token 1 (causal) equally to both: mean [4, 6]; one kv head
    serves both query heads."""
    with vllm_shim():
        att = _fresh("vllm.model_executor.layers.attention")
        first = att.Attention(2, 2, 1.0, num_kv_heads=1, prefix="model.layers.0.self_attn.attn")
        shared = att.Attention(2, 2, 1.0, num_kv_heads=1, prefix="model.layers.1.self_attn.attn",
                               kv_sharing_target_layer_name="model.layers.0.self_attn.attn")
        q, k, v = torch.randn(2, 4), torch.zeros(2, 2), torch.tensor([[2.0, 4.0], [6.0, 8.0]])
        want = torch.tensor([[2.0, 4.0, 2.0, 4.0], [4.0, 6.0, 4.0, 6.0]])
        assert torch.allclose(first(q, k, v), want)
        assert torch.allclose(first(torch.randn(2, 4), None, None), want)
        assert torch.allclose(shared(torch.randn(2, 4), None, None), want)
        assert list(shared.modules()) == [shared]      # the target stays the other layer's


def test_sparse_gated_gelu_keeps_the_gate_above_its_cut():
    """Gemma 3n's GeluAndMulSparse at sparsity 0.5: the normal quantile is 0, so the cut is the
    gate's mean. Gate [1, 3]: mean 2, relu(gate - 2) = [0, 1]; gelu(0) = 0, gelu(1) = 0.841345;
    times up [5, 2]: [0, 1.682689]."""
    with vllm_shim():
        act = _fresh("vllm.model_executor.layers.activation")
        got = act.GeluAndMulSparse(0.5)(torch.tensor([[1.0, 3.0, 5.0, 2.0]]))
        assert torch.allclose(got, torch.tensor([[0.0, 1.682689]]), atol=1e-5)
        assert torch.equal(act._ACTIVATION_REGISTRY["relu"](torch.tensor([-1.0, 2.0])),
                           torch.tensor([0.0, 2.0]))


def test_what_model_files_run_while_their_classes_are_defined():
    """Triton absent: `@triton.jit` leaves the kernel as it is (gemma4 defines one);
    next_power_of_2(5) = 8. A config key by its first present name (getattr_iter); no MoE
    padding rows; the HPC fused rope never supported on a CPU."""
    with vllm_shim():
        tu = _fresh("vllm.triton_utils")
        cu = _fresh("vllm.config.utils")
        br = _fresh("vllm.model_executor.layers.fused_moe.router.base_router")
        hpc = _fresh("vllm.model_executor.layers.hpc")

        def kernel(x, n: tu.tl.constexpr):
            return x

        # a kernel is defined at import and refuses to launch (no Triton on the shim)
        for k in (tu.triton.jit(kernel), tu.triton.jit(num_warps=1)(kernel)):
            with pytest.raises(NotImplementedError, match="kernel"):
                k[(1,)](1, 2)
        assert tu.triton.next_power_of_2(5) == 8 and tu.triton.next_power_of_2(8) == 8
        cfg = type("C", (), {"expert_intermediate_size": 7})()
        assert cu.getattr_iter(cfg, ("moe_intermediate_size", "expert_intermediate_size")) == 7
        assert cu.getattr_iter(cfg, ("nope",), default_factory=lambda: 3) == 3
        assert br.get_moe_padding_mask(4) is None
        assert hpc.HpcRopeNorm.support(8, 4, 32, "auto") is False


def test_xielu_follows_the_papers_formula_at_its_default_parameters():
    # defaults alpha_p = alpha_n = 0.8, beta = 0.5, eps = -1e-6 (arXiv 2411.13010):
    # x = 2: 0.8 * 4 + 0.5 * 2 = 4.2; x = -1: 0.8 * (e^-1 - 1 + 1) - 0.5 = -0.205696;
    # x = 0 (not > 0): 0.8 * expm1(-1e-6) = -8e-7
    with vllm_shim():
        act = _fresh("vllm.model_executor.layers.activation")
        got = act.XIELU()(torch.tensor([2.0, -1.0, 0.0]))
    assert torch.allclose(got, torch.tensor([4.2, -0.205696, -8e-7]), atol=1e-5)


def test_ernie_vl_rope_rotates_interleaved_pairs_of_the_rotary_part_only():
    # head 4, rotary 4, base 10000: inv_freq [1, 1/100]; position 1: angles 1 and 0.01 on the
    # pairs (x0, x1), (x2, x3) (GPT-J style, is_neox_style=False): q = [1, 0, 0, 1] ->
    # [cos 1, sin 1, -sin 0.01, cos 0.01]
    with vllm_shim():
        rope = _fresh("vllm.model_executor.layers.rotary_embedding.ernie45_vl_rope")
        full = rope.Ernie4_5_VLRotaryEmbedding(4, 4, 64, 10000.0, False, mrope_section=[1, 1, 0])
        q, k = full(torch.tensor([1]), torch.tensor([[1.0, 0.0, 0.0, 1.0]]),
                    torch.tensor([[1.0, 0.0, 0.0, 1.0]]))
        part = rope.Ernie4_5_VLRotaryEmbedding(4, 2, 64, 10000.0, False)
        q2, _ = part(torch.tensor([1]), torch.tensor([[1.0, 0.0, 5.0, 6.0]]),
                     torch.tensor([[1.0, 0.0, 5.0, 6.0]]))
    want = torch.tensor([[0.540302, 0.841471, -0.0099998, 0.99995]])
    assert torch.allclose(q, want, atol=1e-5) and torch.allclose(k, want, atol=1e-5)
    # rotary 2 of 4: angle 1 on (x0, x1); x2, x3 pass through
    assert torch.allclose(q2, torch.tensor([[0.540302, 0.841471, 5.0, 6.0]]), atol=1e-5)


def test_import_time_names_a_model_file_subclasses_or_compares_are_real():
    with vllm_shim():
        moe = _fresh("vllm.model_executor.layers.fused_moe")
        cfg = _fresh("vllm.config")
        tu = _fresh("vllm.utils.torch_utils")

        class Experts(moe.RoutedExperts):       # dbrx's DbrxExperts, created at import
            pass

        assert issubclass(Experts, nn.Module)
        assert cfg.CUDAGraphMode.PIECEWISE != cfg.CUDAGraphMode.NONE
        assert cfg.get_current_vllm_config_or_none() is cfg.get_current_vllm_config()
        # a text-only deployment: chatglm stores it, qwen3_next reads `language_model_only`
        assert cfg.ModelConfig().multimodal_config.language_model_only is True
        assert tu._resolve_layer_name(tu._encode_layer_name("model.layers.0")) == \
            "model.layers.0"
