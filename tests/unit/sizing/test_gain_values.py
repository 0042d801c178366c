"""gain.expected pinned by values worked out by hand (issue 34 part 4: the `min(..., hbm)` of
the op's effective bandwidth and the useful-share factor survived the mutation run).

Inputs (chosen so every term is exact in decimal): HBM 1.6e12 B/s; the op moves 8e6 B in
10 µs (8e11 B/s, below HBM: that is its effective rate), 1 µs of compute (ceiling 10 - 1 =
9 µs); a 100 µs window moving nothing (idle 100 µs: the 4e6 B prefetch lands whole at every
rate, 10 µs even at the 400 GB/s CMO rate given here); the op reads half of what is prefetched
(useful 2e6 B); L2/HBM ratios 2, 3 (mid), 4.
saved(r) = 2e6 / 8e11 * (1 - 8e11 / (r * 1.6e12)) s = 2.5 µs * (1 - 1/(2r)):
  r=2: 2.5 * 0.75 = 1.875;  r=3: 2.5 * 5/6 = 2.0833;  r=4: 2.5 * 0.875 = 2.1875 µs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cannbot_prefetch.gain import GainInputs, expected

HW = SimpleNamespace(hbm_bw_bytes_per_s=1.6e12, cmo_bw_gbps=400.0)  # rates 4e11 / 1e12 / 1.6e12
POL = {"benefit": {"l2_to_hbm_bw_ratio": [2.0, 4.0], "optimistic_op_share": 0.5}}


def _g(**kw):
    base = dict(mean_us=10.0, op_bytes=8_000_000, t_compute_us=1.0, per_step=2.0,
                window_us=100.0, window_bytes=0, useful_share=0.5)
    base.update(kw)
    return GainInputs(**base)


def test_expected_by_hand():
    g = expected(4_000_000, _g(), HW, POL)
    assert (g.per_op.low, g.per_op.mid, g.per_op.high) == pytest.approx((1.875, 2.083, 2.1875),
                                                                         abs=1e-3)
    assert (g.per_step.low, g.per_step.mid, g.per_step.high) == pytest.approx(
        (3.75, 4.167, 4.375), abs=2e-3)                         # x 2 ops per step
    assert g.share_of_op == pytest.approx(0.2083, abs=1e-4) and g.optimistic is False


def test_an_op_faster_than_hbm_is_costed_at_the_hbm_rate():
    """8e6 B in 2 µs would be 4e12 B/s, above HBM: the effective rate is HBM's 1.6e12.
    saved(r) = 2e6 / 1.6e12 * (1 - 1/r) s = 1.25 µs * (1 - 1/r): 0.625, 0.8333, 0.9375 µs;
    the ceiling (2 - 0.5 = 1.5 µs) does not bind."""
    g = expected(4_000_000, _g(mean_us=2.0, t_compute_us=0.5), HW, POL)
    assert (g.per_op.low, g.per_op.mid, g.per_op.high) == pytest.approx((0.625, 0.833, 0.9375),
                                                                         abs=1e-3)


def test_the_ceiling_and_a_busy_window():
    """Ceiling: compute 9.5 of 10 µs leaves 0.5 µs, below every saved(r) above. A window of
    1 µs that itself moves 1.6e6 B keeps HBM busy its whole 1 µs: idle 0, nothing hidden, 0."""
    g = expected(4_000_000, _g(t_compute_us=9.5), HW, POL)
    assert (g.per_op.low, g.per_op.mid, g.per_op.high) == pytest.approx((0.5, 0.5, 0.5))
    g = expected(4_000_000, _g(window_us=1.0, window_bytes=1_600_000), HW, POL)
    assert (g.per_op.low, g.per_op.mid, g.per_op.high) == (0.0, 0.0, 0.0)


def test_the_low_bound_is_the_cmo_rate():
    """Issue 30: the low bound is a floor at the CMO rate. A 5 µs window moving nothing hides
    min(4e6, 5e-6 x r): 2e6 B at 4e11 B/s (low), all 4e6 B at 1e12 (mid) and 1.6e12 (high).
    low = 2e6 x 0.5 / 8e11 x (1 - 1/4) = 0.9375 µs; mid, high as in the first test."""
    g = expected(4_000_000, _g(window_us=5.0), HW, POL)
    assert (g.per_op.low, g.per_op.mid, g.per_op.high) == pytest.approx((0.9375, 2.083, 2.1875),
                                                                         abs=1e-3)
    # a measured or given rate (plan evidence cmo_gbps) replaces the part's: 200 GB/s hides 1e6 B
    g = expected(4_000_000, _g(window_us=5.0, cmo_gbps=200.0), HW, POL)
    assert g.per_op.low == pytest.approx(1.25 * 0.75 / 2, abs=1e-3)
