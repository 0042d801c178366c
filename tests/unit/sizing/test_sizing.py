"""Sizes against hand computations (seed 003 formulas, REFERENCE.md §5 caps and benefit)."""

from __future__ import annotations

import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.errors import InputError
from cannbot_prefetch.gain import GainInputs, expected
from cannbot_prefetch.sizing import Weight, WindowTime, size_site, theoretical_bytes
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

MIB = 2**20
B3, B4 = hardware.load("910B3"), hardware.load("910B4")


def test_llama_1b_gate_proj_coefficient_half():
    w = Weight((8192, 2048), 2, "gate")
    s = size_site(w, WindowTime(None), None, B3, pol=POLICY)
    assert s.weight_bytes == 8192 * 2048 * 2 == 33554432
    assert s.max_size == 16777216 and s.basis.bound_by == "coefficient"
    assert s.basis.coefficient == 0.5
    assert s.ladder == {"up": [0.7, 1.0], "down": [0.3, 0.1]}
    assert [c.name for c in s.basis.caps] == ["weight", "l2_budget"]


def test_the_default_cmo_rate_is_a_risk_not_a_cap():
    # issue 10 item 5: 285 GB/s is one public figure; by default it is shown, not binding
    w = Weight((8192, 2048), 2, "gate")
    s = size_site(w, WindowTime(3.0, bytes=16384), None, B3, pol=POLICY)
    caps = {c.name: c for c in s.basis.caps}
    assert caps["cmo_rate_x_window"].bytes == 855000           # 285 GB/s x 3 us
    assert caps["cmo_rate_x_window"].binding is False
    assert "risk" in caps["cmo_rate_x_window"].note
    # HBM 1.6 TB/s x 3 us - 16 KiB binds instead (a fact of the part and the window)
    assert s.max_size == int(1.6e12 * 3e-6) - 16384 and s.basis.bound_by == "hbm_headroom"


@pytest.mark.parametrize("how", ["flag", "override"])
def test_a_given_cmo_rate_binds(how):
    w = Weight((8192, 2048), 2, "gate")
    if how == "flag":
        s = size_site(w, WindowTime(3.0, bytes=16384), None, B3, cmo_bw_gbps=285, pol=POLICY)
    else:
        s = size_site(w, WindowTime(3.0, bytes=16384), None, B3.with_overrides(cmo_bw_gbps=285), pol=POLICY)
    cap = next(c for c in s.basis.caps if c.name == "cmo_rate_x_window")
    assert cap.binding and "--cmo-bw" in cap.note
    assert s.max_size == 855000 and s.basis.bound_by == "cmo_rate_x_window"


def test_sizes_land_in_public_practice_when_the_window_allows():
    # a 20 us window moves 32 MB at 1.6 TB/s: half of a 32 MiB weight is not capped (the ladder
    # can go on to 0.7 and 1.0), as public practice prefetches whole weights or large fractions
    w = Weight((8192, 2048), 2, "gate")
    s = size_site(w, WindowTime(20.0, bytes=0), None, B3, pol=POLICY)
    assert s.basis.bound_by == "coefficient" and s.max_size == 16 * MIB


