"""Decode or prefill, by tokens per sequence (query length), never by the total token count
(CONTRACTS.md "Defaults"): decode at batch 128 or 256 is still decode, a 512-token prompt is not.

A step's query length is read from its attention ops (configs/op_classes.yaml `attention_ops`):
their first input is the query, [B, heads, S, head_dim] (BNSD) or [B, S, heads, head_dim]
(BSND), told apart by the query heads per rank from config.json (`num_attention_heads` / --tp),
or [B, S, heads x head_dim] (BSH). Ops named as decode-only (incremental attention) are one token
per sequence, prompt-only ones are read like the others. A signature's query length is the
largest over the steps it runs in. Without a readable attention op the total token count M of
the MatMul stands in, and the reason says so.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping

import polars as pl

from ..roofline.shapes import parse_shapes


def _names(sec: Mapping[str, Any], key: str) -> frozenset[str]:
    return frozenset(str(x).lower() for x in sec.get(key) or [])


def _heads(cfg: dict[str, Any], tp: int) -> tuple[set[int], int | None]:
    c = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    heads = c.get("num_attention_heads")
    if not isinstance(heads, int) or heads <= 0:
        return set(), None
    hd = c.get("head_dim") or (c.get("hidden_size", 0) // heads or None)
    per_rank = {heads // tp} if tp > 1 and heads % tp == 0 else set()
    return {heads} | per_rank, hd if isinstance(hd, int) else None


def seq_len(dims: tuple[int, ...], heads: set[int], head_dim: int | None) -> int | None:
    """Tokens per sequence of an attention query tensor, None when its layout is not readable."""
    if len(dims) == 4:
        _, x, y, d = dims
        if head_dim and d != head_dim:
            return None
        if x == y:
            return x
        if x in heads and y not in heads:
            return y                          # BNSD
        if y in heads and x not in heads:
            return x                          # BSND
        return None
    if len(dims) == 3 and head_dim:
        _, s, h = dims
        if any(h == n * head_dim for n in heads):
            return s                          # BSH (TND [tokens, heads, head_dim] is not read)
    return None


def query_lengths(table: Any, cfg: dict[str, Any], tp: int = 1, *,
                  attention_ops: Mapping[str, Any]) -> dict[Any, int]:
    """Per step: the largest query length its attention ops show. `attention_ops`: the run's
    configs/op_classes.yaml `attention_ops` (`policy.op_classes`)."""
    df = table.df
    names, decode = _names(attention_ops, "types"), _names(attention_ops, "decode")
    if df.height == 0 or not (names | decode):
        return {}
    att = df.filter(pl.col("type").str.to_lowercase().is_in(list(names | decode)))
    heads, hd = _heads(cfg, tp)
    out: dict[Any, int] = defaultdict(int)
    read: dict[tuple, int | None] = {}      # the same few shapes repeat every layer and step
    for step, typ, shapes in att.select("step", "type", "input_shapes").iter_rows():
        key = (typ, shapes)
        if key not in read:
            read[key] = _query_len(typ, shapes, decode, heads, hd)
        s = read[key]
        if s is not None:
            out[step] = max(out[step], s)
    return dict(out)


def _query_len(typ: str, shapes: str | None, decode: frozenset, heads, hd) -> int | None:
    """One attention op's query length: 1 for a decode-only kernel, else from its first
    input's shape (seq_len)."""
    if typ.lower() in decode:
        return 1
    parsed = parse_shapes(shapes) or []
    q = parsed[0] if parsed else None
    return seq_len(tuple(q), heads, hd) if q else None


def signature_query_len(table: Any, sig: Any, per_step: dict[Any, int]) -> tuple[int | None, str]:
    """(tokens per sequence, how it was read) for a MatMul signature."""
    steps = table.df.filter(pl.col("sig_id") == sig.sig_id)["step"].unique().to_list()
    known = [per_step[s] for s in steps if s in per_step]
    if known:
        return max(known), "query length of the attention ops in its steps"
    m = getattr(sig, "m", None)
    return m, "total tokens M: no attention op with a readable query shape in its steps"
