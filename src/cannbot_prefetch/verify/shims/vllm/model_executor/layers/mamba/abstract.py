"""vLLM's base of state-space / linear-attention mixers (`MambaBase`): a plain module here, no
state cache (one decode step on the shim keeps no state between steps), and the one stand-in
token mix every shim mixer uses in place of its recurrence."""
import torch
from torch import nn


class MambaBase(nn.Module):
    """Base of the mixer layers; vLLM's binds a state cache to it, the shim keeps none."""
    kv_cache: tuple = ()
    supports_dcp: bool = False
    use_replayssm: bool = False
    use_flashinfer_replayssm: bool = False
    state_alignment: int = 1

    def bind_kv_cache(self, kv_cache) -> None:
        self.kv_cache = (kv_cache,)


def gated_mix(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """`x * silu(gate)`: what every shim mixer computes in place of its convolution and state
    recurrence. Deterministic and the width the mixer's output projection takes, NOT the
    layer's real math: a mixer's internals are vLLM's own code, which cannbot-prefetch never
    rewrites, so verify needs only its shape (docs/limitations.md)."""
    return x * nn.functional.silu(gate)
