"""MiniMax's RMSNorm over a whole (TP-sharded) projection width at TP 1: the mean square over
the last dim, scaled by `weight` (vLLM's minimax_rms_norm/rms_norm_tp.py; at one rank no
variance all-reduce)."""
import torch
from torch import nn


class MiniMaxText01RMSNormTP(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, weight_shard_world_size=None,
                 weight_shard_rank=None, **_):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size // (weight_shard_world_size or 1)))
        self.variance_epsilon = eps

    def forward(self, x, residual=None):
        dtype = x.dtype
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (y * self.weight).to(dtype)

    @staticmethod
    def forward_qk(q_norm, k_norm, q, k):
        return q_norm(q), k_norm(k)

    @staticmethod
    def forward_qkv(q_norm, k_norm, qkv, q_size, kv_size):
        q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
        q, k = MiniMaxText01RMSNormTP.forward_qk(q_norm, k_norm, q, k)
        return q, k, v
