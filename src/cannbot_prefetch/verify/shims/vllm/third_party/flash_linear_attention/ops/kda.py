"""Kimi Delta Attention (KDA) kernels of FLA as vLLM vendors them, for a model file that runs
them itself (bailing_moe_v3). What a TP-1 decode step on the shim runs outside the state
update is plain torch with the kernels' shapes: the gate (`fused_kda_gate`) and the gated
output norm (`FusedRMSNormGated`). The state update itself (`chunk_kda` for prefill,
`fused_recurrent_kda*` for decode) reads the state cache only when the step carries attention
metadata, which the shim's steps never do (vLLM's profile run skips it the same way): named
stand-ins that raise when called (`vllm._standin`)."""
import torch
import torch.nn.functional as F
from torch import nn

from vllm._standin import standins

__getattr__ = standins(__name__)


def fused_kda_gate(g, A_log, head_k_dim, g_bias=None, b=None, beta=1.0, threshold=20.0,
                   lower_bound=None, **_):
    """The per-channel decay of KDA, `[..., H*K] -> [..., H, K]` in float32: with the bias
    added, `-exp(A_log) * softplus(g)` per head, or with a lower bound (FLA's safe gate)
    `lower_bound * sigmoid(exp(A_log) * g)`, which keeps the log-decay in (lower_bound, 0).
    The formulas are FLA's reference gate (fla/ops/kda/gate.py); only its shape reaches the
    shim's step, since the state update that consumes it never runs here."""
    g = g.float()
    if g_bias is not None:
        g = g + g_bias.float()
    g = g.unflatten(-1, (-1, head_k_dim))
    a = A_log.float().reshape(-1, 1).exp()       # one decay rate per head
    if lower_bound is None:
        return -a * F.softplus(g, beta=beta, threshold=threshold)
    return lower_bound * torch.sigmoid(a * g)


class FusedRMSNormGated(nn.Module):
    """RMS norm over the last dimension (a head's values) times an activation of the gate:
    `rmsnorm(x) * weight * act(g)`, `act` sigmoid or silu as the model asks (FLA's
    FusedRMSNormGated, normalising before the gate)."""

    def __init__(self, hidden_size, eps=1e-5, activation="swish", elementwise_affine=True,
                 device=None, dtype=None, **_):
        super().__init__()
        if activation not in ("swish", "silu", "sigmoid"):
            raise NotImplementedError(f"FusedRMSNormGated activation {activation!r} is not "
                                      "provided by cannbot-prefetch's vLLM shim")
        self.eps = eps
        self.activation = activation
        self.weight = nn.Parameter(torch.ones(hidden_size)) if elementwise_affine else None

    def forward(self, x, g, residual=None, prenorm=False, residual_in_fp32=False):
        if residual is not None:
            x = x + residual
        y = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype)
        if self.weight is not None:
            y = y * self.weight
        gate = torch.sigmoid(g) if self.activation == "sigmoid" else F.silu(g)
        out = y * gate
        return (out, x) if prenorm else out