@pytest.mark.parametrize("hw, vocab, l2_cap", [
    (B3, 128256, 192 * MIB // 2),   # Llama-3.2-1B lm_head on 910B3
    (B4, 128256, 96 * MIB // 2),    # ... on 910B4
    (B4, 151936, 96 * MIB // 2),    # Qwen2.5-3B lm_head (vocab 151936) on 910B4
])
def test_lm_head_larger_than_l2_shows_the_l2_cap(hw, vocab, l2_cap):
    w = Weight((vocab, 2048), 2, "lm_head")
    s = size_site(w, WindowTime(None), None, hw, pol=POLICY)
    assert s.weight_bytes == vocab * 2048 * 2 > hw.l2_bytes
    assert s.basis.bound_by == "l2_budget" and s.max_size == l2_cap


def test_l2_budget_is_shared_by_sites_in_flight():
    w = Weight((151936, 2048), 2, "lm_head")
    one = size_site(w, WindowTime(None), None, B3, in_flight=1, pol=POLICY)
    three = size_site(w, WindowTime(None), None, B3, in_flight=3, pol=POLICY)
    assert three.max_size == int(192 * MIB * 0.5 / 3) < one.max_size


def test_qwen25_3b_mlp_sizes():
    # Qwen2.5-3B: hidden 2048, intermediate 11008, bf16
    gate = size_site(Weight((11008, 2048), 2, "gate"), WindowTime(None), None, B3, pol=POLICY)
    down = size_site(Weight((2048, 11008), 2, "down"), WindowTime(None), None, B3, pol=POLICY)
    assert gate.weight_bytes == down.weight_bytes == 2048 * 11008 * 2 == 45088768
    assert gate.max_size == down.max_size == 22544384
    assert theoretical_bytes(Weight((2 * 11008, 2048), 2, "gate_up")) == (2048 * 11008 * 4, "H*I*2*b")


def test_qbmm_int8_and_user_cap():
    s = size_site(Weight((4096, 4096), 1, "qbmm"), WindowTime(None), None, B3, user_cap=4 * MIB, pol=POLICY)
    assert s.weight_bytes == 4096 * 4096
    assert s.max_size == 4 * MIB and s.basis.bound_by == "user"
    assert s.basis.formula.startswith("H*H*1")


def test_moe_gmm_formulas():
    # Qwen3-30B-A3B-like: H 2048, moe_intermediate 768, bf16, moe_tp 1, 8 experts per rank
    g1 = Weight((8, 1536, 2048), 2, "gmm1", hidden=2048, intermediate=768, moe_tp=1, experts_per_rank=8)
    g2 = Weight((8, 2048, 768), 2, "gmm2", hidden=2048, intermediate=768, moe_tp=1, experts_per_rank=8)
    assert theoretical_bytes(g1)[0] == 2048 * 768 * 2 * 2 // 1 * 8 // 2 == 25165824
    assert theoretical_bytes(g2)[0] == 2048 * 768 * 2 // 1 * 8 == 25165824
    # moe_tp 2 halves both; w8a8 (1 byte) halves again
    g1q = Weight((8, 1536, 2048), 1, "gmm1", hidden=2048, intermediate=768, moe_tp=2, experts_per_rank=8)
    assert theoretical_bytes(g1q)[0] == 2048 * 768 * 2 * 1 // 2 * 8 // 2 == 6291456
    s = size_site(g2, WindowTime(None), None, B3, pol=POLICY)
    assert s.max_size == 25165824 and s.basis.coefficient == 1.0
    # sized at 1.0: no rung up; down 0.3 and 0.1 of the formula's size
    assert s.ladder_bytes == {"up": [], "down": [int(25165824 * 0.3), int(25165824 * 0.1)]}
    with pytest.raises(InputError, match="experts_per_rank"):
        theoretical_bytes(Weight((8, 1536, 2048), 2, "gmm1", 2048, 768))


def test_max_size_is_always_positive():
    s = size_site(Weight((8192, 2048), 2, "gate"), WindowTime(0.0), None, B3, pol=POLICY)
    assert s.max_size == 1 and isinstance(s.max_size, int)
    assert any("nothing to prefetch" in n for n in s.notes)


def test_benefit_by_hand():
    # worked by hand (docs/planning.md "Gain bounds"): a 20 us window with no traffic of its own
    # hides min(16 MiB, 20 us x R): at the CMO rate 285 GB/s (configs/hardware/910B3.yaml) 5.7 MB,
    # at the mean of 285 GB/s and 1.6 TB/s (942.5 GB/s: 18.85 MB) and at HBM all 16 MiB
    op = GainInputs(mean_us=30.0, op_bytes=33558528, t_compute_us=0.1, per_step=16, window_us=20.0)
    p = 16 * MIB
    g = expected(p, op, B3, POLICY)
    got, optimistic = g.per_op, g.optimistic
    bw_eff = 33558528 / 30e-6
    hbm = 1.6e12
    for value, hidden, ratio in zip((got.low, got.mid, got.high), (5_700_000, p, p), (3.4, 4.2, 5.0)):
        assert value == pytest.approx(hidden / bw_eff * (1 - bw_eff / (ratio * hbm)) * 1e6, abs=1e-3)
    assert got.low == pytest.approx(4.048, abs=1e-3)        # 5.7e6 / 1.1186e12 x (1 - 0.2056)
    assert got.low < got.mid < got.high
    assert optimistic        # ~11.6 of 30 us per op is far above the public record


def test_the_low_bound_is_the_cmo_rate_not_the_l2_ratio():
    # issue 30 part 4: a given (--cmo-bw) or measured rate moves the low bound only
    op = GainInputs(mean_us=30.0, op_bytes=33558528, t_compute_us=0.1, per_step=1, window_us=5.0)
    p = 16 * MIB
    base = expected(p, op, B3, POLICY).per_op
    slow = expected(p, GainInputs(30.0, 33558528, 0.1, 1, 5.0, cmo_gbps=100.0), B3, POLICY).per_op
    bw_eff = 33558528 / 30e-6
    assert slow.low == pytest.approx(100e9 * 5e-6 / bw_eff * (1 - bw_eff / (3.4 * 1.6e12)) * 1e6,
                                     abs=1e-3)
    assert slow.low < base.low and slow.high == base.high
    # the same rate on the part (a calibrated hardware profile) gives the same floor
    assert expected(p, op, B3.with_overrides(cmo_bw_gbps=100.0), POLICY).per_op.low == slow.low


def test_benefit_bounded_by_compute_floor_and_busy_window():
    op = GainInputs(mean_us=10.0, op_bytes=16 * MIB, t_compute_us=8.0, per_step=1, window_us=100.0)
    got = expected(16 * MIB, op, B3, POLICY).per_op
    assert got.high == pytest.approx(2.0)           # at most op time - compute floor
    # a 10 us window whose own ops move 16 MB keeps HBM busy 10 us at 1.6 TB/s: nothing hides
    busy = expected(16 * MIB, GainInputs(10.0, 16 * MIB, 0.0, 1, 10.0, 16_000_000), B3, POLICY).per_op
    assert (busy.low, busy.mid, busy.high) == (0.0, 0.0, 0.0)
    # half busy: 5 us idle hides 1.425 MB at the CMO rate, 8 MB at HBM
    half = expected(16 * MIB, GainInputs(10.0, 16 * MIB, 0.0, 1, 10.0, 8_000_000), B3, POLICY).per_op
    bw_eff = 1.6e12       # 16 MiB in 10 us is above the 1.6 TB/s roof: BW_eff = HBM
    assert half.low == pytest.approx(1_425_000 / bw_eff * (1 - bw_eff / (3.4 * 1.6e12)) * 1e6, abs=1e-3)
    assert half.high == pytest.approx(8_000_000 / bw_eff * (1 - bw_eff / (5.0 * 1.6e12)) * 1e6, abs=1e-3)


def test_rungs_in_bytes_stop_at_the_weight_and_the_budget():
    w = Weight((8192, 2048), 2, "gate")                    # 32 MiB
    roomy = size_site(w, WindowTime(30.0), None, B3, pol=POLICY)       # 1.6 TB/s x 30 us = 48 MB budget
    assert roomy.max_size == 16 * MIB and roomy.basis.bound_by == "coefficient"
    assert roomy.ladder_bytes == {"up": [int(32 * MIB * 0.7), 32 * MIB],
                                  "down": [int(16 * MIB * 0.3 / 0.5), int(16 * MIB * 0.1 / 0.5)]}
    tight = size_site(w, WindowTime(5.0), None, B3, pol=POLICY)        # budget 8,000,000 B binds
    assert tight.max_size == 8_000_000 and tight.basis.bound_by == "hbm_headroom"
    assert tight.ladder_bytes["up"] == [8_000_000, 8_000_000]
    assert tight.ladder_bytes["down"] == [4_800_000, 1_600_000]


def test_no_profile_means_unknown_not_zero():
    s = size_site(Weight((8192, 2048), 2, "gate"), WindowTime(None), None, B3, pol=POLICY)
    assert s.saving_us is None and s.saving_per_op is None and s.mid == 0.0


def test_per_step_saving_scales_with_instances():
    op = GainInputs(mean_us=30.0, op_bytes=33558528, t_compute_us=0.1, per_step=16, window_us=50.0)
    s = size_site(Weight((8192, 2048), 2, "gate"), WindowTime(50.0), op, B3, pol=POLICY)
    assert s.saving_us.mid == pytest.approx(s.saving_per_op.mid * 16, rel=1e-3)
    assert s.optimistic


def test_moe_formula_never_exceeds_the_weight():
    """recurrent_gemma's 3-D gate bank [heads, block, block] is sized by the GMM formula from
    the config's H x I: the size stays within the weight's own bytes (was 16 MiB for a 3.2 MB
    weight, and the plan grammar refused the plan analyze wrote)."""
    w = Weight((10, 256, 256), 2, "gmm1", hidden=2560, intermediate=7680, moe_tp=1,
               experts_per_rank=10)
    assert theoretical_bytes(w)[0] == w.nbytes == 10 * 256 * 256 * 2


def _site(ev, max_size, dims=(8192, 2048)):
    from cannbot_prefetch.plan import Basis, Insert, Join, Saving, Site, Target
    return Site("s", Target("m.py", "M", "gate_proj", "self.gate_proj.weight"),
                Insert("M", "forward", "self.norm", "before"), "x", Join("M", "forward"),
                max_size, Basis(dims, 2.0, 0.5), {}, "shape", ev, Saving(0, 0, 0), "0" * 64)


@pytest.mark.parametrize("mean_us", [21.0, 33.0, 60.0])
def test_at_most_per_call_is_never_below_the_expected_saving(mean_us):
    # issue 30: "at most" 3.53 µs per call was shown beside an expected 4.78: the bound took the
    # op at the HBM roof (21 µs for 32 MiB at 1.6 TB/s) while the expected saving used its
    # measured 33 µs. The bound now keeps the measured time and hides the whole prefetch.
    from cannbot_prefetch.gain import per_call_bound, site_gain
    ev = {"mean_us": mean_us, "bytes_per_op": 33558528, "t_compute_us": 0.1,
          "instances_per_step": 16, "window": {"effective_us": 40.0, "bytes": 0}}
    site = _site(ev, 16 * MIB)
    got, bound = site_gain(site, B3, POLICY).gain.per_op, per_call_bound(site, B3, POLICY)
    for k in ("low", "mid", "high"):
        assert getattr(bound, k) >= getattr(got, k)
    # 40 us at HBM hides all 16 MiB: the high bound equals the bound
    assert bound.high == got.high
    # no recorded inputs (no profile): the op at the roof, 33554432 B / 1.6 TB/s
    t_roof = 8192 * 2048 * 2 / 1.6e12
    bare = per_call_bound(_site({}, 16 * MIB), B3, POLICY)
    assert bare.low == pytest.approx(16 * MIB / 1.6e12 * (1 - 1 / 3.4) * 1e6, abs=1e-3)
    assert bare.low <= t_roof * 1e6


def test_bound_size_takes_the_smallest_binding_cap_below_the_coefficient():
    """Issue 34: the one cap-binding rule (analyze's sizing and the report's next size). Hand
    values: weight 100 B is what the base is a share of, never a bound; the CMO cap (10 B) is
    not binding; of the binding caps below the base the smallest binds."""
    from cannbot_prefetch.plan import Cap
    from cannbot_prefetch.sizing import bound_size

    caps = (Cap("weight", 100), Cap("cmo_rate_x_window", 10, binding=False),
            Cap("hbm_headroom", 40), Cap("user", 60))
    assert bound_size(80, caps) == (40, "hbm_headroom")
    assert bound_size(50, caps) == (40, "hbm_headroom")
    assert bound_size(30, caps) == (30, "coefficient")
    assert bound_size(40, caps) == (40, "coefficient")          # a cap equal to the base: base
    assert bound_size(200, (Cap("weight", 100),)) == (200, "coefficient")
