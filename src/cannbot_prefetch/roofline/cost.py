"""Every FLOP / byte formula of the project, and only here (REFERENCE.md §4.2).

- MatMul / BatchMatMul (and MC2, aten): M, N from Output Shapes[0] (leading dims = batch B),
  K = numel(x1) / (B*M); FLOPs = 2*B*M*K*N; bytes = every input as stored (x1, x2 counted once even
  when broadcast, bias, ...) + y.
- QuantBatchMatmul (W8A8): same FLOPs at the int8 peak; bytes include scale / offset / bias /
  pertoken_scale, which are simply the further inputs.
- WeightQuantBatchMatmul (W8A16 / W4A16): fp16/bf16 peak (x's dtype); weight int8 / int4 / packed
  int32 as stored, plus the antiquant scale and offset.
- GroupedMatmul: weight [E, N, K] or [E, K, N]; K from x, N from the output; FLOPs = 2*M_total*K*N;
  weight traffic E_read/E of the stored weight, E_read = min(E, M_total) (per-expert token counts
  are not in the profile, so this is an upper bound).
- FRACTAL_NZ tensors count their padding (shapes.py); INT4 is 0.5 B per element.
Which input is x and which the weight comes from the per-op-type table (configs/op_classes.yaml
`matmul_family.weight_inputs`: the second input for most, the largest for the fused
GroupedMatmulSwigluQuant, whose output's last dim is N / 2 so N comes from the weight).
Weight bytes (what a prefetch would move) = that weight as stored (mat2 for aten::addmm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..hardware import peak_key
from .families import FamilyRules, WeightInput
from .shapes import (Dims, dtype_bytes, logical_dims, numel, parse_list, parse_shapes,
                     stored_bytes)

FAMILIES = ("matmul", "batch_matmul", "qbmm", "wqbmm", "gmm", "mc2", "aten")


@dataclass(frozen=True)
class OpCost:
    """Work and traffic of one kernel signature. Bytes are whole bytes (int4 halves rounded up)."""

    family: str
    flops: float
    bytes: int
    weight_bytes: int               # second operand as stored (prefetch size basis)
    weight_shape: tuple[int, ...]   # its ND (logical, padded) dims
    compute_dtype: str              # peak key: bf16 | fp16 | fp32 | int8 | int4 | fp8 | ...
    m: int
    n: int
    k: int
    batch: int
    experts: int | None = None      # GMM: E
    contains_communication: bool = False
    weight_read_bytes: int = 0      # weight bytes read by this kernel (GMM: E_read/E of them)
    other_input_bytes: int = 0      # the inputs other than the weight, as stored
    notes: tuple[str, ...] = ()

    @property
    def ai(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass(frozen=True)
class _Tensor:
    dims: Dims
    dtype: str
    fmt: str

    @property
    def nd(self) -> Dims:
        return logical_dims(self.dims, self.fmt, self.dtype)

    @property
    def nbytes(self) -> float:
        return stored_bytes(self.dims, self.fmt, self.dtype)


def _tensors(shapes: str | None, dtypes: str | None, formats: str | None) -> list[_Tensor | None] | None:
    dims = parse_shapes(shapes)
    if dims is None:
        return None
    dts, fmts = parse_list(dtypes), parse_list(formats)
    default_dt = next((d for d in dts if d), "")
    out: list[_Tensor | None] = []
    for i, d in enumerate(dims):
        if d is None:
            out.append(None)
            continue
        dt = dts[i] if i < len(dts) and dts[i] else default_dt
        fmt = fmts[i] if i < len(fmts) and fmts[i] else "ND"
        out.append(_Tensor(d, dt, fmt))
    return out


def op_cost(family: str, op_type: str | None, input_shapes: str | None, input_dtypes: str | None,
            input_formats: str | None, output_shapes: str | None = None,
            output_dtypes: str | None = None, output_formats: str | None = None, *,
            rules: FamilyRules) -> OpCost | None:
    """Cost of one MatMul-family signature; None when shapes are missing or unparseable.
    `rules`: the run's families (`families.rules_of(policy)`: which input is the weight)."""
    cost, _ = cost_or_reason(family, op_type, input_shapes, input_dtypes, input_formats,
                             output_shapes, output_dtypes, output_formats, rules=rules)
    return cost


