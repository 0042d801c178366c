"""A model config + batch + context + tensor parallelism -> the device ops of one decode step.

GENERATED-PROFILE SUPPORT CODE (nothing measured). What one rank of a Hugging Face eager model
with the usual NPU fused kernels runs for one decode token per sequence, in execution order:

    GatherV2 (embed_tokens)
    per layer: RmsNorm (input_layernorm) -> MatMulV3 q_proj, k_proj, v_proj [Qwen3: RmsNorm
      q_norm / k_norm right after q_proj / k_proj] -> ApplyRotaryPosEmb -> 2 x ScatterUpdate (KV
      cache) -> FusedInferAttentionScore (MIX_AIC, reads the whole KV cache) -> MatMulV3 o_proj
      [-> hcom_allReduce_ when tp > 1] -> Add -> RmsNorm (post_attention_layernorm) ->
      dense MLP: MatMulV3 gate_proj -> Silu -> MatMulV3 up_proj -> Mul -> MatMulV3 down_proj
      MoE: MatMulV3 router (gate) -> MoeGatingTopKSoftmax -> MoeInitRouting ->
           MoeComputeExpertTokens -> GroupedMatmul gate_up_proj -> SwiGlu -> GroupedMatmul
           down_proj -> MoeFinalizeRouting
      [-> hcom_allReduce_ when tp > 1 (dense)] -> Add
    RmsNorm (norm) -> MatMulV3 lm_head [-> hcom_allGather_ when tp > 1] -> Cast -> ArgMaxV2

Choices, stated once:
- Every nn.Linear is its own MatMulV3 (HF does not fuse q/k/v or gate/up); `x @ W^T` shows the
  weight as stored, [N, K]: input shapes "M,K;N,K".
- Tensor parallelism (Megatron style, tp ranks, rank 0 profiled): column-parallel q/k/v/gate/up
  split their output dim by tp, row-parallel o/down their input dim, each followed by an HCCL
  all-reduce of the [B, H] hidden state; attention runs heads/tp and kv_heads/tp per rank;
  lm_head is vocab-parallel (vocab/tp) followed by an all-gather of the logits; the embedding
  is replicated. The all-reduce runs inside the o_proj / down_proj module call (a TP forward
  hook), so its call stack is that linear's. MoE profiles are tp 1 (experts are not sharded).
- MoE (Qwen3-MoE, HF 5.x fused 3-D expert weights): GroupedMatmul weights [E, N, K] (format NCL,
  like the real vllm-ascend row); per layer and step the experts hit are
  E_hit = round(E * (1 - (1 - k/E) ** B)) (B tokens, top-k, independent uniform routing: an
  assumption), and only their weights are read from HBM.
- Decode attention reads the KV cache of `context` positions for each of the B sequences
  (BNSD, bf16): the long-context profiles make it memory-bound by its counters.
- Execution order is Python's evaluation order of the HF source (`down_proj(act_fn(gate_proj(x))
  * up_proj(x))` runs gate, Silu, up, Mul, down): order "hf". Order "graph" (issue 30) is what a
  graph compiler may make of the same statement, the two independent MatMuls first: gate, up,
  Silu, Mul, down (the kernels and their call stacks are the same; only their order differs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from . import physics as P

DTYPE_BYTES = {"DT_BF16": 2, "FLOAT16": 2, "FLOAT": 4, "INT32": 4, "INT64": 8, "UINT64": 8}
TORCH_TYPE = {"DT_BF16": "c10::BFloat16", "FLOAT16": "c10::Half", "FLOAT": "float", "INT32": "int",
              "INT64": "long int", "UINT64": "unsigned long"}
SCRIPT = "<script>"     # the driver script's frame (a plain greedy decode loop)


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

    @property
    def dims(self) -> str:
        return ",".join(map(str, self.shape))


def T(*shape: int, dtype: str = "DT_BF16", fmt: str = "ND") -> Tensor:
    return Tensor(tuple(int(s) for s in shape), dtype, fmt)


# A model frame: (class, call texts tried in order, occurrence). "def forward" = the def line.
Frame = tuple[str, tuple[str, ...], int]


@dataclass(frozen=True)
class Op:
    """One device task of a step: a kernel_details row, where it comes from, and its physics."""

    type: str                           # OP Type: MatMulV3, RmsNorm, hcom_allReduce_, ...
    name: str                           # kernel name (aclnn<Api>_<Tiling>_<Type>)
    core: str                           # AI_CORE | AI_VECTOR_CORE | MIX_AIC | HCCL
    inputs: tuple[Tensor | None, ...]   # None = an absent optional input (empty shape segment)
    outputs: tuple[Tensor, ...]
    role: str                           # "LlamaAttention.q_proj", "LlamaDecoderLayer.input_layernorm", ...
    layer: int | None                   # decoder layer, None outside the layers
    frames: tuple[Frame, ...]           # model frames, innermost first (the script last)
    # torch frames inside the innermost model frame: "linear" (nn.Linear), "embedding",
    # "act" (transformers' activation module), "module" (a module hook: the TP collectives), "".
    inner: str
    aten: str                           # framework cpu_op around the launch
    launcher: str                       # the launching cpu_op
    pipes: P.Pipes | None               # None for communication
    comm_us: float = 0.0                # communication duration before jitter
    weight: Tensor | None = None        # the prefetchable operand
    aten_inputs: tuple[Tensor | None, ...] | None = None   # shapes the framework op sees
    input_dtypes: tuple[str, ...] | None = None            # dtypes of absent inputs (GMM)

    @property
    def kind(self) -> str:
        if self.core == "HCCL":
            return "comm"
        return "vector" if self.core == "AI_VECTOR_CORE" else "cube"

    @property
    def base_us(self) -> float:
        """Duration before jitter and warm-up."""
        return self.comm_us if self.pipes is None else self.pipes.duration

    @property
    def verdict(self) -> str:
        """The counter verdict (CONTRACTS.md rule on the ratios written), or communication."""
        return "communication" if self.pipes is None else self.pipes.verdict

    @property
    def memory_bound(self) -> bool:
        return self.verdict == "memory-bound"

    @property
    def attr(self) -> str:
        """The last part of role: q_proj, o_proj, input_layernorm, attention, ..."""
        return self.role.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Model:
    """The sizes of a decode step, read from config.json (HF spelling)."""

    model_type: str
    prefix: str          # HF class prefix: Llama, Qwen3Moe
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    vocab: int
    qk_norm: bool = False
    experts: int = 0
    top_k: int = 0
    moe_intermediate: int = 0


PREFIX = {"llama": "Llama", "qwen3_moe": "Qwen3Moe", "mistral": "Mistral", "qwen2": "Qwen2"}


def model_of(cfg: Mapping[str, Any]) -> Model:
    mt = str(cfg.get("model_type"))
    if mt not in PREFIX:
        raise ValueError(f"model_type {mt!r} is not generated here (known: {', '.join(PREFIX)})")
    heads = int(cfg["num_attention_heads"])
    return Model(
        model_type=mt, prefix=PREFIX[mt], hidden=int(cfg["hidden_size"]),
        intermediate=int(cfg["intermediate_size"]), heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads),
        layers=int(cfg["num_hidden_layers"]), vocab=int(cfg["vocab_size"]),
        qk_norm=mt == "qwen3_moe", experts=int(cfg.get("num_experts") or 0),
        top_k=int(cfg.get("num_experts_per_tok") or 0),
        moe_intermediate=int(cfg.get("moe_intermediate_size") or 0))


def experts_hit(experts: int, top_k: int, tokens: int) -> int:
    """Expected distinct experts B tokens touch with top-k of E (independent uniform routing)."""
    return round(experts * (1.0 - (1.0 - top_k / experts) ** tokens))


class _Builder:
    def __init__(self, m: Model, hw: P.Part, batch: int, context: int, tp: int, order: str = "hf"):
        if order not in ("hf", "graph"):
            raise ValueError(f"order {order!r}: hf or graph")
        self.order = order
        for what, n in (("num_attention_heads", m.heads), ("num_key_value_heads", m.kv_heads),
                        ("intermediate_size", m.intermediate), ("vocab_size", m.vocab)):
            if n % tp:
                raise ValueError(f"tp {tp} does not divide {what} {n}")
        if tp > 1 and m.experts:
            raise ValueError("MoE profiles are generated at tp 1 only")
        self.m, self.hw, self.b, self.ctx, self.tp = m, hw, batch, context, tp
        p = m.prefix
        self.attn, self.mlp, self.layer_cls = f"{p}Attention", f"{p}MLP", f"{p}DecoderLayer"
        self.model_cls, self.lm_cls, self.norm_cls = f"{p}Model", f"{p}ForCausalLM", f"{p}RMSNorm"
        self.block, self.experts_cls, self.router = f"{p}SparseMoeBlock", f"{p}Experts", f"{p}TopKRouter"
        self.parents: dict[str, Frame] = {
            self.attn: (self.layer_cls, ("self.self_attn(",), 1),
            self.mlp: (self.layer_cls, ("self.mlp(",), 1),
            self.block: (self.layer_cls, ("self.mlp(",), 1),
            self.experts_cls: (self.block, ("self.experts(",), 1),
            self.router: (self.block, ("self.gate(",), 1),
            self.layer_cls: (self.model_cls, ("decoder_layer(",), 1),
            self.model_cls: (self.lm_cls, ("self.model(",), 1),
            self.lm_cls: (SCRIPT, ("model(",), 1),
        }

    # -- frames
    def chain(self, *inner: Frame) -> tuple[Frame, ...]:
        frames = list(inner)
        cls = frames[-1][0]
        while cls in self.parents:
            frames.append(self.parents[cls])
            cls = frames[-1][0]
        return tuple(frames)

    # -- op kinds
    def linear(self, role: str, layer: int | None, k: int, n: int, frames: tuple[Frame, ...],
               rows: int | None = None) -> Op:
        """nn.Linear y[M,N] = x[M,K] @ W[N,K]^T on the cube."""
        m = rows or self.b
        x, w, y = T(m, k), T(n, k), T(m, n)
        pipes = P.pipes("aic", self.hw, read=x.nbytes + w.nbytes, write=y.nbytes, flops=2.0 * m * k * n)
        return Op("MatMulV3", "aclnnMm_MatMulV3Common_MatMulV3", "AI_CORE", (x, w), (y,), role, layer,
                  frames, "linear" if frames[0][1][0].startswith("self.") else "", "aten::linear",
                  "aclnnMm", pipes, weight=w, aten_inputs=(T(self.b, 1, k), w, None))

    def vector(self, type_: str, role: str, layer: int | None, ins, outs, frames, aten: str,
               ops_per_elem: float, inner: str = "", read: int | None = None,
               write: int | None = None, launcher: str | None = None) -> Op:
        elems = max(t.numel for t in outs)
        rd = sum(t.nbytes for t in ins if t is not None) if read is None else read
        wr = sum(t.nbytes for t in outs) if write is None else write
        pipes = P.pipes("aiv", self.hw, read=rd, write=wr, elem_ops=ops_per_elem * elems)
        launcher = launcher or "aclnn" + type_.replace("V2", "")
        return Op(type_, f"{launcher}_{type_}_{type_}", "AI_VECTOR_CORE", tuple(ins), tuple(outs), role,
                  layer, frames, inner, aten, launcher, pipes)

    def rmsnorm(self, role: str, layer: int | None, caller: Frame, rows: int, width: int) -> Op:
        x = T(rows, width)
        return self.vector("RmsNorm", role, layer, (x, T(width)), (x, T(rows, 1, dtype="FLOAT")),
                           self.chain((self.norm_cls, ("def forward",), 1), caller),
                           "npu::npu_rms_norm", 4.0)

    def comm(self, kind: str, role: str, layer: int | None, t: Tensor, frames, inner: str) -> Op:
        name = {"allReduce": "hcom_allReduce_", "allGather": "hcom_allGather_"}[kind]
        return Op(name, f"{name}_{role.replace('.', '_')}", "HCCL", (t,), (t,), f"{role}.{kind}", layer,
                  frames, inner, f"c10d::{kind.lower()}_", f"Hccl{kind[0].upper()}{kind[1:]}", None,
                  comm_us=P.hccl_us(t.nbytes, self.tp))

    # -- the step
    def step(self) -> list[Op]:
        m, b = self.m, self.b
        ops = [self.embedding()]
        for i in range(m.layers):
            ops += self.layer(i)
        ops.append(self.rmsnorm(f"{self.model_cls}.norm", None, (self.model_cls, ("self.norm(",), 1),
                                b, m.hidden))
        v = m.vocab // self.tp
        head_frames = self.chain((self.lm_cls, ("self.lm_head(",), 1))
        ops.append(self.linear(f"{self.lm_cls}.lm_head", None, m.hidden, v, head_frames))
        if self.tp > 1:
            ops.append(self.comm("allGather", f"{self.lm_cls}.lm_head", None, T(b, m.vocab), head_frames,
                                 "module"))
        logits, logits32 = T(b, m.vocab), T(b, m.vocab, dtype="FLOAT")
        script = ((SCRIPT, ("model(",), 1),)
        ops.append(self.vector("Cast", f"{SCRIPT}.logits_float", None, (logits,), (logits32,), script,
                               "aten::_to_copy", 1.0))
        ops.append(self.vector("ArgMaxV2", f"{SCRIPT}.argmax", None, (logits32,), (T(b, dtype="INT64"),),
                               ((SCRIPT, ("torch.argmax(",), 1),), "aten::argmax", 1.0))
        return ops

    def embedding(self) -> Op:
        m, b = self.m, self.b
        table, ids, out = T(m.vocab, m.hidden), T(b, 1, dtype="INT64"), T(b, 1, m.hidden)
        return self.vector("GatherV2", f"{self.model_cls}.embed_tokens", None, (table, ids), (out,),
                           self.chain((self.model_cls, ("self.embed_tokens(",), 1)), "aten::embedding",
                           1.0, inner="embedding", read=out.nbytes + ids.nbytes, launcher="aclnnEmbedding")

    def layer(self, i: int) -> list[Op]:
        m, b, tp = self.m, self.b, self.tp
        L, A = self.layer_cls, self.attn
        nq, nkv, hd, h = m.heads // tp, m.kv_heads // tp, m.head_dim, m.hidden
        ops = [self.rmsnorm(f"{L}.input_layernorm", i, (L, ("self.input_layernorm(",), 1), b, h)]
        for proj, n in (("q_proj", nq), ("k_proj", nkv), ("v_proj", nkv)):
            ops.append(self.linear(f"{A}.{proj}", i, h, n * hd, self.chain((A, (f"self.{proj}(",), 1))))
            if m.qk_norm and proj != "v_proj":
                norm = proj[0] + "_norm"
                ops.append(self.rmsnorm(f"{A}.{norm}", i, (A, (f"self.{norm}(",), 1), b * n, hd))
        q, k, cos = T(b, nq, 1, hd), T(b, nkv, 1, hd), T(b, 1, 1, hd)
        ops.append(self.vector("ApplyRotaryPosEmb", f"{A}.apply_rotary_pos_emb", i, (q, k, cos, cos),
                               (q, k), self.chain((A, ("apply_rotary_pos_emb(",), 1)),
                               "npu::npu_apply_rotary_pos_emb", 3.0))
        cache, upd, idx = T(b, nkv, self.ctx, hd), T(b, nkv, 1, hd), T(b, dtype="INT64")
        for which in ("key", "value"):
            # In place: only the new position is read and written, not the whole cache.
            ops.append(self.vector("ScatterUpdate", f"{A}.{which}_cache_update", i, (cache, idx, upd),
                                   (upd,), self.chain((A, ("cache.update(", "past_key_values.update("), 1)),
                                   "npu::scatter_update_", 1.0, read=upd.nbytes + idx.nbytes,
                                   write=upd.nbytes))
        ops.append(self.attention(i, q, cache))
        o_frames = self.chain((A, ("self.o_proj(",), 1))
        ops.append(self.linear(f"{A}.o_proj", i, nq * hd, h, o_frames))
        if tp > 1:
            ops.append(self.comm("allReduce", f"{A}.o_proj", i, T(b, h), o_frames, "module"))
        ops.append(self.add(i, 1))
        ops.append(self.rmsnorm(f"{L}.post_attention_layernorm", i, (L, ("self.post_attention_layernorm(",), 1),
                                b, h))
        ops += self.moe(i) if m.experts else self.dense_mlp(i)
        ops.append(self.add(i, 2))
        return ops

    def add(self, i: int, occurrence: int) -> Op:
        x = T(self.b, 1, self.m.hidden)
        return self.vector("Add", f"{self.layer_cls}.residual_add_{occurrence}", i, (x, x), (x,),
                           self.chain((self.layer_cls, ("residual + hidden_states",), occurrence)),
                           "aten::add", 1.0)

    def attention(self, i: int, q: Tensor, cache: Tensor) -> Op:
        b, nq, hd, ctx = self.b, q.shape[1], q.shape[3], self.ctx
        out, seq = T(b, nq, 1, hd), T(b, dtype="INT64")
        scores = b * nq * ctx
        pipes = P.pipes("aic", self.hw, read=q.nbytes + 2 * cache.nbytes + seq.nbytes, write=out.nbytes,
                        flops=4.0 * b * nq * ctx * hd, aiv_side=(5.0 * scores, 4 * scores, 4 * scores))
        name = "aclnnFusedInferAttentionScoreV2_FusedInferAttentionScore_FusedInferAttentionScore"
        return Op("FusedInferAttentionScore", name, "MIX_AIC", (q, cache, cache, seq), (out,),
                  f"{self.attn}.attention", i, self.chain((self.attn, ("attention_interface(",), 1)), "",
                  "npu::npu_fused_infer_attention_score", "aclnnFusedInferAttentionScoreV2", pipes)

    def dense_mlp(self, i: int) -> list[Op]:
        m, b, M = self.m, self.b, self.mlp
        inter, h = m.intermediate // self.tp, m.hidden
        g = T(b, inter)
        act = self.chain((M, ("self.act_fn(",), 1))
        ops = [self.linear(f"{M}.gate_proj", i, h, inter, self.chain((M, ("self.gate_proj(",), 1))),
               self.vector("Silu", f"{M}.act_fn", i, (g,), (g,), act, "aten::silu", 4.0, inner="act"),
               self.linear(f"{M}.up_proj", i, h, inter, self.chain((M, ("self.up_proj(",), 1))),
               self.vector("Mul", f"{M}.act_mul", i, (g, g), (g,), act, "aten::mul", 1.0)]
        if self.order == "graph":
            ops = [ops[0], ops[2], ops[1], ops[3]]
        down_frames = self.chain((M, ("self.down_proj(",), 1))
        ops.append(self.linear(f"{M}.down_proj", i, inter, h, down_frames))
        if self.tp > 1:
            ops.append(self.comm("allReduce", f"{M}.down_proj", i, T(b, h), down_frames, "module"))
        return ops

    def moe(self, i: int) -> list[Op]:
        m, b = self.m, self.b
        E, k, h, im = m.experts, m.top_k, m.hidden, m.moe_intermediate
        bk, X, R = b * k, self.experts_cls, self.router
        ops = [self.linear(f"{R}.weight", i, h, E, self.chain((R, ("F.linear(",), 1)))]
        ops.append(self.vector("MoeGatingTopKSoftmax", f"{R}.topk", i, (T(b, E),),
                               (T(b, k), T(b, k, dtype="INT32"), T(b, k, dtype="INT32")),
                               self.chain((R, ("torch.topk(",), 1)), "npu::npu_moe_gating_top_k_softmax",
                               8.0 * E / k))
        x = T(b, h)
        ops.append(self.vector("MoeInitRouting", f"{X}.init_routing", i,
                               (x, T(b, k, dtype="INT32"), T(b, k, dtype="INT32")),
                               (T(bk, h), T(bk, dtype="INT32"), T(bk, dtype="INT32")),
                               self.chain((X, ("one_hot(",), 1)), "npu::npu_moe_init_routing", 2.0))
        ops.append(self.vector("MoeComputeExpertTokens", f"{X}.expert_tokens", i, (T(bk, dtype="INT32"),),
                               (T(E, dtype="INT64"),), self.chain((X, ("torch.greater(",), 1)),
                               "npu::npu_moe_compute_expert_tokens", 1.0))
        ops.append(self.gmm(i, "gate_up_proj", h, 2 * im))
        ops.append(self.vector("SwiGlu", f"{X}.act_fn", i, (T(bk, 2 * im),), (T(bk, im),),
                               self.chain((X, ("self.act_fn(",), 1)), "npu::npu_swiglu", 5.0))
        ops.append(self.gmm(i, "down_proj", im, h))
        ops.append(self.vector("MoeFinalizeRouting", f"{X}.finalize_routing", i,
                               (T(bk, h), x, None, None, T(b, k), T(bk, dtype="INT32"), T(b, k, dtype="INT32")),
                               (x,), self.chain((X, ("index_add_(",), 1)), "npu::npu_moe_finalize_routing",
                               2.0 * k))
        return ops

    def gmm(self, i: int, attr: str, k: int, n: int) -> Op:
        """GroupedMatmul over the expanded rows; only the hit experts' weights are read."""
        m = self.m
        rows = self.b * m.top_k
        x, w, y, groups = T(rows, k), T(m.experts, n, k, fmt="NCL"), T(rows, n), T(m.experts, dtype="INT64")
        hit = experts_hit(m.experts, m.top_k, self.b)
        read = x.nbytes + hit * n * k * DTYPE_BYTES[w.dtype] + groups.nbytes
        pipes = P.pipes("aic", self.hw, read=read, write=y.nbytes, flops=2.0 * rows * k * n)
        ins = (x, w, None, None, None, None, None, groups)
        dtypes = ("DT_BF16", "DT_BF16", "FLOAT", "UINT64", "FLOAT", "FLOAT16", "FLOAT16", "INT64")
        return Op("GroupedMatmul", "aclnnGroupedMatmulV5_GroupedMatmul_GroupedMatmul", "MIX_AIC", ins, (y,),
                  f"{self.experts_cls}.{attr}", i, self.chain((self.experts_cls, (f"self.{attr}[",), 1)), "",
                  "npu::npu_grouped_matmul", "aclnnGroupedMatmulV5", pipes, weight=w, input_dtypes=dtypes)


def step_ops(cfg: Mapping[str, Any], hw: P.Part, *, batch: int, context: int, tp: int = 1,
             order: str = "hf") -> list[Op]:
    """The device ops of one decode step of rank 0, in execution order."""
    if batch < 1 or context < 1 or tp < 1:
        raise ValueError("batch, context and tp must be >= 1")
    return _Builder(model_of(cfg), hw, batch, context, tp, order).step()
