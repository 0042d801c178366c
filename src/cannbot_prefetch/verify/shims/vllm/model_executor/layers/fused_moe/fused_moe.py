"""vllm.model_executor.layers.fused_moe.fused_moe as a model file imports it. `fused_experts` is
the shim's plain-torch one; the pieces a model file assembles its own expert GEMM from
(k2_horizon's value experts: a tile config, the (token, expert) assignment, the grouped GEMM)
are plain torch over the same tensors and layouts, unquantised only (a quantisation flag
raises); other names are stand-ins that raise when called (`vllm._standin`)."""
import torch

from vllm._standin import standins
from vllm.model_executor.layers.fused_moe import fused_experts  # noqa: F401

# the tile config vLLM's get_default_config gives unquantised weights at a decode step's batch
# (M <= 32 tokens: BLOCK_SIZE_M 16, N 64, K 128, no grouping, 4 warps, 4 stages; vLLM 0.34
# fused_moe.py). Only BLOCK_SIZE_M means anything here: the row block of the aligned layout
DECODE_TILES = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                "SPLIT_K": 1, "num_warps": 4, "num_stages": 4}


def _unquantised(what: str, *flags) -> None:
    if any(flags):
        raise NotImplementedError(f"{what} with quantised weights or activations is not "
                                  "provided by cannbot-prefetch's vLLM shim")


def try_get_optimal_moe_config(w1_shape, w2_shape, top_k, dtype, M, block_shape=None):
    """The tile config (no tuned files on the shim's CPU platform: the decode default)."""
    _unquantised("try_get_optimal_moe_config", block_shape)
    return dict(DECODE_TILES)


def _get_config_quant_dtype(use_fp8_w8a8, use_int8_w8a8):
    """None: activations are not quantised (the only case the shim runs)."""
    _unquantised("_get_config_quant_dtype", use_fp8_w8a8, use_int8_w8a8)
    return None


def _prepare_expert_assignment(topk_ids, config, num_tokens, top_k_num, global_num_experts,
                               expert_map, *, use_int8_w8a16=False, use_int4_w4a16=False,
                               block_shape=None, ignore_invalid_experts=False, **_):
    """(sorted_token_ids, expert_ids, num_tokens_post_padded) in vLLM's unaligned form, which it
    takes when few (token, expert) pairs meet many experts: no sorted ids (None), one block per
    pair in pair order (pair p = token p // top_k's p % top_k-th choice), its expert id
    (global ids mapped through `expert_map`, -1 for an expert not held), and pairs x
    BLOCK_SIZE_M padded rows."""
    _unquantised("_prepare_expert_assignment", use_int8_w8a16, use_int4_w4a16)
    ids = topk_ids.reshape(-1)
    if expert_map is not None:
        ids = expert_map[ids.long()]
    padded = torch.full((1,), ids.numel() * config["BLOCK_SIZE_M"], dtype=torch.int32,
                        device=topk_ids.device)
    return None, ids, padded


def _pairs(sorted_token_ids, expert_ids, num_tokens_post_padded, block_m, pairs):
    """[(pair, expert)] the kernel's blocks cover: with sorted ids (vLLM's aligned layout),
    block b holds rows sorted_token_ids[b*BM:(b+1)*BM] of expert expert_ids[b], rows >= the
    pair count being padding; without, block p is pair p of expert expert_ids[p]."""
    blocks = int(num_tokens_post_padded.reshape(-1)[0]) // block_m
    if sorted_token_ids is None:
        return [(p, int(expert_ids[p])) for p in range(min(blocks, pairs))]
    out = []
    for b in range(blocks):
        rows = sorted_token_ids[b * block_m:(b + 1) * block_m].tolist()
        out += [(r, int(expert_ids[b])) for r in rows if r < pairs]
    return out


def dispatch_fused_moe_kernel(A, B, C, A_scale, B_scale, B_zp, topk_weights, sorted_token_ids,
                              expert_ids, num_tokens_post_padded, mul_routed_weight, top_k,
                              config, compute_type=None, use_fp8_w8a8=False,
                              use_int8_w8a8=False, use_int8_w8a16=False, use_int4_w4a16=False,
                              per_channel_quant=False, block_shape=None, B_bias=None, **_):
    """The grouped GEMM in place: for each (token, expert) pair p the kernel's blocks cover,
    C[p // top_k, p % top_k] = A[p // top_k] @ B[e].T (+ B_bias[e]) (x topk_weights[p] when
    `mul_routed_weight`); an expert id -1 (not held) writes zeros. A [M, K], B [E, N, K],
    C [M, top_k, N]."""
    _unquantised("dispatch_fused_moe_kernel", use_fp8_w8a8, use_int8_w8a8, use_int8_w8a16,
                 use_int4_w4a16, A_scale is not None, B_scale is not None, B_zp is not None)
    rows = C.view(-1, C.shape[-1])
    weights = None if topk_weights is None else topk_weights.reshape(-1)
    for p, e in _pairs(sorted_token_ids, expert_ids, num_tokens_post_padded,
                       config["BLOCK_SIZE_M"], rows.shape[0]):
        if e < 0:
            rows[p] = 0
            continue
        y = A[p // top_k].float() @ B[e].float().t()
        if B_bias is not None:
            y = y + B_bias[e].float()
        if mul_routed_weight:
            y = y * weights[p].float()
        rows[p] = y.to(rows.dtype)


__getattr__ = standins(__name__)