def cost_or_reason(family: str, op_type: str | None, input_shapes: str | None,
                   input_dtypes: str | None, input_formats: str | None,
                   output_shapes: str | None = None, output_dtypes: str | None = None,
                   output_formats: str | None = None, *,
                   rules: FamilyRules) -> tuple[OpCost | None, str]:
    """(cost, "") or (None, why not) — the reason goes into the signature's note."""
    ins = _tensors(input_shapes, input_dtypes, input_formats)
    if ins is None:
        return None, "no input shapes in the profile" if not input_shapes else \
            f"input shapes {input_shapes!r} do not parse"
    outs = _tensors(output_shapes, output_dtypes, output_formats) or []
    y = outs[0] if outs else None
    try:
        if family == "aten":
            return _aten(op_type or "", ins, y)
        spec = rules.weight_input(op_type)
        x_at, w_at = spec.x, _weight_at(spec, ins)
        if family == "gmm":
            return _gmm(ins, y, x_at=x_at, w_at=w_at, n_from=spec.n_from)
        return _matmul(family, ins, y, x1_at=x_at, x2_at=w_at)
    except (ArithmeticError, ValueError, IndexError) as exc:  # absurd shapes: not fatal
        return None, f"shapes do not fit a {family} ({exc})"


def _weight_at(spec: WeightInput, ins: list[_Tensor | None]) -> int:
    """The weight's input index: as the table says, or the input (not x) with the most bytes."""
    if spec.weight == "largest":
        sized = [(t.nbytes, i) for i, t in enumerate(ins) if t is not None and i != spec.x]
        return max(sized)[1] if sized else 1
    w = int(spec.weight)
    return w + len(ins) if w < 0 else w


def _n_of_weight(wd: Dims, k: int) -> int:
    """N of a weight [..., K, N] or [..., N, K] (ND, NZ padding included): the dim that is not
    K; K padded up to a whole fractal (16 / 32 / 64) still counts as K."""
    if len(wd) < 2:
        return wd[-1]
    a, b = wd[-2], wd[-1]
    if a >= k and a - k < 64:
        return b
    if b >= k and b - k < 64:
        return a
    return b


def _b(dtype: str) -> float:
    b = dtype_bytes(dtype)
    return b if b is not None else 2.0


def _compute_dtype(family: str, x1: _Tensor) -> str:
    key = peak_key(x1.dtype)
    if family == "qbmm":
        return key if key in ("int8", "int4", "fp8", "fp4") else "int8"
    if family == "wqbmm":
        return key if key in ("fp16", "bf16") else "fp16"
    return key


def _unknown_dtypes(tensors: list[_Tensor | None]) -> tuple[str, ...]:
    bad = sorted({t.dtype for t in tensors if t is not None and dtype_bytes(t.dtype) is None})
    return (f"unknown dtype(s) {', '.join(bad) or '(empty)'} counted as 2 bytes",) if bad else ()


def _matmul(family: str, ins: list[_Tensor | None], y: _Tensor | None, *, x1_at: int,
            x2_at: int) -> tuple[OpCost | None, str]:
    if len(ins) <= max(x1_at, x2_at) or ins[x1_at] is None or ins[x2_at] is None:
        return None, "x1 / x2 shapes missing"
    x1, x2 = ins[x1_at], ins[x2_at]
    assert x1 is not None and x2 is not None
    if y is None:
        return None, "no output shape to take M and N from"
    yd = y.nd
    if len(yd) >= 2:
        m, n, batch = yd[-2], yd[-1], math.prod(yd[:-2])
    elif len(yd) == 1:
        m, n, batch = 1, yd[0], 1
    else:
        return None, "scalar output"
    notes: list[str] = []
    total = numel(x1.nd)
    if batch * m > 0 and total % (batch * m) == 0:
        k = total // (batch * m)
    else:
        k = x1.nd[-1]
        notes.append(f"numel(x1) is not a multiple of B*M; K taken from x1's last dim ({k})")
    if min(m, n, k, batch) <= 0:
        return None, "a zero-sized dimension"
    flops = 2.0 * batch * m * k * n
    w_bytes = x2.nbytes
    total_bytes = sum(t.nbytes for t in ins if t is not None) + y.nbytes
    others = sum(t.nbytes for i, t in enumerate(ins) if t is not None and i != x2_at)
    notes.extend(_unknown_dtypes(ins + [y]))
    if family == "mc2":
        notes.append("contains communication: the measured time includes the collective")
    return OpCost(
        family=family, flops=flops, bytes=math.ceil(total_bytes), weight_bytes=math.ceil(w_bytes),
        weight_shape=tuple(x2.nd), compute_dtype=_compute_dtype(family, x1), m=m, n=n, k=k,
        batch=batch, contains_communication=family == "mc2", weight_read_bytes=math.ceil(w_bytes),
        other_input_bytes=math.ceil(others), notes=tuple(notes)), ""


