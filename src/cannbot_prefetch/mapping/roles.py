"""Which role a linear-like attribute plays, by its name (the seed's sizing formulas and tensor
parallelism need it).

Roles follow the attribute names of Hugging Face, vLLM and DeepSeek sources (first match wins).
Tensor parallelism (Megatron style, as Hugging Face's own `base_model_tp_plan` / `_tp_plan`
declares it for Llama-family models): q/k/v, gate/up (and the fused qkv / gate_up) are
column-parallel - each rank holds out_dim / tp rows; o/down are row-parallel - each rank holds
in_dim / tp columns; lm_head is column-parallel over the vocabulary. Routers are replicated.
`shard_linear` / `shard_experts` apply that split to a weight's dims on one rank.
"""

from __future__ import annotations

from typing import Any

# attribute name -> the seed's role (sizing formulas); first match wins
ROLES = (("gate_up", "gate_up"), ("w13", "gate_up"), ("w1", "gate"), ("w3", "up"), ("w2", "down"),
         ("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down"), ("qkv", "qkv"),
         ("q_a_proj", "q"), ("q_b_proj", "q"), ("q_proj", "q"), ("k_proj", "k"),
         ("v_proj", "v"), ("o_proj", "o"), ("out_proj", "o"), ("dense", "o"),
         ("lm_head", "lm_head"), ("classifier", "router"), ("gate", "router"))

COLUMN_PARALLEL = frozenset({"q", "k", "v", "qkv", "gate", "up", "gate_up", "lm_head"})
ROW_PARALLEL = frozenset({"o", "down"})


def name_role(attr: str) -> str:
    """The role an attribute's name says (`linear` when none)."""
    name = attr.split(".")[-1].lower()
    for key, role in ROLES:
        if key in name:
            return role
    return "linear"


def tp_split(role: str) -> str | None:
    """'column' (out dim / tp), 'row' (in dim / tp) or None (replicated)."""
    if role in COLUMN_PARALLEL:
        return "column"
    if role in ROW_PARALLEL:
        return "row"
    return None


def _head_dim(cfg: dict[str, Any]) -> int | None:
    hd = cfg.get("head_dim")
    if isinstance(hd, int) and hd > 0:
        return hd
    h, heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    return h // heads if isinstance(h, int) and isinstance(heads, int) and heads > 0 else None


def shard_linear(cfg: dict[str, Any], attr: str, n: int, k: int, tp: int) -> tuple[int, int]:
    """A Hugging Face nn.Linear's [out, in] on one of `tp` ranks (column-parallel
    q/k/v/gate/up/lm_head split out, row-parallel o/down split in). K/V projections keep at least
    one head per rank: with fewer KV heads than ranks each rank holds a replica."""
    role = name_role(attr)
    split = tp_split(role)
    if split == "column":
        hd = _head_dim(cfg) if role in ("k", "v") else None
        return (max(n // tp, hd) if hd and n >= hd else n // tp), k
    if split == "row":
        return n, k // tp
    return n, k


def shard_experts(cfg: dict[str, Any], attr: str, dims: tuple[int, ...], moe_tp: int
                  ) -> tuple[int, ...]:
    """A fused 3-D expert Parameter on one of `moe_tp` ranks: gate_up [E, 2I, H] splits 2I,
    down [E, H, I] splits I. Only a dim equal to the model's full intermediate size is split, so a
    source that already sizes its experts per partition (vLLM) is left as it is."""
    inter = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    if not isinstance(inter, int) or inter <= 0:
        return dims
    role = name_role(attr)
    e, a, b = dims
    if tp_split(role) == "column" and a in (inter, 2 * inter):
        return e, a // moe_tp, b
    if tp_split(role) == "row" and b == inter:
        return e, a, b // moe_tp
    return dims
