"""Issue 10 item 2: every kernel instance belongs to exactly one linear; linears of one shape are
told apart by their order within the layer (never merged); calls per step match the model or a
warning says why not. Profiles: GENERATED (tests/matrix decodegen, examples/synth) and
HAND-BUILT tables (tests/unit/windows/conftest.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.profiling.table import KernelTable
from cannbot_prefetch.roofline.classify import classify, select_top
from cannbot_prefetch.windows import TargetSig, find_windows


def _no_stacks(table: KernelTable) -> KernelTable:
    """The same kernels as a profile without call stacks or framework ops (kernel_details.csv
    alone, Level1 without with_stack)."""
    df = table.df.with_columns(pl.lit(None, dtype=pl.Utf8).alias("stack"))
    return KernelTable(df.drop([c for c in ("launch_op", "launch_input_dims") if c in df.columns]))


@pytest.fixture(scope="module")
def llama3b(tmp_path_factory):
    from decodegen import Spec, generate
    return generate(Spec("llama-3.2-3b", hardware="910B3", batch=1, context=512),
                    tmp_path_factory.mktemp("g"))


@pytest.mark.parametrize("stacks", [True, False])
def test_each_same_shape_linear_keeps_its_own_instances(llama3b, stacks):
    prof = load_profile(llama3b.profile)
    table = prof.table if stacks else _no_stacks(prof.table)
    roof = classify(table, hardware.load("910B3"))
    res = find_windows(roof.table, select_top(roof, 10), all_signatures=roof.signatures)
    got = [*res.candidates, *res.rejections]
    # per signature: as many clusters as linears of that shape, each with 28 calls per step
    by_shape = Counter(x.target.input_shapes for x in got)
    truth = Counter(f"1,{lin.weight_shape[1]};{lin.weight_shape[0]},{lin.weight_shape[1]}"
                    for lin in llama3b.linears.values())
    assert by_shape == truth
    for x in got:
        want = 1 if x.target.n == 128256 else llama3b.layers
        assert x.per_step == want, (x.target.label, x.cluster, x.per_step)
    # no instance counted twice, none left out
    mm = roof.table.df.filter(pl.col("sig_id").is_not_null() & pl.col("step").is_in([2, 3]))
    assert sum(x.instances for x in got) == mm.height


def test_layer_zero_is_not_folded_into_the_next_same_shape_linear(table):
    """HAND-BUILT: q / k / v where k and v share a shape and layer 0 follows the embedding: k
    keeps all its instances (the old minor-group folding moved layer 0's k into v's group)."""
    Q = TargetSig(sig_id=0, type="MatMulV2", input_shapes="1,3072;3072,3072", n=3072, k=3072, m=1)
    KV = TargetSig(sig_id=1, type="MatMulV2", input_shapes="1,3072;1024,3072", n=1024, k=3072,
                   m=1)
    layer = [dict(type="RmsNorm", dur=3.0), dict(type="MatMulV2", dur=9.0, sig=0),
             dict(type="MatMulV2", dur=6.0, sig=1), dict(type="MatMulV2", dur=6.0, sig=1),
             dict(type="ApplyRotaryPosEmb", dur=3.0), dict(type="FusedInferAttentionScore", dur=6.0),
             dict(type="MatMulV2", dur=9.0, sig=0), dict(type="Add", dur=1.5)]
    ops = [dict(type="GatherV2", dur=2.0)] + layer * 4 + [dict(type="RmsNorm", dur=3.0)]
    res = find_windows(table(ops, gap_us=1.0), [Q, KV], lookback=3, min_window_us=2.0)
    kv = sorted((x for x in (*res.candidates, *res.rejections) if x.target.sig_id == 1),
                key=lambda x: x.cluster)
    assert [(x.cluster, x.instances) for x in kv] == [(0, 4), (1, 4)]
    # k (rank 0) follows q directly; v (rank 1) follows k
    assert [p.type for p in kv[0].preds[:2]] == ["MatMulV2", "RmsNorm"]
    assert [p.type for p in kv[1].preds[:2]] == ["MatMulV2", "MatMulV2"]


def test_calls_per_step_against_the_config(tmp_path, copy_src, examples_dir):
    """A profile of 2 layers planned with the 16-layer config: a warning names the linears and
    both counts; with the matching config there is none."""
    import json
    from synth.writer import generate
    from cannbot_prefetch.plan.build import PlanOptions, build_plan
    cfg = json.loads((examples_dir / "llama3.2-1b-en" / "config.json").read_text())
    prof = load_profile(generate(cfg, tmp_path / "p", layers=2, steps=2, stacks="outer"))
    hw = hardware.load("910B3")
    roof = classify(prof.table, hw)
    src = copy_src("llama", tmp_path / "m")
    _, design, _ = build_plan(roof, prof.info, hw, src, dict(cfg), PlanOptions(max_sites=8))
    warn = [n for n in design.notes if "call(s) per step in the profile" in n]
    assert len(warn) == 1 and "2 call(s) per step" in warn[0] and "makes 16" in warn[0]
    assert "LlamaAttention.o_proj" in warn[0] and "num_hidden_layers 16" in warn[0]
    _, design, _ = build_plan(roof, prof.info, hw, src, dict(cfg, num_hidden_layers=2),
                              PlanOptions(max_sites=8))
    assert not [n for n in design.notes if "call(s) per step" in n]


def test_each_same_shape_linear_gets_its_own_verdict(llama3b):
    """Issue 31: q_proj and o_proj share a signature (1,3072;3072,3072). GENERATED profile whose
    o_proj instances (the 2nd call of that shape in each layer) get mte2 0.77 / mac 0.01: the
    signature's mean (~0.88) stays memory-bound, but o_proj's own counters sit within 0.05 of
    0.8, so its call site is borderline and listed, while q_proj's is judged on its own."""
    prof = load_profile(llama3b.profile)
    hw = hardware.load("910B3")
    shape = "1,3072;3072,3072"
    df = prof.table.df.with_row_index("_n")
    qo = df.filter(pl.col("input_shapes") == shape).sort("start_ns")
    # per step: q, o, q, o, ... (one q and one o per layer, in that order)
    qo = qo.with_columns((pl.int_range(pl.len()).over("step") % 2).alias("_o"))
    o_rows = qo.filter(pl.col("_o") == 1)["_n"]
    assert o_rows.len() == qo.height // 2 > 0
    is_o = pl.col("_n").is_in(o_rows.implode())
    df = df.with_columns(pl.when(is_o).then(0.77).otherwise(pl.col("aic_mte2_ratio")).alias("aic_mte2_ratio"),
                         pl.when(is_o).then(0.01).otherwise(pl.col("aic_mac_ratio")).alias("aic_mac_ratio")
                         ).drop("_n")
    roof = classify(KernelTable(df), hw)
    sig = next(s for s in roof.signatures if s.input_shapes == shape)
    assert sig.measured_verdict == "memory-bound" and 0.8 < sig.mean_mte2_ratio < 0.9
    res = find_windows(roof.table, [sig], all_signatures=roof.signatures,
                       hbm_bps=hw.hbm_bw_bytes_per_s)
    got = [*res.candidates, *res.rejections]
    assert len(got) == 2 and {x.clusters for x in got} == {2}
    site = [r for r in res.rejections if "call site" in r.reason]
    assert len(site) == 1 and site[0].reason_code == "borderline"
    assert "mte2 0.77" in site[0].reason and "signature's mean is memory-bound" in site[0].reason
    other = next(x for x in got if x is not site[0])
    assert "call site" not in getattr(other, "reason", "")
