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
                 *, gate=None, shared_experts=None, activation="silu", **_):
        super().__init__()
        self.top_k, self.renormalize = top_k, renormalize
        # a non-gated activation (`activation_without_mul`: nemotron_h's relu2) has no up half:
        # w13 holds I rows, not 2I, as vLLM's (fused_moe/activation.py)
        self.gated = not str(activation).endswith("_no_mul")
        self.act = _NO_MUL.get(str(activation), nn.functional.silu)
        # vLLM's FusedMoE runs the router it is handed (`gate=self.gate`: the logits argument is
        # then the hidden states) and the shared experts (`shared_experts=`), adding their output
        # (vLLM 0.34 fused_moe/layer.py); the modules stay the model's own
        object.__setattr__(self, "_gate", gate)
        object.__setattr__(self, "_shared", shared_experts)
        rows = (1 + self.gated) * intermediate_size
        self.w13_weight = nn.Parameter(torch.randn(num_experts, rows, hidden_size) * 0.05)
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
            h = torch.nn.functional.silu(gu[..., :d]) * gu[..., d:] if self.gated else self.act(gu)
            y = h @ self.w2_weight[e].t()
            out = out + y * (top * hit).sum(-1, keepdim=True).to(y.dtype)
        return out


FusedMoEFactory = FusedMoE
SharedFusedMoE = FusedMoE


def fused_moe_make_expert_params_mapping(*_, **__):
    return []


MoERunner = FusedMoE          # the type annotations name it


def activation_without_mul(activation: str) -> str:
    """The non-gated variant's name (vLLM's fused_moe/activation.py: "relu2" -> "relu2_no_mul")."""
    return f"{activation}_no_mul"


# the non-gated expert activations by vLLM's names
_NO_MUL = {"relu2_no_mul": lambda x: torch.relu(x).square(),
           "silu_no_mul": nn.functional.silu, "gelu_no_mul": nn.functional.gelu}


class MoEActivation:
    """vLLM's MoE activation names (fused_moe/activation.py is an Enum; a plain namespace of the
    same values here: model files only pass a member on)."""
    SILU = "silu"
    GELU = "gelu"
    GELU_TANH = "gelu_tanh"
    RELU2 = "relu2"
    SWIGLUOAI = "swigluoai"
    SILU_NO_MUL = "silu_no_mul"
    GELU_NO_MUL = "gelu_no_mul"
    GELU_TANH_NO_MUL = "gelu_tanh_no_mul"
    RELU2_NO_MUL = "relu2_no_mul"


def fused_topk(hidden_states, gating_output, topk, renormalize, indices_type=None,
               scoring_func="softmax"):
    """(weights, ids, token_expert_indices) of the top `topk` experts per token, softmax or
    sigmoid scores (vLLM's fused_topk_router.fused_topk), computed in float32."""
    g = gating_output.float()
    scores = torch.sigmoid(g) if scoring_func == "sigmoid" else torch.softmax(g, dim=-1)
    w, ids = torch.topk(scores, topk, dim=-1)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return w, ids.to(indices_type or torch.int32), ids.to(torch.int32)


def _moe_act(name, x):
    name = getattr(name, "value", name) or "silu"
    if str(name).endswith("_no_mul"):
        return _NO_MUL.get(str(name), nn.functional.gelu)(x)     # the non-gated table above
    d = x.shape[-1] // 2
    act = {"gelu": torch.nn.functional.gelu,
           "gelu_tanh": lambda y: torch.nn.functional.gelu(y, approximate="tanh"),
           "relu2": lambda y: torch.relu(y) ** 2}.get(str(name), torch.nn.functional.silu)
    return act(x[..., :d]) * x[..., d:]


def fused_experts(hidden_states, w1, w2, topk_weights, topk_ids, activation="silu",
                  apply_router_weight_on_input=False, global_num_experts=-1, expert_map=None,
                  quant_config=None, **_):
    """Routed experts densely in plain torch: per expert e, act(x @ w1[e].T) @ w2[e].T weighted
    by the token's routing weight for e (vLLM's fused_experts: w1 [E, 2I, H] (or [E, I, H] for
    a `_no_mul` activation), w2 [E, H, I]); every expert's weights are read."""
    out = torch.zeros_like(hidden_states)
    for e in range(w1.shape[0]):
        gu = hidden_states @ w1[e].t()
        y = _moe_act(activation, gu) @ w2[e].t()
        weight = (topk_weights * (topk_ids == e)).sum(-1, keepdim=True)
        out = out + y * weight.to(y.dtype)
    return out


class _MoEConfig:
    """What a model file reads of vLLM's FusedMoEConfig (`experts.moe_config.hidden_dim`, the
    runner's padded width: the hidden size itself at TP 1 without padding)."""

    def __init__(self, hidden_dim: int, num_experts: int):
        self.hidden_dim, self.num_experts = hidden_dim, num_experts


# longcat_flash reads `self.experts.moe_config.hidden_dim`; its router's logits also cover its
# weightless "zero" experts (ids >= E), which `_routed` leaves out: only the E experts with
# weights are computed (shape-faithful; the identity experts add no weights to read)
FusedMoE.moe_config = property(lambda self: _MoEConfig(self.w13_weight.shape[-1],
                                                       self.w13_weight.shape[0]))


class RoutedExperts(nn.Module):
    """vLLM's container of a FusedMoE's expert weights, a base class a model file subclasses
    for its own weight loader (dbrx's DbrxExperts, handed as `routed_experts_cls=`). The shim's
    FusedMoE holds `w13_weight` / `w2_weight` itself and ignores that argument, so nothing
    builds this at TP 1; defined (not a stand-in) because a subclass is created at import."""
