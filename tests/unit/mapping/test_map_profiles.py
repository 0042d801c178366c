"""Kernels of the GENERATED example profiles -> the REAL transformers source (stack and shape)."""

from __future__ import annotations

import polars as pl
import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.mapping import Mapped, Mapper
from cannbot_prefetch.mapping.config import load_config
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.profiling.table import KernelTable
from cannbot_prefetch.legality import dependency_problem
from cannbot_prefetch.roofline.classify import classify, select_top
from cannbot_prefetch.windows import find_windows
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down



@pytest.fixture(scope="module")
def llama(tmp_path_factory, copy_src, examples_dir):
    prof = load_profile(examples_dir / "llama3.2-1b-en" / "profile")
    roof = classify(prof.table, hardware.resolve(None, prof.info))
    src = copy_src("llama", tmp_path_factory.mktemp("src"))
    cfg, path = load_config(examples_dir / "llama3.2-1b-en" / "config.json")
    return roof, load_model_source(src, cfg, path)


def _map_all(roof, ms, table=None):
    res = find_windows(table or roof.table, select_top(roof, 10), all_signatures=roof.signatures)
    m = Mapper(ms, policy=POLICY)
    out = {}
    for c in res.candidates:
        got = m.map(c)
        assert isinstance(got, Mapped), got
        out[got.target.qualname] = (c, got)
    return out


EXPECTED = {
    # target: (insert class, anchor, position, dependency, weight_expr)
    # rule 3a (seed 003): o_proj's output for the MLP, the previous layer's down_proj output
    # (its `self.mlp` call) for the next layer's attention
    "LlamaMLP.gate_proj": ("LlamaDecoderLayer", "self.self_attn", "after",
                           "hidden_states", "self.mlp.gate_proj.weight"),
    "LlamaAttention.q_proj": ("LlamaDecoderLayer", "self.mlp", "after",
                              "hidden_states", "self.next_layer.self_attn.q_proj.weight"),
    "LlamaAttention.o_proj": ("LlamaAttention", "attention_interface", "before",
                              "query_states", "self.o_proj.weight"),
    "LlamaMLP.down_proj": ("LlamaMLP", "self.down_proj", "before", "x", "self.down_proj.weight"),
    "LlamaMLP.up_proj": ("LlamaMLP", "self.up_proj", "before", "x", "self.up_proj.weight"),
    # `outputs` is a BaseModelOutputWithPast, not a tensor (issue 30): its hidden state
    "LlamaForCausalLM.lm_head": ("LlamaForCausalLM", "self.model", "after",
                                 "outputs.last_hidden_state", "self.lm_head.weight"),
}


def test_stack_mapping_on_the_llama_example(llama):
    roof, ms = llama
    got = _map_all(roof, ms)
    assert set(got) == set(EXPECTED)
    for q, (c, m) in got.items():
        i, pl_ = m.placement.insert, m.placement
        assert (i.cls, i.anchor_call, i.position, pl_.dependency, pl_.weight_expr) == EXPECTED[q], (
            q, (i.cls, i.anchor_call, i.position, pl_.dependency, pl_.weight_expr))
        assert m.method == "stack"
        # the rewriter agrees the dependency is legal there
        code = open(pl_.file).read()
        assert dependency_problem(code, pl_, m.target) is None, q
    # the lowest common caller: self_attn, holding o_proj (decoder layer) vs gate_proj (MLP)
    assert got["LlamaMLP.gate_proj"][1].placement.shift == "exact"
    assert got["LlamaForCausalLM.lm_head"][1].placement.shift == "later"


def test_shape_mapping_without_stacks_agrees(llama):
    roof, ms = llama
    bare = KernelTable(roof.table.df.with_columns(pl.lit(None, pl.Utf8).alias("stack"))
                       .drop("launch_op"))
    got = _map_all(roof, ms, bare)
    for q, (c, m) in got.items():
        assert m.method == "shape"
        i = m.placement.insert
        assert (i.cls, i.anchor_call, i.position, m.placement.dependency) == EXPECTED[q][:4], q


def test_forward_line_stacks_python_function_style(tmp_path, llama, examples_dir):
    """PyTorch CPU traces give `def forward` lines: the method + shape + order still decide."""
    from synth.writer import generate
    roof0, ms = llama
    out = generate(examples_dir / "llama3.2-1b-en" / "config.json", tmp_path, layers=2, steps=2,
                   line_mode="forward", stacks="outer")
    prof = load_profile(out)
    roof = classify(prof.table, hardware.load("910B3"))
    got = _map_all(roof, ms)
    assert got["LlamaMLP.gate_proj"][1].placement.insert.anchor_call == "self.self_attn"
    assert got["LlamaMLP.down_proj"][1].target.attr == "down_proj"
    assert {"LlamaAttention.q_proj", "LlamaAttention.o_proj"} <= set(got)


def test_unmatched_shape_is_an_unmapped_rejection(llama, tmp_path, example_config, copy_src):
    roof, _ = llama
    qwen = copy_src("qwen2", tmp_path / "q")
    cfg, path = load_config(example_config("qwen2.5-3b-zh"))
    ms = load_model_source(qwen, cfg, path)
    res = find_windows(roof.table, select_top(roof, 10), all_signatures=roof.signatures)
    got = Mapper(ms, policy=POLICY).map(res.candidates[0])
    assert got.reason_code == "unmapped" and "no linear-like attribute" in got.reason
