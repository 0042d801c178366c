"""Fused MoE at TP 1: `w13_weight` [E, 2I, H], `w2_weight` [E, H, I], top-k softmax routing
computed densely; GateLinear is a replicated linear."""
import torch
from torch import nn

from ..linear import ReplicatedLinear


class GateLinear(ReplicatedLinear):
    """The router: a replicated linear whose logits' dtype may be set (vLLM's `out_dtype`,
    fused_moe/router/gate_linear.py); the shim computes in the weight's dtype and casts."""

    def __init__(self, input_size, output_size, bias=False, out_dtype=None, **k):
        super().__init__(input_size, output_size, bias, **k)
        self.out_dtype = out_dtype

    def set_out_dtype(self, dtype) -> None:
        self.out_dtype = dtype

    def forward(self, x):
        out = super().forward(x)
        if self.out_dtype is None:
            return out
        if isinstance(out, tuple):
            return (out[0].to(self.out_dtype), *out[1:])
        return out.to(self.out_dtype)


class FusedMoE(nn.Module):
    def __init__(self, num_experts, top_k, hidden_size, intermediate_size, renormalize=True,
                 *, gate=None, shared_experts=None, **_):
        super().__init__()
        self.top_k, self.renormalize = top_k, renormalize
        # vLLM's FusedMoE runs the router it is handed (`gate=self.gate`: the logits argument is
        # then the hidden states) and the shared experts (`shared_experts=`), adding their output
        # (vLLM 0.34 fused_moe/layer.py); the modules stay the model's own
        object.__setattr__(self, "_gate", gate)
        object.__setattr__(self, "_shared", shared_experts)
        self.w13_weight = nn.Parameter(torch.randn(num_experts, 2 * intermediate_size,
                                                   hidden_size) * 0.05)
        self.w2_weight = nn.Parameter(torch.randn(num_experts, hidden_size,
                                                  intermediate_size) * 0.05)

    def forward(self, hidden_states, router_logits):
        if self._gate is not None:
            router_logits = self._gate(hidden_states)
            router_logits = router_logits[0] if isinstance(router_logits, tuple) else router_logits
        out = self._routed(hidden_states, router_logits)
        if self._shared is not None:
            shared = self._shared(hidden_states)
            out = out + (shared[0] if isinstance(shared, tuple) else shared)
        return out

    def _routed(self, hidden_states, router_logits):
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


class RoutedExperts(nn.Module):
    """vLLM's container of a FusedMoE's expert weights, a base class a model file subclasses
    for its own weight loader (dbrx's DbrxExperts, handed as `routed_experts_cls=`). The shim's
    FusedMoE holds `w13_weight` / `w2_weight` itself and ignores that argument, so nothing
    builds this at TP 1; defined (not a stand-in) because a subclass is created at import."""
