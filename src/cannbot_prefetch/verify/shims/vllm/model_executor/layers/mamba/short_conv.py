"""LFM2's gated short convolution (vLLM's `ShortConv`) built from vLLM's constructor arguments,
shape-faithful only: `in_proj` (dim -> B, C, x) and `out_proj` (dim -> dim) built as vLLM builds
them, the causal convolution over the cached window replaced by `abstract.gated_mix` of `B * x`
gated by C (vLLM's own code, never rewritten by the tool)."""
from ..linear import MergedColumnParallelLinear, RowParallelLinear
from .abstract import MambaBase, gated_mix


class ShortConv(MambaBase):
    def __init__(self, config, dim, layer_idx, model_config=None, cache_config=None,
                 quant_config=None, prefix=""):
        super().__init__()
        self.config, self.layer_idx, self.conv_dim, self.prefix = config, layer_idx, dim, prefix
        bias = getattr(config, "conv_bias", False)
        self.in_proj = MergedColumnParallelLinear(dim, [dim] * 3, bias=bias,
                                                  prefix=f"{prefix}.in_proj")
        self.out_proj = RowParallelLinear(dim, dim, bias=bias, prefix=f"{prefix}.out_proj")

    def forward(self, hidden_states, output):
        """Writes into `output` as vLLM's custom op does (the caller allocates it)."""
        b, c, x = self.in_proj(hidden_states)[0].chunk(3, dim=-1)
        output.copy_(self.out_proj(gated_mix(b * x, c))[0])
