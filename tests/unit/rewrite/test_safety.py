"""The rewriter's own guarantees on hostile or odd input (issue 11 D4-D7, D13; issue 12's
legality check). Sources are small hand-written ones (one pattern each) and the REAL
transformers modeling_llama.py (copied at test time, never committed)."""

from __future__ import annotations

import textwrap

import pytest

from cannbot_prefetch.rewrite import engine
from cannbot_prefetch.rewrite.engine import SiteErrors, UnsafeOutput, rewrite_source
from cannbot_prefetch.rewrite.markers import has_markers, marked_ids, strip_markers

from .corpus import MODELS
from .sites import site

SRC = textwrap.dedent('''\
    import torch
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.up_proj = nn.Linear(4, 8)
            self.down_proj = nn.Linear(8, 4)

        def forward(self, x):
            h = self.up_proj(x)
            return self.down_proj(h)
''')


def down(**kw):
    sid = kw.pop("id", "down")
    base = dict(cls="MLP", attr="down_proj", weight="self.down_proj.weight", icls="MLP",
                anchor="self.up_proj", position="after", dep="h")
    base.update(kw)
    return site(sid, **base)


# ---------------------------------------------------------------- D4: no join after a return

def test_d4_end_join_refusal_advice_after_return_is_refused_not_dead_code():
    first = rewrite_source(SRC, [down()], mode="eager", call="side_stream")
    assert first.applied == [] and "join.where to before:<call> / after:<call>" in \
        first.refused[0].reason
    # following the advice literally: after the call that sits in `return`
    out = rewrite_source(SRC, [down(where="after:self.down_proj")], mode="eager", call="side_stream")
    assert out.applied == [] and "dead code" in out.refused[0].reason
    assert out.code == SRC
    ok = rewrite_source(SRC, [down(where="before:self.down_proj")], mode="eager", call="side_stream")
    assert ok.applied == ["down"]
    lines = ok.code.splitlines()
    k = next(i for i, ln in enumerate(lines) if "return self.down_proj(h)" in ln)
    assert "_cbp.join(" in lines[k - 1]


def test_d4_backstop_refuses_any_written_line_after_a_return():
    new = SRC.replace("        return self.down_proj(h)\n",
                      "        return self.down_proj(h)\n"
                      "        _cbp.join(self.enable_prefetch)  # cannbot-prefetch: join\n")
    inserts = [(0, 0, 0, "", "", "join")]
    with pytest.raises(UnsafeOutput, match="dead code"):
        engine._check_output(new, SRC, inserts, ["down"])


# ---------------------------------------------------------------- D5: no final newline

@pytest.mark.parametrize("where", ["end", "before:self.down_proj"])
def test_d5_file_without_final_newline_round_trips(where):
    src = SRC.replace("        return self.down_proj(h)\n", "        y = self.down_proj(h)\n"
                      "        y = y + 1")                  # no newline at the end of the file
    assert not src.endswith("\n")
    s = down(where=where.replace("self.down_proj", "self.down_proj"))
    out = rewrite_source(src, [s], mode="eager", call="side_stream")
    assert out.applied == ["down"]
    compile(out.code, "m", "exec")
    assert not out.code.endswith("\n")
    assert strip_markers(out.code) == src                    # byte-identical revert
    assert rewrite_source(out.code, [s], mode="eager", call="side_stream").code == out.code   # idempotent


# ---------------------------------------------------------------- D6: own lines exactly

def test_d6_user_lines_mentioning_the_marker_survive_apply_and_revert():
    src = SRC.replace("class MLP(nn.Module):\n", 'NOTE = """\n'
                      "x = 1  # cannbot-prefetch: keep-me\n"
                      "_cbp.join(x)  # cannbot-prefetch: join\n"
                      '"""\n'
                      "y = 2  # cannbot-prefetch: user-comment\n\n\n"
                      "class MLP(nn.Module):\n")
    assert not has_markers(src) and marked_ids(src) == set()
    out = rewrite_source(src, [down(where="before:self.down_proj")], mode="eager", call="side_stream")
    assert out.applied == ["down"]
    for line in ("x = 1  # cannbot-prefetch: keep-me", "_cbp.join(x)  # cannbot-prefetch: join",
                 "y = 2  # cannbot-prefetch: user-comment"):
        assert line in out.code
    assert strip_markers(out.code) == src
    assert marked_ids(out.code) == {"down", "import", "switch", "join"}


# ---------------------------------------------------------------- D7 / S2: grammar, then nodes

@pytest.mark.parametrize("kw, field", [
    (dict(dep="h  # hi"), "dependency.expr"),
    (dict(dep="h\n        import os"), "dependency.expr"),
    (dict(dep="(h +\n h)"), "dependency.expr"),
    (dict(weight="(__import__('os'), self.down_proj.weight)[1]"), "target.weight_expr"),
    (dict(id="down\n        __import__('os')"), "id"),
    (dict(anchor="self.up_proj; import os"), "insert.anchor_call"),
    (dict(where="after:self.x\nimport os"), "join.where"),
])
def test_d7_site_values_outside_the_grammar_are_bad_input(kw, field):
    with pytest.raises(SiteErrors) as err:
        rewrite_source(SRC, [down(**kw)], mode="eager")
    assert field in str(err.value)


