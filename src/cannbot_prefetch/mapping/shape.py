"""Kernel weight shapes -> linear-like attributes of the model source.

A MatMul's weight [N, K] (out, in; `n`, `k` from the roofline) matches an attribute whose
evaluated dims are (N, K) per rank (`--tp` applied by the source model); a GroupedMatmul matches
a fused expert Parameter whose last two dims are (N, K). Several attributes with one shape
(q/o, k/v, gate/up) are told apart by the order the layer runs them, which is also the order
in which their kernels first appear (windows clusters, `site_rank`).
"""

from __future__ import annotations

from .roles import name_role
from .source import LinearAttr, ModelSource

def role_of(attr: str, lin: LinearAttr | None = None, family: str = "", dtype_bytes: float = 2) -> str:
    name = attr.split(".")[-1].lower()
    if family == "gmm" or (lin is not None and lin.is_param and lin.dims and len(lin.dims) == 3):
        return "gmm2" if "down" in name or name in ("w2", "w2_weight") else "gmm1"
    if family == "qbmm" or (family != "wqbmm" and dtype_bytes == 1):
        return "qbmm"
    return name_role(name)


def dims_match(lin: LinearAttr, n: int, k: int, family: str = "") -> bool:
    """A GroupedMatmul's weight is a bank of experts: only a 3-D weight ([E, ., .]) is one; a
    2-D linear of the same [N, K] (a shared expert, the dense MLP it runs beside) is a MatMul
    (issue 30: a DeepSeek-V2-Lite-like model mapped GMM1 to its shared expert)."""
    if lin.dims is None:
        return False
    if family == "gmm" and len(lin.dims) != 3:
        return False
    if family == "gmm" or (lin.is_param and len(lin.dims) == 3):
        return tuple(lin.dims[-2:]) in ((n, k), (k, n))
    return tuple(lin.dims[-2:]) == (n, k)


def unknown_dims(ms: ModelSource) -> list[LinearAttr]:
    return [lin for lin in ms.linears.values() if lin.dims is None]
