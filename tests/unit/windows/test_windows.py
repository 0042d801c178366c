"""Seed 003 decision table rows 3a / 3b / 3c on HAND-BUILT kernel tables (labelled, not measured)."""

from __future__ import annotations

import pytest

from cannbot_prefetch import reasons
from cannbot_prefetch.windows import (COMM, HEAVY, LIGHT, Candidate, Rejection, TargetSig,
                                      default_rules, find_windows)
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

MIB = 2**20
GATE = TargetSig(sig_id=0, type="MatMulV2", input_shapes="1,2048;8192,2048", bytes=8192 * 2048 * 2,
                 weight_bytes=8192 * 2048 * 2, n=8192, k=2048, m=1, mean_us=15.0)
O_SIG = TargetSig(sig_id=1, type="MatMulV2", input_shapes="1,2048;2048,2048", bytes=2048 * 2048 * 2,
                  weight_bytes=2048 * 2048 * 2, n=2048, k=2048, m=1)
NORM = dict(type="RmsNorm", dur=3.0, shapes="1,2048;2048", dtypes="BF16;BF16")
ADD = dict(type="Add", dur=1.5, shapes="1,2048;1,2048")


def _one(res):
    assert len(res.candidates) + len(res.rejections) == 1, res
    return (res.candidates or res.rejections)[0]


def test_3b_light_predecessor_starts_window_at_its_input(table):
    kt = table([dict(type="Cast", dur=1.0), ADD, NORM,
                dict(type="MatMulV2", dur=15.0, sig=0, shapes="1,2048;8192,2048")])
    c = _one(find_windows(kt, [GATE], all_signatures=[O_SIG], lookback=3, min_window_us=2.0))
    assert isinstance(c, Candidate)
    w = c.window
    # no MatMul within the lookback: the nearest light start long enough stands
    assert (w.branch, w.start, w.start_op.type) == ("3b", "input", "RmsNorm")
    assert w.time_us == pytest.approx(3.0)      # RmsNorm's input is ready when Add ends
    assert [o.type for o in w.ops] == ["RmsNorm"]


def test_3a_finished_matmul_output_beats_the_nearest_light_start(table):
    """Seed 003: o_proj's output is the MLP's window even though [RmsNorm] alone is long
    enough: the window from o_proj's end holds Add and RmsNorm (1.5 + 3.0 µs, no gaps)."""
    kt = table([dict(type="MatMulV2", dur=8.0, sig=1, shapes="1,2048;2048,2048"), ADD, NORM,
                dict(type="MatMulV2", dur=15.0, sig=0, shapes="1,2048;8192,2048")])
    c = _one(find_windows(kt, [GATE], all_signatures=[O_SIG], lookback=3, min_window_us=2.0))
    assert isinstance(c, Candidate)
    w = c.window
    assert (w.branch, w.start, w.start_op.type, w.start_op.cls) == ("3a", "output", "MatMulV2",
                                                                   HEAVY)
    assert w.time_us == pytest.approx(1.5 + 3.0)
    assert w.to_dict()["ops"] == ["Add", "RmsNorm"]             # execution order
    # with a lookback of 1 the walk never reaches o_proj: the nearest start
    n = _one(find_windows(kt, [GATE], all_signatures=[O_SIG], lookback=1, min_window_us=2.0))
    assert (n.window.branch, n.window.start_op.type, n.window.time_us) == ("3b", "RmsNorm",
                                                                          pytest.approx(3.0))


def test_3b_walks_back_until_the_window_is_long_enough(table):
    kt = table([ADD, dict(type="Cast", dur=1.0), dict(type="Reshape", dur=0.5),
                dict(type="MatMulV2", dur=15.0, sig=0)], gap_us=0.2)
    c = _one(find_windows(kt, [GATE], lookback=3, min_window_us=2.0))
    assert isinstance(c, Candidate)
    assert c.window.branch == "3b" and c.window.start_op.type == "Cast"
    assert c.window.time_us == pytest.approx(0.2 + 1.0 + 0.2 + 0.5 + 0.2)


