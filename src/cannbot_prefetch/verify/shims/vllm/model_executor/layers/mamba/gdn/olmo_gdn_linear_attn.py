"""OLMo-hybrid's gated delta-net (vLLM's `OlmoHybridGatedDeltaNetAttention`) built from vLLM's
constructor arguments, shape-faithful only: `in_proj_qkvg` (hidden -> q, k, v, gate), `b_proj`,
`a_proj` and `o_proj` (value -> hidden) built as vLLM builds them at one rank; the convolution,
delta-rule recurrence and gated norm are replaced by `abstract.gated_mix` of v and the gate
(vLLM's own code, never rewritten by the tool)."""
from ...linear import ColumnParallelLinear, MergedColumnParallelLinear, RowParallelLinear
from ..abstract import gated_mix
from .base import GatedDeltaNetAttention


class OlmoHybridGatedDeltaNetAttention(GatedDeltaNetAttention):
    def __init__(self, config, vllm_config, prefix=""):
        super().__init__(config, vllm_config, prefix=prefix)
        k, v = self.key_dim, self.value_dim
        self.in_proj_qkvg = MergedColumnParallelLinear(self.hidden_size, [k, k, v, v],
                                                       bias=False,
                                                       prefix=f"{prefix}.in_proj_qkvg")
        self.b_proj = ColumnParallelLinear(self.hidden_size, self.num_v_heads, bias=False,
                                           prefix=f"{prefix}.b_proj")
        self.a_proj = ColumnParallelLinear(self.hidden_size, self.num_v_heads, bias=False,
                                           prefix=f"{prefix}.a_proj")
        self.o_proj = RowParallelLinear(v, self.hidden_size, bias=False,
                                        prefix=f"{prefix}.o_proj")

    def forward(self, hidden_states, output):
        """Writes into `output` as vLLM's custom op does (the caller allocates it)."""
        qkvg, _ = self.in_proj_qkvg(hidden_states)
        k, v = self.key_dim, self.value_dim
        value, gate = qkvg[..., 2 * k:2 * k + v], qkvg[..., 2 * k + v:]
        output.copy_(self.o_proj(gated_mix(value, gate))[0])
