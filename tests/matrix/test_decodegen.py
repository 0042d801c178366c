"""Tests OF the generator (decodegen): its outputs load through the project's real readers, say
GENERATED, are deterministic, shard and route as stated, and their counters follow the formula
in physics.py, recomputed here from the CSV's own shapes (not from the generator's objects)."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from decodegen import MATRIX, Placement, PlacementError, Spec, generate
from decodegen import configs as C
from decodegen import physics as P
from decodegen.ops import experts_hit

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return generate(Spec("llama-3.2-1b", "910B4", batch=8, context=8192, tp=2, steps=2),
                    tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    return generate(Spec("qwen3-30b-a3b", "910B3", batch=8, context=512, steps=2),
                    tmp_path_factory.mktemp("moe"))


def _rows(g):
    path = g.profile / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:     # the shape cells carry their own quotes, as in the real exports
        for key in ("Input Shapes", "Output Shapes"):
            r[key] = r[key].strip('"')
    return rows


def test_imports_nothing_from_the_tool():
    for f in (HERE / "decodegen").glob("*.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            assert not any(n.split(".")[0] == "cannbot_prefetch" for n in names), f.name


def test_labelled_generated(dense):
    assert dense.profile.name.startswith("GENERATED-") and dense.profile.name.endswith("_ascend_pt")
    assert "NOT measured" in (dense.profile / "GENERATED.txt").read_text()
    meta = json.loads((dense.profile / "profiler_metadata.json").read_text())
    assert "GENERATED" in meta and dense.spec.label in meta["generated_profile"]


def test_deterministic(tmp_path):
    spec = Spec("llama-3.2-1b", "910B3", batch=1, context=512, steps=2)
    a, b = generate(spec, tmp_path / "a"), generate(spec, tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) >= 7
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    assert a.ops == b.ops


def test_header_is_the_real_samples(dense, samples):
    real = samples / "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    ours = dense.profile / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    assert ours.read_bytes().split(b"\r\n")[0] == real.read_bytes().split(b"\r\n")[0]
    raw = ours.read_bytes().decode("utf-8")
    assert '"""8,2048;1024,2048"""' in raw and "\t," in raw and raw.count("\r\n") == raw.count("\n")


def test_loads_through_the_real_reader(dense):
    from cannbot_prefetch.profiling.load import load_profile

    prof = load_profile(dense.profile)
    info, df = prof.info, prof.table.df
    assert (info.level, info.aic_metrics, info.cube_cores, info.freq_mhz) == \
        ("Level1", "PipeUtilization", 20, 1500.0)
    assert info.steps == (2,) and info.warmup_excluded == (1,) and info.rows_skipped == 0
    assert df.height == len(dense.ops)                       # one measured step, every op
    compute = df.filter(df["core"] != "HCCL")
    assert compute["stack"].null_count() == 0                 # every compute kernel has its stack
    q_line = dense.lines.line(("LlamaAttention", ("self.q_proj(",), 1))
    q = df.filter(df["input_shapes"] == "8,2048;1024,2048")   # q_proj at tp 2: [32*64/2, 2048]
    assert q.height == dense.layers
    assert all(f"modeling_llama.py({q_line}): forward" in s for s in q["stack"])
    hccl = df.filter(df["core"] == "HCCL")
    assert hccl.height == 2 * dense.layers + 1 and hccl["stream"].null_count() == hccl.height


def _formula_ratios(row, hw):
    """physics.py's formula, restated from the row's shapes: (mte2 ratio, mac ratio, duration)."""
    shapes = [[int(d) for d in seg.split(",")] if seg else [] for seg in row["Input Shapes"].split(";")]
    (m, k), w = shapes[0], shapes[1]
    n = row["Output Shapes"].split(",")[-1]
    n = int(n)
    if row["Type"] == "GroupedMatmul":
        w_bytes = experts_hit(w[0], 8, m // 8) * w[1] * w[2] * 2 + w[0] * 8   # + group_list
    else:
        w_bytes = w[0] * w[1] * 2
    mte2 = (m * k * 2 + w_bytes) / (hw.hbm_tbps * 1e12) / 0.8 * 1e6
    fix = m * n * 2 / (hw.hbm_tbps * 1e12) / 0.8 * 1e6
    mac = 2 * m * k * n / (hw.bf16_tflops * 1e12) / 0.75 * 1e6
    busy = max(mte2, fix, mac) + 1.0
    return round(mte2 / busy, 3), round(mac / busy, 3), busy + 1.5


@pytest.mark.parametrize("which", ["dense", "moe"])
def test_counters_follow_the_stated_formula(which, request):
    g = request.getfixturevalue(which)
    hw = P.part(g.spec.hardware)
    rows = [r for r in _rows(g) if r["Type"] in ("MatMulV3", "GroupedMatmul")]
    assert len(rows) == 2 * len([o for o in g.ops if o.weight is not None])
    for r in rows:
        mte2, mac, dur = _formula_ratios(r, hw)
        assert float(r["aic_mte2_ratio"]) == mte2 and float(r["aic_mac_ratio"]) == mac, r["Name"]
        f = (P.WARMUP if r["Step Id"] == "1" else 1.0)
        assert 0.98 * f * dur <= float(r["Duration(us)"]) <= 1.02 * f * dur + 1e-3
        busy = float(r["aicore_time(us)"])
        assert float(r["Duration(us)"]) - busy == pytest.approx(P.HEAD_US * float(r["Duration(us)"]) / dur, abs=2e-3)
        assert float(r["aic_mte2_time(us)"]) == pytest.approx(mte2 * busy, abs=5e-3 + 1e-3 * busy)


def test_verdicts_follow_the_counters_written(dense):
    """The truth's verdict is the CONTRACTS rule on the ratios the CSV shows."""
    by_name = {}
    for r in _rows(dense):
        if r["Step Id"] == "2" and r["Accelerator Core"] != "HCCL":
            by_name.setdefault((r["Type"], r["Input Shapes"]), r)
    seen = set()
    for op in dense.ops:
        if op.pipes is None:
            continue
        r = by_name[(op.type, ";".join("" if t is None else t.dims for t in op.inputs))]
        unit = "aiv" if op.core == "AI_VECTOR_CORE" else "aic"
        mem = float(r[f"{unit}_mte2_ratio"])
        comp = float(r["aiv_vec_ratio" if unit == "aiv" else "aic_mac_ratio"])
        want = ("memory-bound" if mem >= 0.8 and mem > comp else
                "compute-bound" if comp >= 0.8 and comp >= mem else "latency-bound")
        assert op.verdict == want, op.role
        seen.add(op.verdict)
    assert {"memory-bound", "latency-bound"} <= seen


