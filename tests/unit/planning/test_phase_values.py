"""plan/phase.py's query lengths pinned by hand (issue 34 part 4: `max` -> `min` of the query
lengths survived the mutation run). HAND-BUILT tables: a step holds a decode attention op
(query [1, 32, 1, 64], BNSD with 32 heads: S = 1) and a prompt-style one (query
[1, 32, 128, 64]: S = 128); Llama-3.2-1B's config numbers (32 heads, head_dim 64)."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl

from cannbot_prefetch.plan.phase import query_lengths, seq_len, signature_query_len
from cannbot_prefetch.policy import Policy

ATTENTION = Policy.load().op_classes["attention_ops"]    # the shipped configs/op_classes.yaml

CFG = {"num_attention_heads": 32, "hidden_size": 2048, "head_dim": 64}


def _table(rows):
    return SimpleNamespace(df=pl.DataFrame(rows, schema={"step": pl.Int64, "type": pl.Utf8,
                                                          "input_shapes": pl.Utf8,
                                                          "sig_id": pl.Int64}, orient="row"))


def test_a_steps_query_length_is_the_largest_its_attention_ops_show():
    t = _table([(1, "FusedInferAttentionScore", "1,32,1,64;1,8,4096,64", None),
                (1, "FusedInferAttentionScore", "1,32,128,64;1,8,4096,64", None),
                (2, "FusedInferAttentionScore", "1,32,1,64;1,8,4096,64", None),
                (2, "MatMulV2", "1,2048;2048,2048", 0)])
    assert query_lengths(t, CFG, attention_ops=ATTENTION) == {1: 128, 2: 1}


def test_a_signatures_query_length_is_the_largest_over_its_steps():
    t = _table([(1, "MatMulV2", "1,2048;2048,2048", 7), (2, "MatMulV2", "1,2048;2048,2048", 7),
                (3, "MatMulV2", "1,2048;2048,2048", 8)])
    sig = SimpleNamespace(sig_id=7, m=1)
    assert signature_query_len(t, sig, {1: 1, 2: 16, 3: 512})[0] == 16
    other = SimpleNamespace(sig_id=8, m=64)
    assert signature_query_len(t, other, {1: 1})[0] == 64       # no attention op: M stands in


def test_layouts_are_told_apart_by_the_head_count():
    heads = {32}
    assert seq_len((1, 32, 7, 64), heads, 64) == 7       # BNSD
    assert seq_len((1, 7, 32, 64), heads, 64) == 7       # BSND
    assert seq_len((1, 7, 2048), heads, 64) == 7         # BSH: 2048 = 32 x 64
    assert seq_len((1, 7, 9, 64), heads, 64) is None     # neither dim is the head count
