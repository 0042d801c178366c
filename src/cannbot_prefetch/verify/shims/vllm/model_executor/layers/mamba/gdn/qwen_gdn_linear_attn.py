"""Qwen3-Next's gated delta-net (vLLM's `QwenGatedDeltaNetAttention`) built from vLLM's
constructor arguments, shape-faithful only: `in_proj_qkvz` (hidden -> q, k, v, z), `in_proj_ba`
(hidden -> b, a) and `out_proj` (value -> hidden) built as vLLM builds them at one rank, and
`forward(hidden_states)` returning the output as vLLM's does; the convolution, delta-rule
recurrence and gated norm are replaced by `abstract.gated_mix` of v and z (vLLM's own code, never
rewritten by the tool)."""
from ...linear import MergedColumnParallelLinear, RowParallelLinear
from ..abstract import gated_mix
from .base import GatedDeltaNetAttention


class QwenGatedDeltaNetAttention(GatedDeltaNetAttention):
    def __init__(self, config, vllm_config, prefix="", gqa_interleaved_layout=False,
                 reduce_results=True, overlap_ba_proj=False, fused_gdn_gated_rms_norm=None):
        super().__init__(config, vllm_config, prefix)
        self.gqa_interleaved_layout = gqa_interleaved_layout
        self.in_proj_qkvz = self.create_qkvz_proj(self.hidden_size, self.key_dim, self.value_dim,
                                                  self.quant_config, f"{prefix}.in_proj_qkvz")
        self.in_proj_ba = self.create_ba_proj(self.hidden_size, self.num_v_heads,
                                              self.quant_config, f"{prefix}.in_proj_ba")
        self.out_proj = RowParallelLinear(self.value_dim, self.hidden_size, bias=False,
                                          reduce_results=reduce_results,
                                          prefix=f"{prefix}.out_proj")

    def create_qkvz_proj(self, hidden_size, key_dim, value_dim, quant_config, prefix):
        """One fused output (interleaved layout, Qwen3-Next) or four (Qwen3.5), as vLLM's."""
        sizes = [2 * key_dim + 2 * value_dim] if self.gqa_interleaved_layout else \
            [key_dim, key_dim, value_dim, value_dim]
        return MergedColumnParallelLinear(hidden_size, sizes, bias=False, prefix=prefix)

    def create_ba_proj(self, hidden_size, num_v_heads, quant_config, prefix):
        sizes = [2 * num_v_heads] if self.gqa_interleaved_layout else [num_v_heads] * 2
        return MergedColumnParallelLinear(hidden_size, sizes, bias=False, prefix=prefix)

    def forward(self, hidden_states):
        qkvz, _ = self.in_proj_qkvz(hidden_states)
        self.in_proj_ba(hidden_states)
        k, v = self.key_dim, self.value_dim
        out, _ = self.out_proj(gated_mix(qkvz[..., 2 * k:2 * k + v], qkvz[..., 2 * k + v:]))
        return out
