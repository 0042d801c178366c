"""The timeline classes an op when it is first read, and other streams' busy work is what each
stream ran itself: an HCCL row merged into a compute stream's gap (it waits on it) is not
counted again as that stream's own work. HAND-BUILT tables (tests/unit/windows/conftest.py)."""

from __future__ import annotations

from cannbot_prefetch.windows import COMM, HEAVY, LIGHT, default_rules
from cannbot_prefetch.windows.find import timeline
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

HBM = 1.6e12          # 910B3, bytes/s
BIG = "1,4096;4096,4096"     # 32 MiB of BF16 moved in 10 us: memory-heavy by its roofline


def _two_streams(table):
    """Stream 2 idles 10-30 us while an HCCL all-reduce (no stream) runs 12-28 us; stream 3
    runs a heavy op 0-40 us beside both."""
    return table([
        dict(type="Add", dur=10.0, start=0.0),
        dict(type="Mul", dur=10.0, start=30.0),
        dict(type="hcom_allReduce_", name="hcom_allReduce__1", core="HCCL", dur=16.0,
             start=12.0, stream=None),
        dict(type="Cast", dur=40.0, start=0.0, stream="3", shapes=BIG, dtypes="BF16;BF16"),
    ])


def test_communication_in_a_gap_counts_once_for_another_streams_target(table):
    per, other = timeline(_two_streams(table).df, (), default_rules(POLICY), HBM)
    assert [o.type for o in per[(1, "2")]] == ["Add", "hcom_allReduce_", "Mul"]   # merged in
    cast = per[(1, "3")][0]
    # the all-reduce once (HCCL row), not again as stream 2's: 16 us, not 32
    assert other.comm_overlap(cast.start, cast.end) == 16.0
    # a target on stream 3 sees the all-reduce and nothing of stream 2's light ops
    assert other.overlap(cast.start, cast.end, cast) == 16.0
    # a target on stream 2 sees stream 3's heavy op and the HCCL row, merged: 40 us
    assert other.overlap(cast.start, cast.end, per[(1, "2")][2]) == 40.0


def test_ops_are_classed_when_read_with_the_rules_classes(table):
    per, other = timeline(_two_streams(table).df, (), default_rules(POLICY), HBM)
    ops = [o for seq in per.values() for o in seq]
    assert all(o._cls is None for o in ops if o.type in ("Add", "Mul"))   # nothing asked yet
    assert {o.type: o.cls for o in ops} == {"Add": LIGHT, "Mul": LIGHT, "Cast": HEAVY,
                                            "hcom_allReduce_": COMM}
    assert "HCCL" in per[(1, None)][0].why


def test_op_fields_bytes_from_the_signature_else_the_shapes(table):
    """A MatMul op carries its signature's roofline bytes, any other op the bytes its shapes
    move; an op with no type is shown by its name, with neither as "?"; no shapes read ""."""
    sigs = [type("Sig", (), dict(sig_id=7, type="MatMul", input_shapes=BIG, bytes=123,
                                 verdict="memory-bound", measured_verdict=None))()]
    df = table([dict(type="MatMul", dur=10.0, shapes=BIG, sig=7),
                dict(type="Cast", dur=10.0, shapes=BIG),
                dict(type="", name="my_kernel", dur=1.0),
                dict(type="", name="", dur=1.0)]).df
    per, _ = timeline(df, sigs, default_rules(POLICY), HBM)
    mm, cast, named, bare = per[(1, "2")]
    assert (mm.bytes, mm.sig) == (123, 7)
    assert cast.bytes == 2 * (4096 + 4096 * 4096) and cast.sig is None   # BF16 in, as stored
    assert (named.type, named.name, named.shapes) == ("my_kernel", "my_kernel", "")
    assert (bare.type, bare.name) == ("?", "")
    assert cast.pipes is None            # no counters