def _gmm(ins: list[_Tensor | None], y: _Tensor | None, *, x_at: int = 0, w_at: int = 1,
         n_from: str = "output") -> tuple[OpCost | None, str]:
    if len(ins) <= max(x_at, w_at) or ins[x_at] is None or ins[w_at] is None:
        return None, "x / weight shapes missing"
    x, w = ins[x_at], ins[w_at]
    assert x is not None and w is not None
    xd, wd = x.nd, w.nd
    k = xd[-1]
    if k <= 0:
        return None, "K is zero"
    m_total = numel(xd) // k
    experts = wd[0] if len(wd) >= 3 else 1
    if n_from == "output" and y is not None and len(y.nd) >= 1:
        n = y.nd[-1]
    else:  # no output shape, or an output a fused SwiGLU halved: the weight dim that is not K
        n = _n_of_weight(wd, k)
    if min(m_total, n, experts) <= 0:
        return None, "a zero-sized dimension"
    e_read = min(experts, m_total)
    w_read = w.nbytes * e_read / experts
    y_bytes = y.nbytes if y is not None else m_total * n * _b(x.dtype)
    others = sum(t.nbytes for i, t in enumerate(ins) if t is not None and i != w_at)
    notes = [f"weight traffic counts E_read = min(E={experts}, M_total={m_total}) = {e_read} experts "
             "(an upper bound: per-expert token counts are not in the profile)"]
    notes.extend(_unknown_dtypes(ins + [y]))
    return OpCost(
        family="gmm", flops=2.0 * m_total * k * n, bytes=math.ceil(others + w_read + y_bytes),
        weight_bytes=math.ceil(w.nbytes), weight_shape=tuple(wd),
        compute_dtype=_compute_dtype("gmm", x), m=m_total, n=n, k=k, batch=1, experts=experts,
        weight_read_bytes=math.ceil(w_read), other_input_bytes=math.ceil(others),
        notes=tuple(notes)), ""


def _broadcast(a: Dims, b: Dims) -> Dims:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and 1 not in (da, db):
            raise ValueError(f"batch dims {a} and {b} do not broadcast")
        out.append(max(da, db))
    return tuple(reversed(out))


def _aten(op_type: str, ins: list[_Tensor | None], y: _Tensor | None) -> tuple[OpCost | None, str]:
    """PyTorch cpu_op (Input Dims carry no output): build y from the inputs when it is missing."""
    op = op_type.lower().split("::")[-1]
    x1_at, x2_at = (1, 2) if op == "addmm" else (0, 1)
    if len(ins) <= x2_at or ins[x1_at] is None or ins[x2_at] is None:
        return None, f"aten::{op} without two tensor inputs"
    x1, x2 = ins[x1_at], ins[x2_at]
    assert x1 is not None and x2 is not None
    a, w = x1.nd, x2.nd
    if op == "linear":              # x [..., K], weight [N, K]; leading dims of x fold into M
        n = w[0] if len(w) == 2 else w[-1]
        m = numel(a[:-1]) if len(a) > 1 else 1
        y_t = _Tensor((m, n), y.dtype if y is not None else x1.dtype, "ND")
        ins2 = list(ins)
        ins2[0] = _Tensor((m, a[-1]), x1.dtype, x1.fmt)
        return _matmul("aten", ins2, y_t, x1_at=0, x2_at=1)
    if y is None:
        if op in ("mm", "addmm"):
            ydims = (a[0], w[-1])
        elif op in ("bmm", "matmul"):
            if len(a) == 1 and len(w) == 1:
                ydims = ()
            elif len(a) == 1:
                ydims = (*w[:-2], w[-1])
            elif len(w) == 1:
                ydims = a[:-1]
            else:
                ydims = (*_broadcast(a[:-2], w[:-2]), a[-2], w[-1])
        else:
            return None, f"aten::{op} is not a MatMul"
        if not ydims:
            return None, "dot product (scalar output)"
        y = _Tensor(ydims, x1.dtype, "ND")
    return _matmul("aten", ins, y, x1_at=x1_at, x2_at=x2_at)
