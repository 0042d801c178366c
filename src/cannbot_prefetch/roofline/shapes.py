"""Parse the kernel table's shape / dtype / format strings; element sizes; FRACTAL_NZ layout.

Shapes come as "32,9216;4096,9216;4096": tensors split by ';', dims by ','; an empty segment is an
absent optional input ("512,16;8,2048,16;;;;;;8"). PyTorch traces may give nested lists
("[[1,16,256],[1024,256],[]]"); both parse to the same tuple. FRACTAL_NZ (REFERENCE.md §4.2): ND
[m, n] is stored as [ceil(n/n0), ceil(m/16), 16, n0] with n0 = 16 (fp16/bf16), 32 (int8),
64 (int4), so "256,16,16,16" fp16 is ND [256, 4096]; the stored size counts the padding.
"""

from __future__ import annotations

import math
import re

Dims = tuple[int, ...]

# Bytes per element. INT4 / FP4 pack two per byte. Torch trace spellings included.
DTYPE_BYTES: dict[str, float] = {
    "FLOAT": 4, "FLOAT32": 4, "FP32": 4, "HF32": 4, "TF32": 4, "FLOAT16": 2, "FP16": 2, "HALF": 2,
    "BF16": 2, "BFLOAT16": 2, "DOUBLE": 8, "FLOAT64": 8,
    "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "INT32": 4, "UINT32": 4, "INT64": 8,
    "UINT64": 8, "BOOL": 1, "COMPLEX64": 8, "COMPLEX128": 16, "COMPLEX32": 4,
    "INT4": 0.5, "UINT4": 0.5, "INT2": 0.25, "UINT1": 0.125,
    "HIFLOAT8": 1, "FLOAT8_E4M3FN": 1, "FLOAT8_E5M2": 1, "FLOAT8_E8M0": 1,
    "FLOAT4_E2M1": 0.5, "FLOAT4_E1M2": 0.5,
    # torch profiler "Input type" spellings
    "C10::BFLOAT16": 2, "C10::HALF": 2, "LONG INT": 8, "LONG": 8, "INT": 4, "SHORT": 2,
    "SIGNED CHAR": 1, "UNSIGNED CHAR": 1, "C10::FLOAT8_E4M3FN": 1, "C10::FLOAT8_E5M2": 1,
}

NZ_FORMATS = ("FRACTAL_NZ", "FRACTAL_NZ_C0_16", "FRACTAL_NZ_C0_32")

_NESTED = re.compile(r"^\s*\[")


def parse_shapes(text: str | None) -> tuple[Dims | None, ...] | None:
    """Tensors of a shape string; None per absent optional input; None for the whole when missing
    or unparseable. A scalar tensor written as "" is indistinguishable from an absent one."""
    if text is None:
        return None
    text = text.strip().strip('"').strip()
    if not text or text.upper() == "N/A":
        return None
    if _NESTED.match(text):
        return _parse_nested(text)
    out: list[Dims | None] = []
    for seg in text.split(";"):
        seg = seg.strip()
        if not seg:
            out.append(None)
            continue
        try:
            dims = tuple(int(d) for d in seg.split(","))
        except ValueError:
            return None
        if any(d < 0 for d in dims):
            return None
        out.append(dims)
    return tuple(out)


def _parse_nested(text: str) -> tuple[Dims | None, ...] | None:
    """"[[1,16,256],[1024,256],[]]" -> ((1,16,256), (1024,256), None). Non-tensor args ([] or
    scalars) become None."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return None
    body = body[1:-1].strip()
    out: list[Dims | None] = []
    depth, start = 0, None
    for i, ch in enumerate(body):
        if ch == "[":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0 and start is not None:
                inner = body[start:i].strip()
                if not inner:
                    out.append(None)
                elif "[" in inner:
                    out.append(None)  # a TensorList: not a single tensor
                else:
                    try:
                        out.append(tuple(int(d) for d in inner.split(",")))
                    except ValueError:
                        return None
                start = None
    return tuple(out) if depth == 0 else None


def parse_list(text: str | None) -> tuple[str, ...]:
    """"DT_BF16;BF16;;FORMAT_ND" -> ("BF16", "BF16", "", "ND"): upper-case, prefixes stripped."""
    if text is None:
        return ()
    text = text.strip().strip('"')
    if not text or text.upper() == "N/A":
        return ()
    out = []
    for item in text.split(";"):
        item = item.strip().upper()
        for prefix in ("DT_", "FORMAT_", "TORCH."):
            if item.startswith(prefix):
                item = item[len(prefix):]
        out.append(item)
    return tuple(out)


def dtype_bytes(dtype: str | None) -> float | None:
    """Bytes per element, None when unknown."""
    d = (dtype or "").strip().upper()
    if d.startswith("DT_"):
        d = d[3:]
    return DTYPE_BYTES.get(d)


def numel(dims: Dims | None) -> int:
    return math.prod(dims) if dims else (0 if dims is None else 1)


def nz_n0(dtype: str | None) -> int:
    """Fractal column width n0: 16 for 2-byte types, 32 for int8 (1 byte), 64 for int4."""
    b = dtype_bytes(dtype) or 2
    if b <= 0.5:
        return 64
    if b <= 1:
        return 32
    return 16


def is_nz(fmt: str | None) -> bool:
    return (fmt or "").upper().replace("FORMAT_", "") in NZ_FORMATS


def nz_to_nd(dims: Dims, dtype: str | None) -> Dims:
    """Stored NZ [..., ceil(n/n0), ceil(m/16), 16, n0] -> padded ND [..., m_pad, n_pad].
    A tensor reported with fewer than 4 dims is taken as already ND."""
    if len(dims) < 4:
        return dims
    *batch, n1, m1, m0, n0 = dims
    return (*batch, m1 * m0, n1 * n0)


def nd_to_nz(dims: Dims, dtype: str | None) -> Dims:
    """ND [..., m, n] -> stored NZ [..., ceil(n/n0), ceil(m/16), 16, n0]."""
    if len(dims) < 2:
        dims = (1,) * (2 - len(dims)) + tuple(dims)
    *batch, m, n = dims
    n0 = nz_n0(dtype)
    return (*batch, -(-n // n0), -(-m // 16), 16, n0)


def logical_dims(dims: Dims, fmt: str | None, dtype: str | None) -> Dims:
    """ND view of a tensor as the kernel sees it (NZ padding included)."""
    return nz_to_nd(dims, dtype) if is_nz(fmt) else dims


def stored_numel(dims: Dims, fmt: str | None, dtype: str | None) -> int:
    """Elements as stored: an NZ tensor reported in ND form (< 4 dims) is padded to whole fractals."""
    if is_nz(fmt) and len(dims) < 4:
        return numel(nd_to_nz(dims, dtype))
    return numel(dims)


def stored_bytes(dims: Dims | None, fmt: str | None, dtype: str | None) -> float:
    """Bytes as stored (0 for an absent tensor); unknown dtypes count 2 bytes (caller notes it)."""
    if dims is None:
        return 0.0
    b = dtype_bytes(dtype)
    return stored_numel(dims, fmt, dtype) * (b if b is not None else 2.0)
