"""The vLLM shim's plain-torch pieces a model file assembles its own expert GEMM and grouped norm
from (k2_horizon's MoVA value experts: a tile config, the (token, expert) assignment, the
grouped GEMM, `ops.moe_sum`, `ops.rms_norm`), the head counts of QKVParallelLinear, the eager
compile mark and the norm's epsilon name. Inputs are small tensors written here; every expected
value is worked out by hand in the comments (no vLLM code is run or copied)."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from cannbot_prefetch.verify.shims import vllm_shim


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


# A: 2 tokens of width 2; B: 3 experts [N=2, K=2]: identity, swap, twice the identity
A = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
B = torch.stack([torch.eye(2), torch.tensor([[0.0, 1.0], [1.0, 0.0]]), 2 * torch.eye(2)])
IDS = torch.tensor([[1, 2], [0, 1]])               # token 0 -> experts 1, 2; token 1 -> 0, 1
# per pair (token, choice): A[t] @ B[e].T
# (0,0) e1: [2, 1]   (0,1) e2: [2, 4]   (1,0) e0: [3, 4]   (1,1) e1: [4, 3]
PLAIN = torch.tensor([[[2.0, 1.0], [2.0, 4.0]], [[3.0, 4.0], [4.0, 3.0]]])


def _dispatch(fm, C, sorted_ids, expert_ids, padded, weights=None, mul=False, bias=None):
    fm.dispatch_fused_moe_kernel(A, B, C, None, None, None, weights, sorted_ids, expert_ids,
                                 padded, mul, 2, {"BLOCK_SIZE_M": 2}, compute_type=None,
                                 use_fp8_w8a8=False, use_int8_w8a8=False, use_int8_w8a16=False,
                                 use_int4_w4a16=False, per_channel_quant=False, B_bias=bias)
    return C


def test_the_unaligned_assignment_then_the_grouped_gemm():
    with vllm_shim():
        fm = _fresh("vllm.model_executor.layers.fused_moe.fused_moe")
        cfg = fm.try_get_optimal_moe_config((3, 2, 2), (3, 2, 2), 2, None, 2)
        assert cfg["BLOCK_SIZE_M"] == 16            # vLLM's decode default for M <= 32
        sorted_ids, expert_ids, padded = fm._prepare_expert_assignment(
            IDS, cfg, 2, 2, 3, None, ignore_invalid_experts=True)
        # no sorted ids, the 4 pairs' experts in pair order, 4 blocks of 16 rows
        assert sorted_ids is None and expert_ids.tolist() == [1, 2, 0, 1]
        assert padded.tolist() == [64]
        C = torch.empty(2, 2, 2)
        fm.dispatch_fused_moe_kernel(A, B, C, None, None, None, None, sorted_ids, expert_ids,
                                     padded, False, 2, cfg, compute_type=None)
        assert torch.equal(C, PLAIN)


def test_the_aligned_layout_gives_the_same_and_weights_bias_and_missing_experts_apply():
    with vllm_shim():
        fm = _fresh("vllm.model_executor.layers.fused_moe.fused_moe")
        # pairs p = 2 t + k: p0 e1, p1 e2, p2 e0, p3 e1; grouped by expert in blocks of 2,
        # padded with the pair count 4: e0 [2, 4], e1 [0, 3], e2 [1, 4]
        ids, experts, padded = torch.tensor([2, 4, 0, 3, 1, 4]), torch.tensor([0, 1, 2]), \
            torch.tensor([6])
        assert torch.equal(_dispatch(fm, torch.empty(2, 2, 2), ids, experts, padded), PLAIN)
        # routed weights [[0.5, 0.25], [1, 2]] scale each pair; bias 10 on expert 2's first
        # output: (0,1) ([2, 4] + [10, 0]) * 0.25 = [3, 1]
        w = torch.tensor([[0.5, 0.25], [1.0, 2.0]])
        bias = torch.tensor([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0]])
        got = _dispatch(fm, torch.empty(2, 2, 2), ids, experts, padded, w, True, bias)
        assert torch.equal(got, torch.tensor([[[1.0, 0.5], [3.0, 1.0]],
                                              [[3.0, 4.0], [8.0, 6.0]]]))
        # expert 2 not held (-1): its pair (0,1) is zeros, the others as before
        got = _dispatch(fm, torch.full((2, 2, 2), 7.0), ids, torch.tensor([0, 1, -1]), padded)
        assert torch.equal(got, torch.tensor([[[2.0, 1.0], [0.0, 0.0]],
                                              [[3.0, 4.0], [4.0, 3.0]]]))


def test_quantised_paths_raise_and_plain_inputs_pass_through():
    with vllm_shim():
        fm = _fresh("vllm.model_executor.layers.fused_moe.fused_moe")
        cfgmod = _fresh("vllm.model_executor.layers.fused_moe.config")
        utils = _fresh("vllm.model_executor.layers.fused_moe.utils")
        assert fm._get_config_quant_dtype(use_fp8_w8a8=False, use_int8_w8a8=False) is None
        with pytest.raises(NotImplementedError, match="quantised"):
            fm._get_config_quant_dtype(use_fp8_w8a8=True, use_int8_w8a8=False)
        x = torch.ones(2, 3)
        got, scale = utils.moe_kernel_quantize_input(A=x, A_scale=None, quant_dtype=None,
                                                     per_act_token_quant=False)
        assert got is x and scale is None
        with pytest.raises(NotImplementedError, match="moe_kernel_quantize_input"):
            utils.moe_kernel_quantize_input(x, None, torch.int8, False)
        # the scheme's name: the first flag set, "float32" for plain float32 weights, else None
        assert cfgmod._get_config_dtype_str(torch.bfloat16) is None
        assert cfgmod._get_config_dtype_str(dtype=torch.float32) == "float32"
        assert cfgmod._get_config_dtype_str(torch.bfloat16, use_int8_w8a16=True) == "int8_w8a16"
        with pytest.raises(NotImplementedError):
            cfgmod.some_other_helper()


def test_moe_sum_and_rms_norm_write_in_place():
    with vllm_shim():
        ops = _fresh("vllm._custom_ops")
        out = torch.empty(1, 2)
        ops.moe_sum(torch.tensor([[[1.0, 2.0], [3.0, 4.0]]]), out)
        assert out.tolist() == [[4.0, 6.0]]
        # x = [3, 4]: mean square 12.5, x / sqrt(12.5) = [0.848528, 1.131371]; weight [1, 2]
        y = torch.empty(1, 2)
        ops.rms_norm(y, torch.tensor([[3.0, 4.0]]), torch.tensor([1.0, 2.0]), 0.0)
        assert torch.allclose(y, torch.tensor([[0.848528, 2.262742]]), atol=1e-6)
        with pytest.raises(NotImplementedError, match="fused_add_rms_norm"):
            ops.fused_add_rms_norm()


def test_qkv_head_counts_compile_mark_and_norm_epsilon():
    with vllm_shim():
        lin = _fresh("vllm.model_executor.layers.linear")
        qkv = lin.QKVParallelLinear(256, 32, 8, 4, bias=False)
        # 8 query heads + 4 key + 4 value heads of 32: 512 output rows; per rank at TP 1
        assert tuple(qkv.weight.shape) == (512, 256)
        assert (qkv.num_heads, qkv.num_kv_heads, qkv.total_num_kv_heads, qkv.head_size) == \
            (8, 4, 4, 32)
        assert lin.QKVParallelLinear(64, 16, 4).num_kv_heads == 4    # kv heads default to q's
        dec = _fresh("vllm.compilation.decorators")

        @dec.support_torch_compile
        class Plain(torch.nn.Module):
            pass

        @dec.support_torch_compile(dynamic_arg_dims={"x": 0})
        class WithArgs(torch.nn.Module):
            pass

        assert Plain().do_not_compile is True and WithArgs().do_not_compile is True
        ln = _fresh("vllm.model_executor.layers.layernorm")
        norm = ln.RMSNorm(4, eps=1e-5)
        assert norm.variance_epsilon == 1e-5
        norm.variance_epsilon = 0.5                    # set under vLLM's name: the same value
        assert norm.eps == 0.5
