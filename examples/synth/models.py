"""Model configs -> the operator sequence of one decode (or prefill) step, as an NPU runs it.

GENERATED-PROFILE SUPPORT CODE. Nothing here is measured. It turns a Hugging Face `config.json`
(Llama / Qwen2 / Qwen3 dense, Qwen2-MoE / Qwen3-MoE / DeepSeek-like MoE) into the list of device
operators one forward step issues, in execution order, with the real Ascend op types, aclnn kernel
names, shapes, dtypes, formats, accelerator cores, FLOPs and bytes (REFERENCE.md §3.3-§3.4, §4.2).

Assumptions, stated once:
- The model is the Hugging Face eager implementation with the usual NPU fused kernels swapped in
  for the small ops (as torch_npu-adapted ports do): RmsNorm, ApplyRotaryPosEmb,
  FusedInferAttentionScore (KV cache in BNSD), MoeGatingTopKSoftmax / MoeInitRouting /
  GroupedMatmul / MoeFinalizeRouting for the experts. Every `nn.Linear` stays a separate MatMul
  (q, k, v and gate, up are NOT fused), exactly as HF runs them.
- `x @ W^T` shows the weight as stored, [N, K]: input shapes "M,K;N,K" (";N" with a bias).
- GroupedMatmul weights are [E, N, K] like the real vllm-ascend sample ("512,16;8,2048,16;;;;;;8").
- DeepSeek-like configs: the MoE fields are read; attention is modelled as GQA (MLA is not).
- Execution order follows Python evaluation order of the HF source, e.g. the MLP line
  `self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))` runs gate, Silu, up, Mul, down.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

# Bytes per element of the dtype names used in the CSV.
DTYPE_BYTES = {"DT_BF16": 2, "FLOAT16": 2, "FLOAT": 4, "INT32": 4, "INT64": 8, "UINT64": 8,
               "INT8": 1, "BOOL": 1}
TORCH_DTYPES = {"bfloat16": "DT_BF16", "float16": "FLOAT16", "float32": "FLOAT"}
# How torch names the same dtypes in cpu_op "Input type".
TORCH_TYPE_NAMES = {"DT_BF16": "c10::BFloat16", "FLOAT16": "c10::Half", "FLOAT": "float",
                    "INT32": "int", "INT64": "long int", "UINT64": "unsigned long", "INT8": "signed char",
                    "BOOL": "bool"}


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str = "DT_BF16"
    fmt: str = "ND"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


# An optional input that aclnn reports as an empty shape segment (e.g. GroupedMatmul's bias).
EMPTY = None


@dataclass(frozen=True)
class ModelSpec:
    """The sizes a decode step needs, read from config.json (field names as HF spells them)."""

    family: str                 # llama | qwen2 | qwen3 | qwen2_moe | qwen3_moe | deepseek
    prefix: str                 # HF class prefix: Llama, Qwen2, Qwen3Moe, ...
    source: str                 # module path under site-packages, e.g. transformers/models/llama/modeling_llama.py
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    vocab: int
    dtype: str = "DT_BF16"
    tie_embeddings: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    experts: int = 0            # routed experts (0 = dense)
    top_k: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0  # shared expert(s) total intermediate size, 0 = none
    shared_gate: bool = False     # Qwen2-MoE shared_expert_gate
    first_dense: int = 0          # DeepSeek first_k_dense_replace
    sparse_step: int = 1          # Qwen-MoE decoder_sparse_step
    mlp_only_layers: tuple[int, ...] = ()

    def is_moe_layer(self, i: int) -> bool:
        if not self.experts or i < self.first_dense or i in self.mlp_only_layers:
            return False
        return (i + 1) % max(1, self.sparse_step) == 0


_FAMILIES = {
    # model_type: (family, class prefix, source module)
    "llama": ("llama", "Llama", "transformers/models/llama/modeling_llama.py"),
    "qwen2": ("qwen2", "Qwen2", "transformers/models/qwen2/modeling_qwen2.py"),
    "qwen3": ("qwen3", "Qwen3", "transformers/models/qwen3/modeling_qwen3.py"),
    "qwen2_moe": ("qwen2_moe", "Qwen2Moe", "transformers/models/qwen2_moe/modeling_qwen2_moe.py"),
    "qwen3_moe": ("qwen3_moe", "Qwen3Moe", "transformers/models/qwen3_moe/modeling_qwen3_moe.py"),
    "deepseek_v2": ("deepseek", "DeepseekV2", "transformers/models/deepseek_v2/modeling_deepseek_v2.py"),
    "deepseek_v3": ("deepseek", "DeepseekV3", "transformers/models/deepseek_v3/modeling_deepseek_v3.py"),
}


def load_config(config: str | Path | Mapping[str, Any]) -> ModelSpec:
    """Read an HF config.json (path or dict). Raises KeyError naming a missing required key."""
    if not isinstance(config, Mapping):
        config = json.loads(Path(config).read_text(encoding="utf-8"))
    c = dict(config)
    mt = str(c.get("model_type", "llama")).lower()
    family, prefix, source = _FAMILIES.get(mt, ("llama", "Llama", _FAMILIES["llama"][2]))
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size"):
        if key not in c:
            raise KeyError(f"config.json: missing required key {key!r}")
    hidden = int(c["hidden_size"])
    heads = int(c["num_attention_heads"])
    kv = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or hidden // heads)
    experts = int(c.get("num_experts") or c.get("n_routed_experts") or 0)
    moe_i = int(c.get("moe_intermediate_size") or 0)
    shared = 0
    if c.get("shared_expert_intermediate_size"):
        shared = int(c["shared_expert_intermediate_size"])
    elif c.get("n_shared_experts"):
        shared = int(c["n_shared_experts"]) * moe_i
    intermediate = int(c.get("intermediate_size") or moe_i or 4 * hidden)
    dtype = TORCH_DTYPES.get(str(c.get("torch_dtype") or c.get("dtype") or "bfloat16"), "DT_BF16")
    return ModelSpec(
        family=family, prefix=prefix, source=source, hidden=hidden, intermediate=intermediate,
        heads=heads, kv_heads=kv, head_dim=head_dim, layers=int(c["num_hidden_layers"]),
        vocab=int(c["vocab_size"]), dtype=dtype,
        tie_embeddings=bool(c.get("tie_word_embeddings", False)),
        qkv_bias=bool(c.get("attention_bias", family in ("qwen2", "qwen2_moe"))),
        qk_norm=family in ("qwen3", "qwen3_moe"),
        experts=experts, top_k=int(c.get("num_experts_per_tok") or 0) if experts else 0,
        moe_intermediate=moe_i if experts else 0, shared_intermediate=shared if experts else 0,
        shared_gate=family == "qwen2_moe" and shared > 0,
        first_dense=int(c.get("first_k_dense_replace") or 0),
        sparse_step=int(c.get("decoder_sparse_step") or 1),
        mlp_only_layers=tuple(int(x) for x in (c.get("mlp_only_layers") or ())),
    )


@dataclass(frozen=True)
class Op:
    """One device operator (one kernel_details row) and where it comes from in the model."""

    type: str                               # OP Type, e.g. MatMulV3
    name: str                               # kernel name, e.g. aclnnMm_MatMulV3Common_MatMulV3
    core: str                               # AI_CORE | AI_VECTOR_CORE | MIX_AIC | AI_CPU | HCCL
    inputs: tuple[Tensor | None, ...]
    outputs: tuple[Tensor, ...]
    klass: str                              # HF class whose forward issues it, e.g. LlamaAttention
    attr: str                               # "LlamaAttention.q_proj"; functions as "LlamaAttention.apply_rotary_pos_emb"
    call: str                               # text searched in klass's forward for the line: "self.q_proj("
    layer: int | None                       # decoder layer index, None outside the layers
    aten: str                               # framework op around the launch, e.g. aten::linear
    launcher: str                           # the innermost cpu_op that launches it, e.g. aclnnMm
    flops: float                            # for the compute term (cube FLOPs or vector element-ops)
    bytes: int                              # HBM bytes moved (REFERENCE §4.2)
    weight: Tensor | None = None            # the prefetchable operand, when there is one
    kind: str = "cube"                      # cube | vector | comm | cmo
    occurrence: int = 1                     # which match of `call` in the forward (1 = first)
    # Model-source frames, innermost first: (class, call text, occurrence). Filled by step_ops.
    frames: tuple[tuple[str, str, int], ...] = ()
    # Frames inside the innermost model frame: "linear" (nn.Linear: linear.py + module.py),
    # "embedding" (nn.Embedding), "act" (transformers' SiLUActivation), or "" (a plain call).
    inner: str = ""
    # Shapes the framework op (cpu_op "Input Dims") sees, when they differ from the kernel's
    # (nn.Linear gets x as [B, S, K]); None = the kernel's inputs.
    aten_inputs: tuple[Tensor | None, ...] | None = None

    @property
    def is_matmul(self) -> bool:
        return self.type in ("MatMulV3", "MatMulV2", "GroupedMatmul", "BatchMatMulV3")


def _t(*shape: int, dtype: str = "DT_BF16") -> Tensor:
    return Tensor(tuple(int(s) for s in shape), dtype)


def _mm(spec: ModelSpec, m: int, k: int, n: int, klass: str, attr: str, layer: int | None,
        bias: bool = False, call: str | None = None, weight_name: str = "weight") -> Op:
    """nn.Linear / F.linear: y[M,N] = x[M,K] @ W[N,K]^T (+ b[N])."""
    x, w, y = _t(m, k, dtype=spec.dtype), _t(n, k, dtype=spec.dtype), _t(m, n, dtype=spec.dtype)
    ins: tuple[Tensor | None, ...] = (x, w) + ((_t(n, dtype=spec.dtype),) if bias else ())
    nbytes = sum(t.nbytes for t in ins if t) + y.nbytes
    name = "aclnnAddmm_MatMulV3Common_MatMulV3" if bias else "aclnnMm_MatMulV3Common_MatMulV3"
    short = attr.split(".")[-1]
    return Op("MatMulV3", name, "AI_CORE", ins, (y,), klass, f"{klass}.{short}",
              call or f"self.{short}(", layer, "aten::linear",
              "aclnnAddmm" if bias else "aclnnMm", 2.0 * m * k * n, nbytes, w, "cube")


def _vec(type_: str, name: str, ins: Sequence[Tensor | None], outs: Sequence[Tensor], klass: str,
         attr: str, call: str, layer: int | None, aten: str, launcher: str, ops_per_elem: float,
         occurrence: int = 1, core: str = "AI_VECTOR_CORE") -> Op:
    elems = max((t.numel for t in outs), default=0)
    nbytes = sum(t.nbytes for t in ins if t) + sum(t.nbytes for t in outs)
    return Op(type_, name, core, tuple(ins), tuple(outs), klass, attr, call, layer, aten, launcher,
              ops_per_elem * elems, nbytes, None, "vector", occurrence)


def _rmsnorm(spec: ModelSpec, m: int, klass: str, attr: str, call: str, layer: int | None,
             width: int | None = None, rows: int | None = None) -> Op:
    h = width or spec.hidden
    r = rows or m
    x = _t(r, h, dtype=spec.dtype)
    return _vec("RmsNorm", "aclnnRmsNorm_RmsNorm_RmsNorm", (x, _t(h, dtype=spec.dtype)),
                (x, _t(r, 1, dtype="FLOAT")), klass, attr, call, layer, "npu::npu_rms_norm",
                "aclnnRmsNorm", 4.0)


def _add(spec: ModelSpec, m: int, klass: str, layer: int, occurrence: int) -> Op:
    x = _t(m, spec.hidden, dtype=spec.dtype)
    return _vec("Add", "aclnnAdd_AddAiCore_Add", (x, x), (x,), klass, f"{klass}.residual_add",
                "residual + hidden_states", layer, "aten::add", "aclnnAdd", 1.0, occurrence)


def _attention(spec: ModelSpec, b: int, q_len: int, kv_len: int, layer: int) -> list[Op]:
    p, dt = spec.prefix, spec.dtype
    klass = f"{p}Attention"
    m = b * q_len
    nq, nkv, hd = spec.heads, spec.kv_heads, spec.head_dim
    ops = [
        _mm(spec, m, spec.hidden, nq * hd, klass, "q_proj", layer, spec.qkv_bias),
        _mm(spec, m, spec.hidden, nkv * hd, klass, "k_proj", layer, spec.qkv_bias),
        _mm(spec, m, spec.hidden, nkv * hd, klass, "v_proj", layer, spec.qkv_bias),
    ]
    if spec.qk_norm:
        # Qwen3: self.q_norm(self.q_proj(h).view(...)) -> per-head RmsNorm over head_dim, right
        # after its projection.
        qn = _rmsnorm(spec, m, klass, f"{klass}.q_norm", "self.q_norm(", layer, hd, m * nq)
        kn = _rmsnorm(spec, m, klass, f"{klass}.k_norm", "self.k_norm(", layer, hd, m * nkv)
        ops = [ops[0], qn, ops[1], kn, ops[2]]
    q = _t(b, nq, q_len, hd, dtype=dt)
    k = _t(b, nkv, q_len, hd, dtype=dt)
    cos = _t(1, 1, q_len, hd, dtype=dt)
    ops.append(_vec("ApplyRotaryPosEmb", "aclnnApplyRotaryPosEmb_ApplyRotaryPosEmb_ApplyRotaryPosEmb",
                    (q, k, cos, cos), (q, k), klass, f"{klass}.apply_rotary_pos_emb",
                    "apply_rotary_pos_emb(", layer, "npu::npu_apply_rotary_pos_emb",
                    "aclnnApplyRotaryPosEmb", 3.0))
    cache = _t(b, nkv, kv_len, hd, dtype=dt)
    upd = _t(b, nkv, q_len, hd, dtype=dt)
    idx = _t(b, dtype="INT64")
    for _ in (1, 2):  # key, value cache update (cache.update -> in-place scatter)
        sc = _vec("ScatterUpdate", "aclnnInplaceScatterUpdate_ScatterUpdate_ScatterUpdate",
                  (cache, idx, upd), (upd,), klass, f"{klass}.cache_update", "cache.update(",
                  layer, "npu::scatter_update_", "aclnnInplaceScatterUpdate", 1.0)
        # In place: only the new rows are read and written, not the whole cache.
        ops.append(replace(sc, bytes=2 * upd.nbytes + idx.nbytes))
    # Attention over the KV cache: BNSD q [B,N,S,D], k/v caches [B,Nkv,S_kv,D]; cube work.
    out = _t(b, nq, q_len, hd, dtype=dt)
    qk_flops = 4.0 * b * nq * q_len * kv_len * hd
    fia_bytes = q.nbytes + 2 * cache.nbytes + out.nbytes
    act_seq = _t(b, dtype="INT64")
    ops.append(Op("FusedInferAttentionScore",
                  "aclnnFusedInferAttentionScoreV2_FusedInferAttentionScore_FusedInferAttentionScore",
                  "MIX_AIC", (q, cache, cache, act_seq), (out,), klass,
                  f"{klass}.attention_interface", "attention_interface(", layer,
                  "npu::npu_fused_infer_attention_score", "aclnnFusedInferAttentionScoreV2",
                  qk_flops, fia_bytes, None, "cube"))
    ops.append(_mm(spec, m, nq * hd, spec.hidden, klass, "o_proj", layer, False))
    return ops


def _dense_mlp(spec: ModelSpec, m: int, layer: int, klass: str | None = None,
               inter: int | None = None) -> list[Op]:
    klass = klass or f"{spec.prefix}MLP"
    i = inter or spec.intermediate
    g = _t(m, i, dtype=spec.dtype)
    return [
        _mm(spec, m, spec.hidden, i, klass, "gate_proj", layer),
        _vec("Silu", "aclnnSilu_SiluAiCore_Silu", (g,), (g,), klass, f"{klass}.act_fn",
             "self.act_fn(", layer, "aten::silu", "aclnnSilu", 4.0),
        _mm(spec, m, spec.hidden, i, klass, "up_proj", layer),
        _vec("Mul", "aclnnMul_MulAiCore_Mul", (g, g), (g,), klass, f"{klass}.act_mul",
             "self.act_fn(", layer, "aten::mul", "aclnnMul", 1.0),
        _mm(spec, m, i, spec.hidden, klass, "down_proj", layer),
    ]


def _moe(spec: ModelSpec, m: int, layer: int) -> list[Op]:
    p, dt = spec.prefix, spec.dtype
    block = f"{p}SparseMoeBlock" if spec.family != "deepseek" else f"{p}MoE"
    experts_cls = f"{p}Experts"
    e, k, h, i = spec.experts, spec.top_k, spec.hidden, spec.moe_intermediate
    mk = m * k
    ops: list[Op] = []
    if spec.shared_intermediate:
        ops += _dense_mlp(spec, m, layer, f"{p}MLP", spec.shared_intermediate)
        if spec.shared_gate:
            ops.append(_mm(spec, m, h, 1, block, "shared_expert_gate", layer))
    # Router: F.linear(hidden, self.weight) in the router, called as self.gate(...) in the block.
    router = _mm(spec, m, h, e, block, "gate", layer)
    ops.append(router)
    logits = _t(m, e, dtype=dt)
    ops.append(_vec("MoeGatingTopKSoftmax", "aclnnMoeGatingTopKSoftmax_MoeGatingTopKSoftmax_MoeGatingTopKSoftmax",
                    (logits,), (_t(m, k, dtype=dt), _t(m, k, dtype="INT32"), _t(m, k, dtype="INT32")),
                    block, f"{block}.gate_topk", "self.gate(", layer, "npu::npu_moe_gating_top_k_softmax",
                    "aclnnMoeGatingTopKSoftmax", 8.0 * e / max(1, k)))
    x = _t(m, h, dtype=dt)
    ops.append(_vec("MoeInitRouting", "aclnnMoeInitRouting_MoeInitRouting_MoeInitRouting",
                    (x, _t(m, k, dtype="INT32"), _t(m, k, dtype="INT32")),
                    (_t(mk, h, dtype=dt), _t(mk, dtype="INT32"), _t(mk, dtype="INT32")),
                    experts_cls, f"{experts_cls}.init_routing", "self.gate_up_proj", layer,
                    "npu::npu_moe_init_routing", "aclnnMoeInitRouting", 2.0))
    ops.append(_vec("MoeComputeExpertTokens",
                    "aclnnMoeComputeExpertTokens_MoeComputeExpertTokens_MoeComputeExpertTokens",
                    (_t(mk, dtype="INT32"),), (_t(e, dtype="INT64"),), experts_cls,
                    f"{experts_cls}.expert_tokens", "self.gate_up_proj", layer,
                    "npu::npu_moe_compute_expert_tokens", "aclnnMoeComputeExpertTokens", 1.0))
    ops.append(_gmm(spec, mk, h, 2 * i, experts_cls, "gate_up_proj", layer))
    a = _t(mk, 2 * i, dtype=dt)
    ops.append(_vec("SwiGlu", "aclnnSwiGlu_SwiGlu_SwiGlu", (a,), (_t(mk, i, dtype=dt),), experts_cls,
                    f"{experts_cls}.act_fn", "self.act_fn(", layer, "npu::npu_swiglu", "aclnnSwiGlu", 5.0))
    ops.append(_gmm(spec, mk, i, h, experts_cls, "down_proj", layer))
    ops.append(_vec("MoeFinalizeRouting", "aclnnMoeFinalizeRouting_MoeFinalizeRouting_MoeFinalizeRouting",
                    (_t(mk, h, dtype=dt), x, EMPTY, EMPTY, _t(m, k, dtype=dt), _t(mk, dtype="INT32"),
                     _t(m, k, dtype="INT32")),
                    (x,), experts_cls, f"{experts_cls}.finalize_routing", "index_add_(", layer,
                    "npu::npu_moe_finalize_routing", "aclnnMoeFinalizeRouting", 2.0 * k))
    if spec.shared_intermediate:
        ops.append(_vec("Add", "aclnnAdd_AddAiCore_Add", (x, x), (x,), block, f"{block}.shared_add",
                        "shared_expert_output", layer, "aten::add", "aclnnAdd", 1.0))
    return ops


def _gmm(spec: ModelSpec, m_total: int, k: int, n: int, klass: str, attr: str, layer: int) -> Op:
    """GroupedMatmul, weight [E, N, K]; weight bytes = E_read*K*N*b with E_read = min(E, M_total)."""
    e = spec.experts
    x, w, y = _t(m_total, k, dtype=spec.dtype), _t(e, n, k, dtype=spec.dtype), _t(m_total, n, dtype=spec.dtype)
    group_list = _t(e, dtype="INT64")
    e_read = min(e, m_total)
    nbytes = x.nbytes + e_read * k * n * DTYPE_BYTES[spec.dtype] + group_list.nbytes + y.nbytes
    # Input list as the real op reports it: x, weight, bias, scale, offset, antiquant scale,
    # antiquant offset (all absent), group_list.
    ins = (x, w, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, group_list)
    return Op("GroupedMatmul", "aclnnGroupedMatmulV5_GroupedMatmul_GroupedMatmul", "MIX_AIC", ins, (y,),
              klass, f"{klass}.{attr}", f"self.{attr}", layer, "npu::npu_grouped_matmul",
              "aclnnGroupedMatmulV5", 2.0 * m_total * k * n, nbytes, w, "cube")


# The dtypes the real GroupedMatmul row lists for its absent optional inputs.
GMM_EMPTY_DTYPES = ("FLOAT", "UINT64", "FLOAT", "FLOAT16", "FLOAT16")


def step_ops(spec: ModelSpec, tokens: int = 1, layers: int | Sequence[int] | None = None,
             phase: str = "decode", seq_len: int = 128, context_len: int = 1024) -> list[Op]:
    """The device ops of one forward step, in execution order.

    decode: M = tokens (the batch), each query attends to `context_len` cached positions.
    prefill: M = tokens * seq_len, attention over seq_len; lm_head on the last position only.
    layers: None = all; an int n = the first n; a sequence = those indices.
    """
    if phase not in ("decode", "prefill"):
        raise ValueError(f"phase must be decode or prefill, not {phase!r}")
    b = int(tokens)
    q_len = 1 if phase == "decode" else int(seq_len)
    kv_len = int(context_len) if phase == "decode" else int(seq_len)
    m = b * q_len
    if layers is None:
        idx = list(range(spec.layers))
    elif isinstance(layers, int):
        idx = list(range(min(layers, spec.layers)))
    else:
        idx = [int(i) for i in layers]
    p, dt = spec.prefix, spec.dtype
    model_cls, lm_cls, layer_cls = f"{p}Model", f"{p}ForCausalLM", f"{p}DecoderLayer"
    ops: list[Op] = []
    emb = _t(spec.vocab, spec.hidden, dtype=dt)
    ops.append(Op("GatherV2", "aclnnEmbedding_GatherV2_GatherV2", "AI_VECTOR_CORE",
                  (emb, _t(b, q_len, dtype="INT64")), (_t(b, q_len, spec.hidden, dtype=dt),),
                  model_cls, f"{model_cls}.embed_tokens", "self.embed_tokens(", None,
                  "aten::embedding", "aclnnEmbedding", 0.0,
                  2 * m * spec.hidden * DTYPE_BYTES[dt] + m * 8, None, "vector"))
    for li in idx:
        ops.append(_rmsnorm(spec, m, layer_cls, f"{layer_cls}.input_layernorm", "self.input_layernorm(", li))
        ops += _attention(spec, b, q_len, kv_len, li)
        ops.append(_add(spec, m, layer_cls, li, 1))
        ops.append(_rmsnorm(spec, m, layer_cls, f"{layer_cls}.post_attention_layernorm",
                            "self.post_attention_layernorm(", li))
        ops += _moe(spec, m, li) if spec.is_moe_layer(li) else _dense_mlp(spec, m, li)
        ops.append(_add(spec, m, layer_cls, li, 2))
    ops.append(_rmsnorm(spec, m, model_cls, f"{model_cls}.norm", "self.norm(", None))
    ops.append(_mm(spec, b, spec.hidden, spec.vocab, lm_cls, "lm_head", None))
    logits = _t(b, spec.vocab, dtype=dt)
    # The driver takes the last position's logits in float32 (as HF generate does), then argmax.
    logits32 = _t(b, spec.vocab, dtype="FLOAT")
    ops.append(_vec("Cast", "aclnnCast_CastAiCore_Cast", (logits,), (logits32,), SCRIPT,
                    f"{SCRIPT}.logits_float", "model(", None, "aten::_to_copy", "aclnnCast", 1.0))
    ops.append(_vec("ArgMaxV2", "aclnnArgMax_ArgMaxV2_ArgMaxV2", (logits32,), (_t(b, dtype="INT64"),),
                    SCRIPT, f"{SCRIPT}.argmax", "torch.argmax(", None, "aten::argmax", "aclnnArgMax",
                    1.0))
    return [_with_frames(spec, op, b, q_len) for op in ops]


# The driver script's frame: a plain greedy decode loop calling model(...) then torch.argmax.
SCRIPT = "decode_script"


def _parent(spec: ModelSpec, klass: str) -> tuple[str, str, int] | None:
    """Who calls klass's forward, and with which call text (the HF 5.x structure)."""
    p = spec.prefix
    block = f"{p}SparseMoeBlock" if spec.family != "deepseek" else f"{p}MoE"
    table = {
        f"{p}Attention": (f"{p}DecoderLayer", "self.self_attn(", 1),
        f"{p}MLP": (f"{p}DecoderLayer", "self.mlp(", 1),
        block: (f"{p}DecoderLayer", "self.mlp(", 1),
        f"{p}Experts": (block, "self.experts(", 1),
        f"{p}TopKRouter": (block, "self.gate(", 1),
        f"{p}DecoderLayer": (f"{p}Model", "decoder_layer(", 1),
        f"{p}Model": (f"{p}ForCausalLM", "self.model(", 1),
        f"{p}ForCausalLM": (SCRIPT, "model(", 1),
    }
    return table.get(klass)


