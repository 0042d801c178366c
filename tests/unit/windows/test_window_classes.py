"""Issue 10 item 3: every op in a window is classed by its counters when present (any op type,
attention included), else by roofline time and bytes; a memory-bound op is never free window
time. HAND-BUILT tables (tests/unit/windows/conftest.py, counters added here) and GENERATED
decode profiles (tests/matrix decodegen)."""

from __future__ import annotations

import polars as pl
import pytest

from cannbot_prefetch import hardware, reasons
from cannbot_prefetch.profiling.table import KernelTable
from cannbot_prefetch.windows import HEAVY, LIGHT, Candidate, TargetSig, default_rules, find_windows
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

MIB = 2**20
HBM = 1.6e12          # 910B3, bytes/s
O_SIG = TargetSig(sig_id=0, type="MatMulV2", input_shapes="1,2048;2048,2048", n=2048, k=2048, m=1,
                  bytes=2048 * 2048 * 2)
FIA = dict(type="FusedInferAttentionScore", dur=8.0, core="MIX_AIC",
           shapes="1,32,1,64;1,8,4096,64;1,8,4096,64", dtypes="BF16;BF16;BF16")   # 8 MiB of KV


def _with_counters(kt: KernelTable, counters: dict[int, dict[str, float]]) -> KernelTable:
    """Add PipeUtilization ratios to the rows (by position) named in `counters`."""
    cols = ("aic_mac_ratio", "aic_mte2_ratio", "aiv_vec_ratio", "aiv_mte2_ratio")
    df = kt.df.with_row_index("__i")
    for c in cols:
        vals = [counters.get(i, {}).get(c) for i in range(df.height)]
        df = df.with_columns(pl.Series(c, vals, dtype=pl.Float64))
    return KernelTable(df.drop("__i"))


def _o_proj_after(table, fia: dict, counters=None, hbm=HBM):
    layer = [dict(type="RmsNorm", dur=3.0), dict(type="MatMulV2", dur=8.0, sig=0), fia,
             dict(type="MatMulV2", dur=8.0, sig=0)]
    kt = table(layer * 3, gap_us=1.0)
    if counters:
        idx = [i for i in range(12) if i % 4 == 2]
        kt = _with_counters(kt, {i: counters for i in idx})
    res = find_windows(kt, [O_SIG], lookback=3, min_window_us=2.0, hbm_bps=hbm)
    return next(x for x in (*res.candidates, *res.rejections) if x.site_rank == 1)


def test_attention_memory_bound_by_its_counters_is_no_window(table):
    o = _o_proj_after(table, FIA, {"aic_mte2_ratio": 0.9, "aic_mac_ratio": 0.05})
    assert not isinstance(o, Candidate)
    assert o.reason_code == reasons.MEMORY_HEAVY_PREDECESSOR
    assert "FusedInferAttentionScore" in o.reason and "memory-bound by its counters" in o.reason
    # the same op, counters say latency-bound: a light window again
    o = _o_proj_after(table, FIA, {"aic_mte2_ratio": 0.5, "aic_mac_ratio": 0.05})
    assert isinstance(o, Candidate) and [p.type for p in o.window.ops] == [FIA["type"]]
    assert o.window.ops[0].cls == LIGHT and "latency-bound by its counters" in o.window.ops[0].why


def test_without_counters_attention_is_classed_by_roofline_time(table):
    # 8 MiB + 0.1 MiB in 8 µs: 5.3 µs at 1.6 TB/s, 66% of the HBM rate -> memory-bound
    o = _o_proj_after(table, FIA)
    assert not isinstance(o, Candidate) and "FusedInferAttentionScore" in o.reason
    assert "of the HBM rate" in o.reason
    # a short context (512 positions: 1 MiB in 8 µs, 8%) is light
    short = dict(FIA, shapes="1,32,1,64;1,8,512,64;1,8,512,64")
    o = _o_proj_after(table, short)
    assert isinstance(o, Candidate) and [p.cls for p in o.window.ops] == [LIGHT]


@pytest.mark.parametrize("verdict, cls", [("memory-bound", HEAVY), ("latency-bound", LIGHT)])
def test_a_matmul_is_classed_by_its_verdict_not_its_size(verdict, cls):
    """A 6 MiB memory-bound MatMul (k_proj of Llama-3.2-3B) is not a "small MatMul"; a 0.5 MiB
    router whose roofline time is mostly launch overhead is light."""
    rules = default_rules(POLICY)
    got, why = rules.classify("MatMulV3", "MatMulV3", "AI_CORE", 6 * MIB, 8.0, is_matmul=True,
                              memory_bound=verdict == "memory-bound", hbm_bps=HBM)
    assert got == cls and "small MatMul" not in why


