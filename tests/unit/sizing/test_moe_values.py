"""moe.experts_hit pinned by values worked out by hand and by counting (issue 34 part 4).

The small cases are checked against an enumeration of every routing, written here without the
formula: each of T tokens picks top_k distinct experts of E, all C(E, k)^T routings equally
likely; the rank holds experts 0 .. E_rank-1. Counting gives the expected experts hit on the
rank and the expected rows (token, expert) pairs the rank's GroupedMatmul sees, which is what
`experts_hit` reads back to T.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, product

import pytest

from cannbot_prefetch.moe import experts_hit, from_config


def _enumerate(experts: int, top_k: int, tokens: int, experts_rank: int) -> tuple[Fraction, Fraction]:
    """(expected distinct experts hit on the rank, expected rows on the rank), exact."""
    picks = list(combinations(range(experts), top_k))
    hit = rows = Fraction(0)
    routings = list(product(picks, repeat=tokens))
    for routing in routings:
        chosen = [e for pick in routing for e in pick if e < experts_rank]
        hit += len(set(chosen))
        rows += len(chosen)
    n = len(routings)
    return hit / n, rows / n


@pytest.mark.parametrize("experts, top_k, tokens, experts_rank, want_hit, want_rows", [
    # 2 tokens, top-2 of 4: one token misses a given expert in C(3,2)/C(4,2) = 3 of 6 picks,
    # both in 1/4: p = 3/4, 4 x 3/4 = 3 experts hit; rows 2 x 2 = 4
    (4, 2, 2, 4, Fraction(3), Fraction(4)),
    # the same routing, the rank holds experts 0 and 1 (EP 2): 2 x 3/4 = 1.5 hit; rows: 4 pairs,
    # half of them on this rank = 2
    (4, 2, 2, 2, Fraction(3, 2), Fraction(2)),
    # 3 tokens, top-1 of 3: a given expert missed by all with (2/3)^3 = 8/27: p = 19/27,
    # 3 x 19/27 = 19/9 hit; rows 3
    (3, 1, 3, 3, Fraction(19, 9), Fraction(3)),
])
def test_small_cases_match_counting(experts, top_k, tokens, experts_rank, want_hit, want_rows):
    hit, rows = _enumerate(experts, top_k, tokens, experts_rank)
    assert (hit, rows) == (want_hit, want_rows)                  # the hand values, by counting
    h = experts_hit(int(rows), top_k, experts, experts_rank)
    assert h.tokens == tokens                                    # rows read back to T
    assert h.hit == pytest.approx(float(want_hit), rel=1e-12)
    assert h.share == pytest.approx(float(want_hit) / experts_rank, rel=1e-12)


def test_qwen3_moe_shapes_by_hand():
    """Top-8 of 128 (Qwen3-MoE's config): a given expert missed by one token with 120/128 =
    0.9375. ln 0.9375 = -0.0645385.
    1 token, all 128 experts here: 8 rows, p = 8/128 = 0.0625, 8 experts hit.
    96 tokens (vllm-ascend's threshold, docs/sources.md): rows 96 x 8 = 768,
      0.9375^96 = e^(-6.19570) = 0.0020382: p = 0.9979618, 127.74 experts hit.
    EP 16 (8 experts on this rank): 8 rows = T x 8 x 8/128 -> T = 16,
      0.9375^16 = e^(-1.032616) = 0.3560741: p = 0.6439259, 8 x p = 5.15141 hit."""
    one = experts_hit(rows=8, top_k=8, experts=128, experts_rank=128)
    assert (one.tokens, one.share, one.hit) == (1, pytest.approx(0.0625), pytest.approx(8.0))
    many = experts_hit(rows=768, top_k=8, experts=128, experts_rank=128)
    assert many.tokens == 96 and many.share == pytest.approx(0.9979618, abs=1e-7)
    assert many.hit == pytest.approx(127.7391, abs=1e-4)
    ep = experts_hit(rows=8, top_k=8, experts=128, experts_rank=8)
    assert ep.tokens == 16 and ep.share == pytest.approx(0.6439259, abs=1e-7)
    assert ep.hit == pytest.approx(5.15141, abs=1e-5)


def test_a_fractional_token_count():
    """3 rows of top-2 over 4 experts, all here: T = 3 x 4 / (2 x 4) = 1.5 tokens (a mean over
    calls need not be whole); p = 1 - (1/2)^1.5 = 1 - 0.3535534 = 0.6464466, 2.585786 hit."""
    h = experts_hit(rows=3, top_k=2, experts=4, experts_rank=4)
    assert h.tokens == 1.5 and h.share == pytest.approx(0.6464466, abs=1e-7)
    assert h.hit == pytest.approx(2.585786, abs=1e-6)


def test_top_k_above_the_experts_hits_them_all():
    """A top-k of 8 over 4 experts can pick each expert at most once: every token hits all 4
    (k is capped at E: the miss chance is 1 - 4/4 = 0): p = 1, 4 hit. 16 rows = T x 8 x 4/4 ->
    T = 2. Without the cap the miss chance 1 - 8/4 = -1 would give p = 1 - (-1)^2 = 0."""
    h = experts_hit(rows=16, top_k=8, experts=4, experts_rank=4)
    assert (h.tokens, h.share, h.hit) == (2, 1.0, 4.0)


def test_from_config_reads_the_names_and_caps_the_rank():
    """Qwen3-MoE's key names; a rank said to hold 256 of 128 experts holds 128 (1 token: 8 hit)."""
    cfg = {"num_experts": 128, "num_experts_per_tok": 8}
    h = from_config(cfg, rows=8, experts_rank=256)
    assert (h.experts, h.top_k, h.experts_rank, h.tokens, h.hit) == (128, 8, 128, 1, pytest.approx(8.0))
    assert from_config({"num_experts": 128}, rows=8, experts_rank=8) is None      # no top-k: nothing assumed
    assert from_config(cfg, rows=0, experts_rank=8) is None
