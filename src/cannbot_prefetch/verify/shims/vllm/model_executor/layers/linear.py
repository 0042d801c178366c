"""vLLM's parallel linears at TP 1: a [out, in] `weight`, forward returns (output, bias) as
vLLM's do (`return_bias=True`)."""
import torch
from torch import nn


class LinearBase(nn.Module):
    def __init__(self, input_size, output_size, bias=False, skip_bias_add=False,
                 params_dtype=None, quant_config=None, prefix="", *, return_bias=True,
                 disable_tp=False, **_):
        super().__init__()
        self.input_size, self.output_size = input_size, output_size
        self.skip_bias_add, self.return_bias = skip_bias_add, return_bias
        self.weight = nn.Parameter(torch.randn(output_size, input_size,
                                               dtype=params_dtype or torch.float32) * 0.05)
        self.bias = nn.Parameter(torch.zeros(output_size)) if bias else None

    def forward(self, x):
        bias = None if self.skip_bias_add else self.bias
        out = torch.nn.functional.linear(x, self.weight, bias)
        if not self.return_bias:
            return out
        return out, (self.bias if self.skip_bias_add else None)


class ReplicatedLinear(LinearBase):
    pass


class ColumnParallelLinear(LinearBase):
    def __init__(self, input_size, output_size, bias=True, gather_output=False, *a, **k):
        super().__init__(input_size, output_size, bias, *a, **k)


class RowParallelLinear(LinearBase):
    def __init__(self, input_size, output_size, bias=True, input_is_parallel=True,
                 skip_bias_add=False, params_dtype=None, reduce_results=True, *a, **k):
        super().__init__(input_size, output_size, bias, skip_bias_add, params_dtype, *a, **k)


class MergedColumnParallelLinear(ColumnParallelLinear):
    def __init__(self, input_size, output_sizes, bias=True, *a, **k):
        self.output_sizes = list(output_sizes)
        super().__init__(input_size, sum(output_sizes), bias, *a, **k)


class QKVParallelLinear(ColumnParallelLinear):
    def __init__(self, hidden_size, head_size, total_num_heads, total_num_kv_heads=None,
                 bias=True, *a, v_head_size=None, **k):
        kv = total_num_kv_heads or total_num_heads
        v = v_head_size or head_size
        super().__init__(hidden_size, (total_num_heads + kv) * head_size + kv * v, bias, *a, **k)
        # the head counts vLLM's layer exposes (nemotron_parse3_5 sizes its q / kv split from
        # `qkv_proj.num_heads`): per rank, the totals at TP 1, each kv head held once
        self.hidden_size, self.head_size, self.v_head_size = hidden_size, head_size, v
        self.total_num_heads, self.total_num_kv_heads = total_num_heads, kv
        self.num_heads, self.num_kv_heads, self.num_kv_head_replicas = total_num_heads, kv, 1


class DCPGroupColumnParallelLinear(ColumnParallelLinear):
    """Column-parallel over the decode-context-parallel group: one rank here."""


class UnquantizedLinearMethod:
    """The quantisation method of an unquantised linear (vLLM's); every shim linear's
    `quant_method` is one."""


LinearBase.quant_method = UnquantizedLinearMethod()