def test_vector_counters_class_a_vector_op():
    rules = default_rules(POLICY)
    heavy = rules.classify("Add", "Add", "AI_VECTOR_CORE", 1024, 4.0, pipes=(0, 0, 0.1, 0.92),
                           hbm_bps=HBM)
    light = rules.classify("Add", "Add", "AI_VECTOR_CORE", 64 * MIB, 4.0, pipes=(0, 0, 0.3, 0.2),
                           hbm_bps=HBM)
    assert heavy[0] == HEAVY and "aiv mte2 0.92" in heavy[1]
    assert light[0] == LIGHT          # the counters decide, not the bytes


@pytest.mark.parametrize("context, memory_bound", [(512, False), (8192, True)])
def test_generated_decode_attention_by_context(tmp_path, context, memory_bound):
    """GENERATED Llama-3.2-3B decode at batch 1 on 910B4: attention over 8192 positions is
    memory-bound by its counters, over 512 it is not; o_proj's window follows."""
    from decodegen import Spec, generate
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.roofline.classify import classify, select_top
    g = generate(Spec("llama-3.2-3b", hardware="910B4", batch=1, context=context, steps=2),
                 tmp_path)
    fia = next(o for o in g.ops if o.type == "FusedInferAttentionScore")
    assert fia.memory_bound == memory_bound         # the generator's truth
    hw = hardware.load("910B4")
    roof = classify(load_profile(g.profile).table, hw)
    res = find_windows(roof.table, select_top(roof, 10), all_signatures=roof.signatures,
                       hbm_bps=hw.hbm_bw_bytes_per_s)
    o_shape = ";".join(t.dims for t in next(o for o in g.ops if o.role.endswith("o_proj")).inputs
                       if t is not None)
    o = [x for x in (*res.candidates, *res.rejections) if x.target.input_shapes == o_shape
         and (x.preds and x.preds[0].type == "FusedInferAttentionScore")]
    assert len(o) == 1
    if memory_bound:
        assert not isinstance(o[0], Candidate)
        assert "memory-bound by its counters" in o[0].reason
    else:
        assert isinstance(o[0], Candidate)
        # the generator's own op order: what runs between the MatMul before o_proj and o_proj
        # is the window (rule 3a: that MatMul's output starts it), every op of it light
        i = next(k for k, op in enumerate(g.ops) if op.role.endswith("o_proj"))
        m = max(k for k in range(i) if g.ops[k].role.endswith("_proj"))
        # (the two KV-cache ScatterUpdate kernels share one launching op, aclnnScatterUpdate,
        # and count as one framework op)
        between = [t for k, t in enumerate(op.type for op in g.ops[m + 1:i])
                   if k == 0 or g.ops[m + k].type != t]
        w = o[0].window
        assert (w.branch, w.start_op.type) == ("3a", g.ops[m].type)
        assert [(p.type.removeprefix("aclnn"), p.cls) for p in reversed(w.ops)] == [
            (t, LIGHT) for t in between]


def test_kind_of_answers_belong_to_their_rules_object():
    """Issue 34: kind_of's cache was a module dict keyed by id(rules); a new WindowRules that
    reused a freed one's id took its answers. 200 short-lived rule objects, alternating
    whether "MatMul" is a MatMul pattern: each answers by its own patterns."""
    import gc

    from cannbot_prefetch.windows.classes import rules_from

    wrong = 0
    for i in range(200):
        config = {"matmul": ["MatMul"] if i % 2 == 0 else [], "communication": [],
                  "movers": [], "light": [], "communication_cores": []}
        rules = rules_from(config, {})
        want = "matmul" if i % 2 == 0 else "other"      # by the patterns just given
        wrong += rules.kind_of("MatMulV3", "aclnnMatmul_MatMulV3", "AI_CORE") != want
        del rules
        gc.collect()
    assert wrong == 0


def test_a_long_op_is_heavy_only_when_not_known_to_be_compute_bound():
    """Issue 34 part 4 (the memory-bound condition of a long op survived the mutation run).
    Without hardware numbers the sizes stand in: an op of 50 µs (>= windows.large_op_us 20)
    with unknown bytes is a long mover, unless its verdict says it is not memory-bound."""
    from cannbot_prefetch.windows.classes import rules_from

    rules = rules_from({"movers": ["TransData"], "matmul": [], "communication": [],
                        "light": [], "communication_cores": []}, {"windows": {"large_op_us": 20}})
    assert rules.classify("TransData", "TransData", "AI_VECTOR_CORE", 0, 50.0) == \
        (HEAVY, "long data movement (50.0 µs, bytes unknown)")
    assert rules.classify("TransData", "TransData", "AI_VECTOR_CORE", 0, 50.0,
                          memory_bound=False) == \
        (LIGHT, "small data movement (50.0 µs, bytes unknown)")
    assert rules.classify("TransData", "TransData", "AI_VECTOR_CORE", 0, 19.0)[0] == LIGHT
