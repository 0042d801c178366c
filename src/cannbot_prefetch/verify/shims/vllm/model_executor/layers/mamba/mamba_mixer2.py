"""Mamba-2's mixer (vLLM's `MambaMixer2`) built from vLLM's constructor arguments, shape-faithful
only: `in_proj` (hidden -> gate, x, B, C, dt: intermediate x 2 + 2 x groups x state + heads) and
`out_proj` (intermediate -> hidden) built as vLLM builds them at one rank, `forward` returning
the output as vLLM's does; the convolution, SSD scan and gated norm are replaced by
`abstract.gated_mix` (vLLM's own code, never rewritten by the tool)."""
from ..linear import MergedColumnParallelLinear, RowParallelLinear
from .abstract import MambaBase, gated_mix


class MambaMixer2(MambaBase):
    def __init__(self, hidden_size, ssm_state_size, conv_kernel_size, intermediate_size,
                 use_conv_bias, use_bias, n_groups=1, num_heads=128, head_dim=64,
                 rms_norm_eps=1e-5, activation="silu", use_rms_norm=True, model_config=None,
                 cache_config=None, quant_config=None, prefix=""):
        super().__init__()
        self.prefix, self.intermediate_size = prefix, intermediate_size
        self.num_heads, self.head_dim = num_heads, head_dim
        self.n_groups, self.ssm_state_size = n_groups, ssm_state_size       # one rank
        self.conv_kernel_size, self.activation = conv_kernel_size, activation
        self.tp_size, self.tped_intermediate_size = 1, intermediate_size
        groups = n_groups * ssm_state_size
        self.in_proj = MergedColumnParallelLinear(
            hidden_size, [intermediate_size, intermediate_size, groups, groups, num_heads],
            bias=use_bias, prefix=f"{prefix}.in_proj")
        self.out_proj = RowParallelLinear(intermediate_size, hidden_size, bias=use_bias,
                                          prefix=f"{prefix}.out_proj")

    def forward(self, hidden_states, mup_vector=None):
        projected, _ = self.in_proj(hidden_states)
        if mup_vector is not None:
            projected = projected * mup_vector
        i = self.intermediate_size
        out, _ = self.out_proj(gated_mix(projected[..., i:2 * i], projected[..., :i]))
        return out
