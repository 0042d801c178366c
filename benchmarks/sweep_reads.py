"""Which Parameters a forward pass reads only element-wise (corpus sweep's target list).

The sweep targets fused 3-D Parameters (experts' weights) of modules that ran. A 3-D Parameter
that no MatMul reads is not a weight `npu_prefetch` helps (zamba's per-head `A_log`, read by
`-torch.exp(self.A_log.float())` and then broadcast into the scan): the sweep leaves it out when
every read of it, followed through views and same-shape element-wise ops, ends in a known
element-wise op. A read by anything else (a MatMul, a custom kernel, an op not listed) keeps it.
"""

from __future__ import annotations

# ops that return a view or a same-valued copy of their input: the read goes on through them
VIEWS = {"__getitem__", "view", "reshape", "transpose", "permute", "unsqueeze", "squeeze",
         "float", "to", "contiguous", "t", "expand", "narrow", "select", "flatten", "type_as",
         "detach", "clone", "half", "bfloat16"}
# element-wise math: followed while the result keeps the Parameter's shape; a read that ends in
# one (a broadcast into a larger tensor) is not a MatMul's
ELEMENTWISE = {"exp", "log", "neg", "__neg__", "softplus", "sigmoid", "tanh", "abs", "sqrt",
               "rsqrt", "mul", "__mul__", "__rmul__", "add", "__add__", "__radd__", "sub",
               "__sub__", "__rsub__", "div", "__truediv__", "__rtruediv__", "clamp", "pow",
               "__pow__", "exp_", "mul_", "add_"}

# reads of a tensor's metadata (`.shape`, `.dtype`, `.device` through their `__get__`), no data
METADATA = {"__get__", "size", "dim", "numel", "stride", "data_ptr", "is_contiguous",
            "__len__", "__format__", "__repr__", "__hash__"}


def elementwise_only(model, run, params) -> set[int]:
    """ids of `params` whose every read in `run(model)` ends in an element-wise op."""
    import torch
    from torch.overrides import TorchFunctionMode

    origin = {id(p): id(p) for p in params}
    keep_alive: list = []
    ends: dict[int, set[str]] = {id(p): set() for p in params}

    class Reads(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", str(func))
            if name in METADATA:
                return out
            for a in list(args) + list((kwargs or {}).values()):
                src = origin.get(id(a)) if isinstance(a, torch.Tensor) else None
                if src is None:
                    continue
                same = isinstance(out, torch.Tensor) and out.shape == a.shape
                if isinstance(out, torch.Tensor) and (name in VIEWS or
                                                      (name in ELEMENTWISE and same)):
                    origin[id(out)] = src
                    keep_alive.append(out)         # ids stay unique while the run lasts
                else:
                    ends[src].add(name)
            return out

    with torch.no_grad(), Reads():
        run(model)
    return {pid for pid, names in ends.items() if names and names <= ELEMENTWISE}
