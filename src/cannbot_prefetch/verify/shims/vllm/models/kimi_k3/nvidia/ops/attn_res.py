"""Kimi K3's attention residual (AttnRes) in plain torch, as vLLM 0.34's Triton kernel computes it
(vllm/models/kimi_k3/nvidia/ops/attn_res.py `_attn_res_kernel`, read for this shim, not copied):
the prefix (plus `delta`, written back to `prefix`) is optionally stored as block
`block_write_idx`; the output mixes blocks 0..num_blocks-1 and the prefix with softmax weights
whose logits are each source's dot product with `norm_weight * qk_weight`, divided by its RMS;
an optional RMS norm with `output_norm_weight` follows. float32 inside, as the kernel."""
import torch


def attn_res(prefix: torch.Tensor, delta: torch.Tensor | None, blocks: torch.Tensor,
             norm_weight: torch.Tensor, qk_weight: torch.Tensor,
             output_norm_weight: torch.Tensor | None, num_blocks: int, block_write_idx: int,
             eps: float, output_norm_eps: float) -> torch.Tensor:
    updated = prefix.float()
    if delta is not None:
        updated = updated + delta.float()
        prefix.copy_(updated.to(prefix.dtype))       # the kernel stores the sum in place
        updated = prefix.float()
    if block_write_idx >= 0:
        blocks[:, block_write_idx].copy_(updated.to(blocks.dtype))
    if num_blocks == 0:
        mixed = updated                                # one source: its softmax weight is 1
    else:
        values = torch.cat([blocks[:, :num_blocks].float(), updated[:, None]], dim=1)
        weight = norm_weight.float() * qk_weight.float()
        rstd = torch.rsqrt(values.pow(2).mean(-1) + eps)
        logits = (values * weight).sum(-1) * rstd     # [tokens, sources]
        mixed = (torch.softmax(logits, dim=-1)[..., None] * values).sum(1)
    if output_norm_weight is not None:
        rstd = torch.rsqrt(mixed.pow(2).mean(-1, keepdim=True) + output_norm_eps)
        mixed = mixed * rstd * output_norm_weight.float()
    return mixed.to(prefix.dtype)
