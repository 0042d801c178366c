"""Issue 10 item 7 (analyze side): decode vs prefill by tokens per sequence (query length), not
the total token count; the plan names the tensor and dim the runtime guard reads. GENERATED
profiles (tests/matrix decodegen, examples/synth) and the REAL transformers sources (copied at
test time)."""

from __future__ import annotations

import pytest

from cannbot_prefetch import hardware, reasons
from cannbot_prefetch.plan.build import PlanOptions, build_plan
from cannbot_prefetch.plan.phase import seq_len
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.roofline.classify import classify

HEADS = {32}


@pytest.mark.parametrize("dims, want", [
    ((256, 32, 1, 128), 1),        # BNSD decode, batch 256
    ((256, 1, 32, 128), 1),        # BSND decode
    ((1, 32, 128, 128), 128),      # BNSD prefill of 128 tokens
    ((4, 128, 32, 128), 128),      # BSND prefill
    ((8, 1, 4096), 1),             # BSH, hidden = 32 x 128
    ((300, 32, 128), None),        # TND (varlen): tokens per sequence are not in the shape
    ((2, 16, 8, 128), None),       # neither dim is the head count: unreadable
])
def test_query_length_from_the_attention_query(dims, want):
    assert seq_len(dims, HEADS, 128) == want


def test_decode_at_batch_256_is_planned(tmp_path, copy_src):
    """GENERATED Llama-3.1-8B decode at batch 256 on 910B4 (the matrix's profile; ridge ~307: the
    linears stay memory-bound): M = 256 tokens, but one token per sequence, so it is decode."""
    from dataclasses import replace
    from decodegen import MATRIX, generate
    src = copy_src("llama", tmp_path / "m")
    g = generate(replace(MATRIX["llama8b-b256-short-tp1-910B4"], steps=2, model_src=str(src)),
                 tmp_path / "p")
    prof = load_profile(g.profile)
    hw = hardware.load("910B4")
    plan, _, rej = build_plan(classify(prof.table, hw), prof.info, hw, src, g.config_path,
                              PlanOptions(max_sites=4))
    assert not [r for r in rej if r.reason_code == reasons.PREFILL]
    assert plan.sites
    for s in plan.sites:
        assert s.guard is not None and s.guard.max_len == 64 and s.max_tokens is None
        assert s.guard.dim == 1      # [batch, seq, ...]: never heads, never batch
        assert "input_ids" in s.evidence["decode_guard"], s.evidence["decode_guard"]


def test_prefill_is_told_by_tokens_per_sequence(tmp_path, copy_src, examples_dir):
    from synth.writer import generate
    out = generate(examples_dir / "llama3.2-1b-en" / "config.json", tmp_path / "p", layers=2,
                   steps=2, phase="prefill", seq_len=128, stacks="outer")
    prof = load_profile(out)
    hw = hardware.load("910B3")
    plan, _, rej = build_plan(classify(prof.table, hw), prof.info, hw,
                              copy_src("llama", tmp_path / "m"),
                              examples_dir / "llama3.2-1b-en" / "config.json", PlanOptions())
    assert plan.sites == ()
    prefill = [r for r in rej if r.reason_code == reasons.PREFILL]
    assert prefill and all("128 tokens per sequence (query length" in r.reason for r in prefill)


def test_the_guard_names_a_tensor_and_its_sequence_dim(copy_src, tmp_path, examples_dir):
    """HF Llama (GENERATED llama3.2-1b-en profile): gate_proj's prefetch before the decoder
    layer's post_attention_layernorm reads the layer's input `hidden_states`, traced back to the
    model's `input_ids` [batch, seq] through embed_tokens; o_proj's before attention_interface
    depends on query_states, whose last assignment is a free function's output
    (apply_rotary_pos_emb: layout unknown), so its guard reads the attention's input
    `hidden_states` [batch, seq, hidden] instead. Dim 1 counted from the front: never heads."""
    prof = load_profile(examples_dir / "llama3.2-1b-en" / "profile")
    hw = hardware.load("910B3")
    _, design, _ = build_plan(classify(prof.table, hw), prof.info, hw,
                              copy_src("llama", tmp_path),
                              examples_dir / "llama3.2-1b-en" / "config.json",
                              PlanOptions(max_sites=6))
    by = {v.site.target.attr: v.site for v in design.sites}
    for attr in ("gate_proj", "o_proj"):
        g, why = by[attr].guard, by[attr].evidence["decode_guard"]
        assert (g.expr, g.dim, g.max_len) == ("hidden_states", 1, 64), why
        assert "input_ids" in why and "embed_tokens" in why, why
    assert "apply_rotary_pos_emb" in by["o_proj"].evidence["decode_guard"]