def test_3a_large_matmul_output_starts_the_window(table):
    # o_proj (8 MiB weight: large) -> idle launch gap -> Cast -> gate_proj
    kt = table([dict(type="MatMulV2", dur=9.0, sig=1), dict(type="Cast", dur=1.0, gap=1.5),
                dict(type="MatMulV2", dur=15.0, sig=0)])
    c = _one(find_windows(kt, [GATE], all_signatures=[O_SIG], lookback=3, min_window_us=2.0))
    assert isinstance(c, Candidate)
    assert (c.window.branch, c.window.start, c.window.start_op.type) == ("3a", "output", "MatMulV2")
    assert c.window.start_op.cls == HEAVY
    assert c.window.time_us == pytest.approx(2.5)
    assert [o.type for o in c.window.ops] == ["Cast"]


def test_3c_communication_predecessor_means_no_safe_window(table):
    kt = table([NORM, dict(type="hcom_allReduce_", dur=30.0, core="HCCL", stream=None),
                dict(type="MatMulV2", dur=15.0, sig=0)])
    r = _one(find_windows(kt, [GATE], lookback=3, min_window_us=2.0))
    assert isinstance(r, Rejection)
    assert r.reason_code == reasons.NO_SAFE_WINDOW
    assert "communication" in r.reason and "3c" in r.reason


def test_3c_memory_heavy_predecessor_without_room(table):
    # up_proj right after gate_proj: the large MatMul's output leaves no time
    kt = table([NORM, dict(type="MatMulV2", dur=15.0, sig=0), dict(type="MatMulV2", dur=15.0, sig=0)])
    res = find_windows(kt, [GATE], lookback=3, min_window_us=2.0)
    codes = sorted(r.reason_code for r in res.rejections)
    assert codes == [reasons.MEMORY_HEAVY_PREDECESSOR]
    assert len(res.candidates) == 1            # the first one (after RmsNorm) is a 3b window


def test_3c_light_ops_too_short(table):
    kt = table([dict(type="Cast", dur=0.3), dict(type="MatMulV2", dur=15.0, sig=0)])
    r = _one(find_windows(kt, [GATE], lookback=3, min_window_us=2.0))
    assert isinstance(r, Rejection) and r.reason_code == reasons.WINDOW_TOO_SHORT


def test_communication_on_another_stream_shrinks_or_disqualifies(table):
    ops = [ADD, dict(type="RmsNorm", dur=6.0), dict(type="MatMulV2", dur=15.0, sig=0)]
    free = _one(find_windows(table(ops), [GATE], lookback=3, min_window_us=2.0))
    assert free.window.time_us == pytest.approx(6.0) and free.window.overlap_us == 0
    # an HCCL row (no stream id) covering 3 us of the 6 us window shrinks it
    part = ops + [dict(type="hcom_allGather_", dur=3.0, core="HCCL", stream=None, start=2.0)]
    c = _one(find_windows(table(part), [GATE], lookback=3, min_window_us=2.0))
    assert isinstance(c, Candidate)
    assert c.window.overlap_us == pytest.approx(3.0) and c.window.time_us == pytest.approx(3.0)
    # covering it all disqualifies it
    full = ops + [dict(type="hcom_allGather_", dur=10.0, core="HCCL", stream=None, start=0.0)]
    r = find_windows(table(full), [GATE], lookback=1, min_window_us=2.0).rejections
    assert [x.reason_code for x in r] == [reasons.COMM_IN_WINDOW]


def test_same_signature_two_call_sites_become_two_clusters(table):
    # q_proj (after RmsNorm) and o_proj (after attention) share a shape: two candidates, q first
    layer = [dict(type="Add", dur=1.5), dict(type="RmsNorm", dur=3.0),
             dict(type="MatMulV2", dur=8.0, sig=1),
             dict(type="FusedInferAttentionScore", dur=6.0, shapes="1,32,1,64", dtypes="BF16"),
             dict(type="TransposeD", dur=1.0, shapes="1,32,1,64"),
             dict(type="MatMulV2", dur=8.0, sig=1)]
    res = find_windows(table(layer * 4), [O_SIG], lookback=3, min_window_us=2.0)
    got = sorted((x.cluster, x.instances) for x in (*res.candidates, *res.rejections))
    assert got == [(0, 4), (1, 4)]
    q = next(x for x in (*res.candidates, *res.rejections) if x.cluster == 0)
    # layers 2-4: the previous layer's o_proj output (3a, over Add and RmsNorm); layer 1 has
    # nothing before its Add: 3 of 4 instances agree
    assert isinstance(q, Candidate) and (q.window.branch, q.window.start_op.type) == ("3a",
                                                                                    "MatMulV2")
    assert q.window.instances == 3 and "3 of 4 instances agree" in q.window.reason


