"""A small, safe evaluator for the shapes of linear-like attributes in a model's `__init__`.

Names it understands: `config.X` (and any constructor parameter annotated as a config),
`getattr(config, "X", default)`, `config.get("X", default)`, `self.X` assigned earlier in the
same `__init__`, constructor arguments bound at the class's instantiation site, literals,
`+ - * // / % **`, `int/min/max/sum/len`, `isinstance(value, int)` (builtin types), conditional
expressions and comparisons, and calls of plain single-`return` helpers of the model's folder. Anything else is "not evaluable" (never executed), and a `self.X`
that was assigned such a value names why when used. A missing config key is remembered and named when used.
Linear-like: `nn.Linear(in, out)`, vLLM `ColumnParallelLinear` / `MergedColumnParallelLinear` /
`QKVParallelLinear` (out / tp) / `RowParallelLinear` (in / tp) / `ReplicatedLinear`, and
`nn.Parameter(torch.empty(E, ...))` (fused experts, routers).

Modules: bounds (what is not evaluable), env (the evaluator), functions (helper functions it calls), static (values and conditions
read from an `__init__`), syntax (node shapes the scans share), registered (weights registered
by call), linears (the linear-like attributes and their dims).
"""

from .linears import LinearAttr, scan_linears
from .static import derived_attrs, static_truth

__all__ = ["LinearAttr", "derived_attrs", "scan_linears", "static_truth"]
