"""Kimi K3's ops as a model file imports them (vllm/models/kimi_k3/nvidia/ops): the attention
residual mix in plain torch (`attn_res.py`); the others are stand-ins (`vllm._standin`)."""
from vllm._standin import standins

from .attn_res import attn_res

__getattr__ = standins(__name__)
__all__ = ["attn_res"]
