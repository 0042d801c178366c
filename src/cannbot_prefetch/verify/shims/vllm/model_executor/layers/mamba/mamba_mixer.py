"""Mamba-1's mixer (vLLM's `MambaMixer`) built from vLLM's constructor arguments, shape-faithful
only: `in_proj` (hidden -> 2 x intermediate, x and the gate) and `out_proj` (intermediate ->
hidden) built as vLLM builds them, the convolution and selective scan replaced by
`abstract.gated_mix` (the mixer's internals are vLLM's code, never rewritten by the tool)."""
from ..linear import MergedColumnParallelLinear, RowParallelLinear
from .abstract import MambaBase, gated_mix


class MambaMixer(MambaBase):
    def __init__(self, hidden_size, ssm_state_size, conv_kernel_size, intermediate_size,
                 time_step_rank, use_conv_bias, use_bias, use_rms_norm,
                 rms_norm_has_weight=True, rms_norm_eps=1e-5, activation="silu",
                 is_lora_enabled=False, model_config=None, cache_config=None, prefix=""):
        super().__init__()
        self.prefix, self.intermediate_size = prefix, intermediate_size
        self.in_proj = MergedColumnParallelLinear(hidden_size, [intermediate_size] * 2,
                                                  bias=use_bias, prefix=f"{prefix}.in_proj")
        self.out_proj = RowParallelLinear(intermediate_size, hidden_size, bias=use_bias,
                                          prefix=f"{prefix}.out_proj")

    def forward(self, hidden_states, output):
        """Writes into `output` as vLLM's custom op does (the caller allocates it)."""
        x, gate = self.in_proj(hidden_states)[0].chunk(2, dim=-1)
        output.copy_(self.out_proj(gated_mix(x, gate))[0])