def _with_frames(spec: ModelSpec, op: Op, b: int, q_len: int) -> Op:
    """Attach the model-source frames (innermost first) a with_stack profile would record."""
    p = spec.prefix
    frames: list[tuple[str, str, int]] = []
    inner = ""
    klass, call, occ = op.klass, op.call, op.occurrence
    if op.aten == "aten::linear" and op.attr.endswith(".gate") and op.klass.endswith(("SparseMoeBlock", "MoE")):
        # MoE router: the block calls self.gate(...); the router's forward calls F.linear.
        frames.append((f"{p}TopKRouter", "F.linear(", 1))
        inner = ""
    elif op.aten == "aten::linear" and call.startswith("self."):
        inner = "linear"
    elif op.type == "GatherV2":
        inner = "embedding"       # nn.Embedding: torch/nn/modules/sparse.py + module.py
    elif op.type == "Silu" and call == "self.act_fn(":
        inner = "act"             # transformers SiLUActivation module + module.py
    elif op.type == "RmsNorm":
        # A fused npu_rms_norm inside the RMSNorm module's forward (line of its `def forward`).
        frames.append((f"{p}RMSNorm", "def forward", 1))
        inner = ""
    if op.klass == f"{p}MLP" and op.layer is not None and spec.is_moe_layer(op.layer):
        # Shared expert MLP inside a MoE block.
        block = f"{p}SparseMoeBlock" if spec.family != "deepseek" else f"{p}MoE"
        frames.append((klass, call, occ))
        frames.append((block, "self.shared_expert(", 1))
        klass, call, occ = block, "", 0
    else:
        frames.append((klass, call, occ))
    cur = klass
    while True:
        par = _parent(spec, cur)
        if par is None:
            break
        frames.append(par)
        cur = par[0]
    aten_inputs = None
    if op.aten == "aten::linear":
        x, w = op.inputs[0], op.inputs[1]
        assert x is not None and w is not None
        rows = b if op.layer is None and op.attr.endswith("lm_head") else b * q_len
        seq = max(1, rows // b)
        aten_inputs = (Tensor((b, seq, x.shape[-1]), x.dtype), w,
                       op.inputs[2] if len(op.inputs) > 2 else None)
    return replace(op, frames=tuple(f for f in frames if f[1]), inner=inner, aten_inputs=aten_inputs)