def test_median_and_min_over_instances(table):
    ops = []
    for norm_us in (3.0, 4.0, 10.0):
        ops += [ADD, dict(type="RmsNorm", dur=norm_us), dict(type="MatMulV2", dur=15.0, sig=0)]
    c = _one(find_windows(table(ops), [GATE], lookback=1, min_window_us=2.0))
    assert c.window.time_us == pytest.approx(4.0) and c.window.min_us == pytest.approx(3.0)
    assert c.instances == 3 and c.window.instances == 3


@pytest.mark.parametrize("typ, core, nbytes, dur, cls", [
    ("RmsNorm", "AI_VECTOR_CORE", 8192, 3.0, LIGHT),
    ("SwiGlu", "AI_VECTOR_CORE", 65536, 2.0, LIGHT),
    ("MatMulV2", "AI_CORE", 512 * 1024, 3.0, LIGHT),            # router.classifier: small MatMul
    ("MatMulV2", "AI_CORE", 64 * MIB, 40.0, HEAVY),
    ("TransposeD", "AI_VECTOR_CORE", 4096, 1.0, LIGHT),          # small transpose
    ("ConcatD", "AI_VECTOR_CORE", 32 * MIB, 25.0, HEAVY),        # large concat
    ("hcom_allReduce_", "HCCL", 0, 30.0, COMM),
    ("MatmulAllReduce", "MIX_AIC", 1024, 30.0, COMM),            # MC2 contains communication
    ("SomethingNew", "AI_CORE", 16 * MIB, 30.0, HEAVY),          # unknown but large: by size
])
def test_classes_come_from_size_not_name_alone(typ, core, nbytes, dur, cls):
    assert default_rules(POLICY).classify(typ, typ, core, nbytes, dur)[0] == cls


def test_needs_sig_id(table):
    import polars as pl
    from cannbot_prefetch.errors import InputError
    from cannbot_prefetch.profiling.table import KernelTable
    kt = table([NORM])
    with pytest.raises(InputError, match="sig_id"):
        find_windows(KernelTable(kt.df.drop("sig_id")), [GATE])


def test_window_class_without_bytes_is_long_not_large():
    """A mover with no shapes (bytes 0) that runs long: 'long ... bytes unknown', never '0.0 MiB'."""
    from cannbot_prefetch.windows.classes import default_rules

    r = default_rules(POLICY)
    cls, why = r.classify("TransposeD", "TransposeD", "AI_CORE", 0, 500.0, memory_bound=None)
    assert "0.00 MiB" not in why and "bytes unknown" in why and why.startswith("long ")
    cls, why = r.classify("TransposeD", "TransposeD", "AI_CORE", 64 << 20, 500.0)
    assert why.startswith("large data movement (64.00 MiB moved, 500.0 µs")   # 64 << 20 B


def test_a_window_covered_by_compute_on_another_stream_is_too_short_not_communication(table):
    """Issue 34 part 4 (the communication check of rule 3c survived the mutation run): a
    memory-heavy op on another stream (a 10 µs TransData over 8192x8192 bf16, stream 7)
    covering the whole 6 µs window leaves it too short; only communication there is
    `communication_in_window`."""
    ops = [ADD, dict(type="RmsNorm", dur=6.0), dict(type="MatMulV2", dur=15.0, sig=0),
           dict(type="TransData", dur=10.0, stream="7", start=0.0, shapes="8192,8192",
                dtypes="BF16")]
    res = find_windows(table(ops), [GATE], lookback=1, min_window_us=2.0)
    assert not res.candidates
    assert [x.reason_code for x in res.rejections] == [reasons.WINDOW_TOO_SHORT]
