"""Which role a linear-like attribute plays, by its name (the seed's sizing formulas and tensor
parallelism need it).

Roles follow the attribute names of Hugging Face, vLLM and DeepSeek sources (first match wins).
Tensor parallelism (Megatron style, as Hugging Face's own `base_model_tp_plan` / `_tp_plan`
declares it for Llama-family models): q/k/v, gate/up (and the fused qkv / gate_up) are
column-parallel - each rank holds out_dim / tp rows; o/down are row-parallel - each rank holds
in_dim / tp columns; lm_head is column-parallel over the vocabulary. Routers are replicated.
"""

from __future__ import annotations

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
