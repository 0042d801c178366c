"""Bailing-MoE-linear's linear attention (vLLM's `BailingMoELinearAttention`) built from vLLM's
constructor arguments, shape-faithful only: `query_key_value` (hidden -> q, k, v, MHA), `g_proj`
(hidden -> inner) and `dense` (inner -> hidden) built as vLLM builds them at one rank; the
rotary embedding, decayed linear-attention recurrence and group norm are replaced by
`abstract.gated_mix` of v and the gate (vLLM's own code, never rewritten by the tool)."""
import copy

from ...linear import ColumnParallelLinear, QKVParallelLinear, RowParallelLinear
from ..abstract import gated_mix
from .base import LinearAttention


def _build_rope_parameters(config):
    """The rope parameters of the config (vLLM reads `rope_parameters`, then `rope_theta`,
    `partial_rotary_factor` and a legacy `rope_scaling`); None when it has none."""
    params = copy.deepcopy(getattr(config, "rope_parameters", None)) or {}
    for key in ("rope_theta", "partial_rotary_factor"):
        if key not in params and hasattr(config, key):
            params[key] = getattr(config, key)
    scaling = getattr(config, "rope_scaling", None)
    if isinstance(scaling, dict):
        scaling = dict(scaling)
        if "type" in scaling and "rope_type" not in scaling:
            scaling["rope_type"] = scaling.pop("type")
        params.update(scaling)
    return params or None


class BailingMoELinearAttention(LinearAttention):
    def __init__(self, config, vllm_config, prefix="linear_attn"):
        super().__init__(config, vllm_config, prefix)
        bias = bool(getattr(config, "use_bias", False) or getattr(config, "use_qkv_bias", False))
        self.query_key_value = QKVParallelLinear(self.hidden_size, self.head_dim, self.num_heads,
                                                 self.num_heads, bias=bias,
                                                 prefix=f"{prefix}.query_key_value")
        self.g_proj = ColumnParallelLinear(self.hidden_size, self.hidden_inner_size, bias=False,
                                           prefix=f"{prefix}.g_proj")
        self.dense = RowParallelLinear(self.hidden_inner_size, self.hidden_size,
                                       bias=getattr(config, "use_bias", False),
                                       prefix=f"{prefix}.dense")

    def forward(self, hidden_states, output, positions):
        """Writes into `output` as vLLM's custom op does (the caller allocates it)."""
        qkv, _ = self.query_key_value(hidden_states)
        gate, _ = self.g_proj(hidden_states)
        inner = self.hidden_inner_size
        output.copy_(self.dense(gated_mix(qkv[..., 2 * inner:], gate))[0])