def test_a_flattened_dependency_guards_on_the_unflattened_input(copy_src, tmp_path, examples_dir):
    """Qwen3-MoE's sparse block flattens its input (`hidden_states.view(-1, hidden_dim)`) before
    the experts: [tokens, hidden] has no per-sequence dim, so the guard reads the block's input
    `hidden_states` [batch, seq, hidden] instead (manual mode: traced through the forward pass's
    callers to the model's input)."""
    plan, _, _ = build_plan(None, None, hardware.load("910B3"),
                            copy_src("qwen3_moe", tmp_path),
                            examples_dir / "qwen3-moe" / "config.json",
                            PlanOptions(targets=("Qwen3MoeExperts.gate_up_proj",),
                                        # the default window now starts at the attention's
                                        # output (issue 32); name the flattened value
                                        window="hidden_states_reshaped"))
    s = plan.sites[0]
    assert s.dependency == "hidden_states_reshaped"
    assert (s.guard.expr, s.guard.dim) == ("hidden_states", 1), s.evidence["decode_guard"]
    assert "input_ids" in s.evidence["decode_guard"]


# ---------------------------------------------- the transposed layouts (issue 34 part 4, guard.py)

def _guard(ms, cls, dep, events=()):
    """guard_for at the statement after the first one assigning `dep` in cls.forward."""
    from types import SimpleNamespace as NS

    from cannbot_prefetch.mapping.guard import guard_for
    m = ms.method(cls, "forward")
    k = next(i for i, s in enumerate(m.stmts) if dep in s.defs)
    return guard_for(ms, NS(insert=NS(cls=cls, method="forward", position="after"), stmt=k,
                            dependency=dep), events)


def test_a_transposed_head_layout_reads_dim_2(copy_src, tmp_path, examples_dir):
    """REAL transformers Llama attention: `key_states = self.k_proj(hidden_states)
    .view(hidden_shape).transpose(1, 2)` with hidden_shape = (*input_shape, -1, head_dim):
    view gives [B, S, heads, hd] (S at dim 1), transpose(1, 2) gives [B, heads, S, hd]: the
    tokens per sequence are dim 2 (by hand: dims 1 and 2 swap, 3 - 1 = 2). Kills the mutant
    that keeps the receiver's dim through the transpose (`return dim` for `return 3 - dim`)
    and the one that drops the transpose branch (layout unknown: the guard would fall back to
    the parameter hidden_states, dim 1)."""
    import json

    from cannbot_prefetch.mapping.source import load_model_source
    src = copy_src("llama", tmp_path)
    cfg = json.loads((examples_dir / "llama3.2-1b-en" / "config.json").read_text())
    ms = load_model_source(src, cfg)
    for dep in ("key_states", "value_states"):
        g, why = _guard(ms, "LlamaAttention", dep)
        assert g == (dep, 2), why
        assert "transpose(1, 2" in why and ".view(hidden_shape)`: [batch, seq, ...]" in why


# GENERATED (written by hand for this test, not from any model): every transpose case of the
# guard's layout rules, on a token input traced from the model's forward.
_TRANSPOSES = '''\
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, input_ids):
        h = self.embed(input_ids)
        t = h.transpose(1, 2)
        u = t.transpose(2, 1)
        f = h.view(-1, 8)
        ft = f.transpose(1, 2)
        z = h.transpose(0, 1)
        return self.proj(u)
'''