@pytest.mark.parametrize("name, path", [("", "enable_prefetch"),
                                        ("x = 1", "enable_prefetch"),
                                        ("enable_prefetch", 'a"); import os; ("'),
                                        ("enable_prefetch", "a\nb")])
def test_d7_switch_values_outside_the_grammar_are_bad_input(name, path):
    from cannbot_prefetch.plan import Switch

    with pytest.raises(SiteErrors, match="switch"):
        rewrite_source(SRC, [down(where="before:self.down_proj")], mode="eager",
                       switch=Switch(name=name, config_path=path))


def test_d7_output_that_would_not_parse_or_revert_is_refused(monkeypatch):
    monkeypatch.setattr(engine, "site_lines", lambda s, loc, sw: ["_cbp.npu_prefetch("])
    with pytest.raises(UnsafeOutput, match="does not parse"):
        rewrite_source(SRC, [down(where="before:self.down_proj")], mode="eager")
    monkeypatch.setattr(engine, "site_lines", lambda s, loc, sw: ["x = 1"])   # not an own line
    with pytest.raises(UnsafeOutput, match="revert"):
        rewrite_source(SRC, [down(where="before:self.down_proj")], mode="eager")


def test_generated_lines_are_built_from_nodes():
    out = rewrite_source(SRC, [down(where="before:self.down_proj", guard=("h", -2, 64))],
                         mode="eager")
    line = next(ln for ln in out.code.splitlines() if ln.endswith("# cannbot-prefetch: down"))
    assert line.strip() == ("_cbp.npu_prefetch(self.enable_prefetch, self.down_proj.weight, h, "
                            '1048576, guard=(h, -2, 64), site="down")  # cannbot-prefetch: down')


@pytest.mark.parametrize("guard, key", [(("h.shape[0]", 1, 4), "guard.expr"),
                                        (("h", 1, 0), "guard.max_len"),
                                        (("h", "1", 4), "guard.dim")])
def test_guard_values_outside_the_grammar_are_bad_input(guard, key):
    with pytest.raises(SiteErrors, match=key.replace(".", r"\.")):
        rewrite_source(SRC, [down(where="before:self.down_proj", guard=guard)], mode="eager")


# ---------------------------------------------------------------- D13: BOM and form feeds

def test_d13_bom_and_form_feed_on_the_real_llama_file():
    src = (MODELS / "llama" / "modeling_llama.py").read_text()
    src = "\ufeff" + src.replace("\n\n\nclass LlamaMLP", "\n\n\x0c\nclass LlamaMLP", 1)
    assert "\x0c" in src
    s = site("llama-gate", cls="LlamaMLP", attr="gate_proj", weight="self.mlp.gate_proj.weight",
             icls="LlamaDecoderLayer", anchor="self.mlp", dep="hidden_states")
    out = rewrite_source(src, [s], mode="eager")
    assert out.applied == ["llama-gate"]
    assert out.code.startswith("\ufeff") and out.code.count("\ufeff") == 1
    compile(out.code.lstrip("\ufeff"), "m", "exec")
    assert strip_markers(out.code) == src


# ---------------------------------------------------------------- issue 12: one legality check

def test_planner_and_rewriter_share_one_legality_check_that_cannot_be_bypassed(tmp_path):
    """The seed's wrong example on the real Llama layer: the attention mask reaches the MLP only
    through the attention, which runs before the prefetch. The planner's checker must refuse it:
    a mapping that silently accepted every placement (the old lazy import inside try/except)
    fails here."""
    import importlib
    import sys

    from cannbot_prefetch.legality import Placement, dependency_problem
    from cannbot_prefetch.mapping import checker
    from cannbot_prefetch.mapping.source import load_model_source
    from cannbot_prefetch.plan import Insert, Join

    path = tmp_path / "modeling_llama.py"
    path.write_text((MODELS / "llama" / "modeling_llama.py").read_text())
    ms = load_model_source(path, {"hidden_size": 64, "intermediate_size": 128,
                                  "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "vocab_size": 128, "num_hidden_layers": 2}, "config.json")
    lin = ms.linears[("LlamaMLP", "gate_proj")]
    join = Join("LlamaDecoderLayer", "forward", "end")
    wrong = Placement(Insert("LlamaDecoderLayer", "forward", "self.mlp", "before"),
                      "attention_mask", "self.mlp.gate_proj.weight", join, str(path))
    right = Placement(Insert("LlamaDecoderLayer", "forward", "self.mlp", "before"),
                      "hidden_states", "self.mlp.gate_proj.weight", join, str(path))
    accept = checker(ms)
    why = accept(wrong, lin)
    assert why and "only through line" in why and "wrong example" in why
    assert accept(right, lin) is None
    assert why == dependency_problem(path.read_text(), wrong, lin)   # the same rule
    # a broken legality module is an import error, never a silent "accept everything"
    saved = {k: sys.modules.pop(k) for k in list(sys.modules)
             if k.startswith("cannbot_prefetch.mapping") or k == "cannbot_prefetch.legality"}
    sys.modules["cannbot_prefetch.legality"] = None
    try:
        with pytest.raises(ImportError):
            importlib.import_module("cannbot_prefetch.mapping")
    finally:
        for k in [k for k in sys.modules if k.startswith("cannbot_prefetch.mapping")
                  or k == "cannbot_prefetch.legality"]:
            sys.modules.pop(k, None)
        sys.modules.update(saved)
