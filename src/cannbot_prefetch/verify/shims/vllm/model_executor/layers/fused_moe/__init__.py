"""Fused MoE at TP 1: `w13_weight` [E, 2I, H], `w2_weight` [E, H, I], top-k softmax routing
computed densely; GateLinear is a replicated linear."""
import torch
from torch import nn

from ..linear import ReplicatedLinear


class GateLinear(ReplicatedLinear):
    def __init__(self, input_size, output_size, bias=False, **k):
        super().__init__(input_size, output_size, bias, **k)


class FusedMoE(nn.Module):
    def __init__(self, num_experts, top_k, hidden_size, intermediate_size, renormalize=True,
                 **_):
        super().__init__()
        self.top_k, self.renormalize = top_k, renormalize
        self.w13_weight = nn.Parameter(torch.randn(num_experts, 2 * intermediate_size,
                                                   hidden_size) * 0.05)
        self.w2_weight = nn.Parameter(torch.randn(num_experts, hidden_size,
                                                  intermediate_size) * 0.05)

    def forward(self, hidden_states, router_logits):
        w = torch.softmax(router_logits.float(), dim=-1)
        top, idx = torch.topk(w, self.top_k, dim=-1)
        if self.renormalize:
            top = top / top.sum(-1, keepdim=True)
        out = torch.zeros_like(hidden_states)
        for e in range(self.w13_weight.shape[0]):
            hit = (idx == e)
            if not hit.any():
                continue
            gu = hidden_states @ self.w13_weight[e].t()
            d = gu.shape[-1] // 2
            y = (torch.nn.functional.silu(gu[..., :d]) * gu[..., d:]) @ self.w2_weight[e].t()
            out = out + y * (top * hit).sum(-1, keepdim=True).to(y.dtype)
        return out


FusedMoEFactory = FusedMoE
SharedFusedMoE = FusedMoE


def fused_moe_make_expert_params_mapping(*_, **__):
    return []


MoERunner = FusedMoE          # the type annotations name it