@pytest.mark.parametrize("dep, want, why_has", [
    # [B, S, H] -> transpose(1, 2) -> [B, H, S]: S moves from dim 1 to dim 2
    ("t", ("t", 2), "`h.transpose(1, 2)` of self.embed"),
    # back again, (2, 1) is the same swap: [B, H, S] -> [B, S, H], dim 2 -> dim 1
    # (kills `dim in (1, 2)` narrowed to `dim == 1`: dim 2 would pass through as 2)
    ("u", ("u", 1), "`t.transpose(2, 1)` of `h.transpose(1, 2)`"),
    # a flattened value has no per-sequence dim, transposed or not: the second branch keeps
    # FLAT (kills `3 - dim` taken unconditionally: FLAT = -1 would become dim 4); the guard
    # falls back to the forward's token input [B, S]: input_ids, dim 1
    ("ft", ("input_ids", 1), "`h.view(-1, 8)` flattens the tokens"),
    # a swap that is not (1, 2) is not read: layout unknown, the token input instead
    ("z", ("input_ids", 1), "`h.transpose(0, 1)`: layout unknown"),
])
def test_each_transpose_branch_by_hand(tmp_path, dep, want, why_has):
    from types import SimpleNamespace

    from cannbot_prefetch.mapping.source import Hop, load_model_source
    (tmp_path / "m.py").write_text(_TRANSPOSES)
    ms = load_model_source(tmp_path / "m.py", {})
    # the forward pass's one call path: M.forward is the model's (flatten.py's events carry .path)
    events = [SimpleNamespace(path=[Hop("M", "forward", 0, "", 1)])]
    g, why = _guard(ms, "M", dep, events)
    assert g == want, why
    assert why_has in why, why


# GENERATED (written by hand for this test in transformers' style, not copied from a model):
# a rotary embedding returning (cos, sin) handed to a layer whose parameter is annotated as one
# tensor (as transformers' dbrx annotates `position_embeddings: torch.LongTensor | None`).
_ROTARY_TUPLE = '''\
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def forward(self, x, position_ids):
        emb = position_ids[..., None].float()
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_out = nn.Linear(8, 8)
        self.ffn = nn.Linear(8, 8)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: torch.LongTensor | None = None,
    ):
        resid_states, hidden_states = hidden_states, self.attn_out(hidden_states)
        hidden_states = self.ffn(hidden_states)
        return resid_states + hidden_states


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(10, 8)
        self.rotary_emb = RotaryEmbedding()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])

    def forward(self, input_ids, position_ids):
        hidden_states = self.wte(input_ids)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for block in self.blocks:
            hidden_states = block(hidden_states, position_embeddings=position_embeddings)
        return hidden_states
'''


def test_a_submodule_returning_a_tuple_is_not_a_token_layout(tmp_path):
    """`position_embeddings = self.rotary_emb(hidden_states, ...)` is (cos, sin): no shape, so
    a guard on it never lets the prefetch run (the helper fails closed: dbrx's router and
    next-layer Wqkv sites never fired in the corpus sweep, guarded on position_embeddings).
    The trace refuses it, whatever the parameter's annotation says. Here the block's
    `hidden_states` at the insertion point comes out of a tuple assignment (not followed), so
    no tensor shows the tokens: no guard, and the plan says why (before the fix: the guard read
    `position_embeddings.shape[1]`, kills the mutant that keeps the first argument's layout
    through every submodule call)."""
    from cannbot_prefetch.mapping.guard import _Trace
    from cannbot_prefetch.mapping.source import Hop, load_model_source
    (tmp_path / "m.py").write_text(_ROTARY_TUPLE)
    ms = load_model_source(tmp_path / "m.py", {})
    loop = next(i for i, s in enumerate(ms.method("Model", "forward").stmts)
                if "hidden_states" in s.defs and i > 0 and "position_embeddings" not in s.defs)
    path = [Hop("Model", "forward", loop, "block", 1), Hop("Block", "forward", 1, "self.ffn", 1)]
    dim, why = _Trace(ms, path).name("position_embeddings", 1, 1)
    assert dim is None and "self.rotary_emb(" in why and "tuple" in why, why
    g, why = _guard(ms, "Block", "hidden_states", [type("E", (), {"path": path})()])
    assert g is None, why
    assert "RotaryEmbedding.forward -> tuple), not one tensor" in why, why