def test_tp_shards_by_role(dense):
    lin = dense.linears
    h, hd = 2048, 64
    assert lin["LlamaAttention.q_proj"].weight_shape == (32 * hd // 2, h)
    assert lin["LlamaAttention.k_proj"].weight_shape == (8 * hd // 2, h)
    assert lin["LlamaAttention.o_proj"].weight_shape == (h, 32 * hd // 2)
    assert lin["LlamaMLP.gate_proj"].weight_shape == (8192 // 2, h)
    assert lin["LlamaMLP.down_proj"].weight_shape == (h, 8192 // 2)
    assert lin["LlamaForCausalLM.lm_head"].weight_shape == (128256 // 2, h)
    roles = [o.role for o in dense.ops if o.layer == 0]
    assert roles[roles.index("LlamaAttention.o_proj") + 1] == "LlamaAttention.o_proj.allReduce"
    assert roles[roles.index("LlamaMLP.down_proj") + 1] == "LlamaMLP.down_proj.allReduce"
    assert all(v.calls_per_step == dense.layers for k, v in lin.items() if "lm_head" not in k)


def test_long_context_attention_is_memory_bound_short_is_light(tmp_path, dense):
    short = generate(Spec("llama-3.2-1b", "910B3", batch=1, context=512, steps=2), tmp_path)
    att = lambda g: next(o for o in g.ops if o.type == "FusedInferAttentionScore")  # noqa: E731
    assert att(dense).memory_bound and not att(short).memory_bound


def test_moe_routing(moe):
    cfg = C.config("qwen3-30b-a3b")
    e, k, h, im = cfg["num_experts"], cfg["num_experts_per_tok"], cfg["hidden_size"], cfg["moe_intermediate_size"]
    assert experts_hit(e, k, 1) == k and experts_hit(e, k, 256) == e
    gmm = [o for o in moe.ops if o.type == "GroupedMatmul"]
    assert len(gmm) == 2 * cfg["num_hidden_layers"]
    up = moe.linears["Qwen3MoeExperts.gate_up_proj"]
    assert up.weight_shape == (e, 2 * im, h) and up.calls_per_step == cfg["num_hidden_layers"]
    assert gmm[0].inputs[0].shape == (8 * k, h) and gmm[0].weight.fmt == "NCL"
    raw = (moe.profile / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_text()
    assert f'"""{8 * k},{h};{e},{2 * im},{h};;;;;;{e}"""' in raw


def test_configs_agree_with_the_committed_examples():
    for name, example in (("llama-3.2-1b", "llama3.2-1b-en"), ("qwen3-30b-a3b", "qwen3-moe")):
        committed = json.loads((REPO / "examples" / example / "config.json").read_text())
        ours = C.config(name)
        for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                    "num_hidden_layers", "vocab_size", "head_dim", "num_experts", "num_experts_per_tok",
                    "moe_intermediate_size", "tie_word_embeddings"):
            assert ours.get(key) == committed.get(key), (name, key)


def test_placed_windows(dense):
    w = dense.placed_windows(Placement("LlamaAttention", "attention_interface", "before",
                                       "LlamaAttention.o_proj"))
    assert set(w) == set(range(dense.layers))
    assert [o.type for o in w[3]] == ["FusedInferAttentionScore"]
    # before the one-line MLP statement: the whole line runs inside the window (issue 10 item 4)
    w = dense.placed_windows(Placement("LlamaMLP", "self.down_proj", "before", "LlamaMLP.down_proj"))
    assert [o.type for o in w[0]] == ["MatMulV3", "Silu", "MatMulV3", "Mul"]
    assert dense.placed_windows(Placement("LlamaDecoderLayer", "self.mlp", "before",
                                          "LlamaMLP.gate_proj"))[0] == []
    # the TP all-reduce runs inside the o_proj call: after self.self_attn it is done
    w = dense.placed_windows(Placement("LlamaDecoderLayer", "self.self_attn", "after", "LlamaMLP.gate_proj"))
    assert [o.type for o in w[0]] == ["Add", "RmsNorm"]
    w = dense.placed_windows(Placement("LlamaDecoderLayer", "self.mlp", "after", "LlamaAttention.q_proj",
                                       scope="next_layer"))
    assert set(w) == set(range(dense.layers - 1)) and [o.type for o in w[0]] == ["Add", "RmsNorm"]
    assert w[0][-1].layer == 1
    with pytest.raises(PlacementError, match="does not run before"):
        dense.placed_windows(Placement("LlamaAttention", "self.o_proj", "after", "LlamaAttention.q_proj"))


def test_matrix_covers_the_issue():
    specs = list(MATRIX.values())
    assert {s.batch for s in specs} >= {1, 8, 64, 256}
    assert {s.tp for s in specs} == {1, 2, 4}
    assert {s.hardware for s in specs} == {"910B3", "910B4"}
    assert len({s.model for s in specs if C.config(s.model)["model_type"] == "llama"}) >= 3
    assert any(C.config(s.model).get("num_experts") for s in specs)
    assert len({s.context for s in specs}) >= 2
