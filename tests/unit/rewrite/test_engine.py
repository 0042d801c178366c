"""rewrite_source and dependency_problem on small hand-written sources, one pattern per test."""

from __future__ import annotations

import textwrap

import pytest

from cannbot_prefetch.rewrite.engine import SiteErrors, rewrite_source
from cannbot_prefetch.rewrite.markers import strip_markers

from .sites import legal as dependency_problem
from .sites import site

SRC = textwrap.dedent('''\
    """A toy decoder."""
    import torch
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.gate_proj = nn.Linear(4, 8)
            self.down_proj = nn.Linear(8, 4)

        def forward(self, x):
            return self.down_proj(torch.relu(self.gate_proj(x)))


    class Layer(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.attention = nn.Linear(4, 4)
            self.mlp = MLP(config)
            self.norm = nn.LayerNorm(4)

        def forward(self, x):
            attn_output = self.attention.forward(x)
            h = self.norm(attn_output)  # keep this comment
            mlp_output = self.mlp(h)
            return mlp_output


    class FastLayer(Layer):
        pass


    class NoInit(nn.Module):
        def forward(self, x, mlp):
            return mlp(x)
    ''')


def mlp_site(**kw):
    base = dict(cls="MLP", attr="gate_proj", weight="self.mlp.gate_proj.weight", icls="Layer",
                anchor="self.mlp", dep="h")
    sid = kw.pop("id", "s1")
    base.update(kw)
    return site(sid, **base)


# ---------------------------------------------------------------- dependency_problem

def test_dependency_legal_direct_predecessor():
    assert dependency_problem(SRC, mlp_site()) is None


def test_dependency_seed_wrong_example_refused():
    """x feeds the attention whose output feeds the MLP: not the MLP's predecessor."""
    msg = dependency_problem(SRC, mlp_site(anchor="self.attention", position="after", dep="x"))
    assert msg and "only through line" in msg and "wrong example" in msg


def test_dependency_after_anchor_output_legal():
    assert dependency_problem(SRC, mlp_site(anchor="self.attention", position="after",
                                            dep="attn_output")) is None


def test_dependency_not_defined():
    msg = dependency_problem(SRC, mlp_site(dep="y"))
    assert "'y' is not defined before the insertion point in Layer.forward" in msg


def test_dependency_defined_by_anchor_needs_after():
    msg = dependency_problem(SRC, mlp_site(dep="mlp_output"))
    assert "defined by the anchor statement itself" in msg


def test_dependency_problem_on_unparsable_code():
    assert "does not parse" in dependency_problem("def f(:\n", mlp_site())


def test_target_before_insertion_refused():
    msg = dependency_problem(SRC, mlp_site(anchor="self.mlp", position="after", dep="mlp_output"))
    assert "runs before the insertion point" in msg


# ---------------------------------------------------------------- rewrite_source

def test_rewrite_keeps_every_other_byte_and_is_idempotent():
    out = rewrite_source(SRC, [mlp_site()])
    assert out.applied == ["s1"]
    compile(out.code, "toy", "exec")
    assert strip_markers(out.code) == SRC
    assert rewrite_source(out.code, [mlp_site()]).code == out.code
    assert "h = self.norm(attn_output)  # keep this comment\n" in out.code
    assert "offset" not in out.code.split("class MLP")[1]


def test_changed_size_updates_marked_call_in_place():
    first = rewrite_source(SRC, [mlp_site(size=100)]).code
    second = rewrite_source(first, [mlp_site(size=200)]).code
    assert 'h, 200, site="s1")  # cannbot-prefetch: s1' in second and "h, 100," not in second
    assert second.count("# cannbot-prefetch: s1") == 1


def test_explicit_forward_call_matches_anchor():
    out = rewrite_source(SRC, [mlp_site(anchor="self.attention", position="after", dep="attn_output")])
    lines = out.code.splitlines()
    k = next(i for i, ln in enumerate(lines) if "self.attention.forward(x)" in ln)
    assert "# cannbot-prefetch: s1" in lines[k + 1]


def test_anchor_inside_return_before_ok_after_refused():
    s_before = site("d", cls="MLP", attr="down_proj", weight="self.down_proj.weight", icls="MLP",
                    anchor="self.down_proj", dep="x")
    s_after = site("a", cls="MLP", attr="down_proj", weight="self.down_proj.weight", icls="MLP",
                   anchor="self.gate_proj", position="after", dep="x")
    out = rewrite_source(SRC, [s_before, s_after], mode="ge_graph")
    assert out.applied == ["d"]
    assert "inside `return`" in out.refused[0].reason
    # eager: the join cannot go after work done inside `return`; the caller can hold it
    eager = rewrite_source(SRC, [s_before], mode="eager", call="side_stream")
    assert eager.applied == [] and "computes its value inside `return`" in eager.refused[0].reason
    s_join = site("d", cls="MLP", attr="down_proj", weight="self.down_proj.weight", icls="MLP",
                  anchor="self.down_proj", dep="x", jcls="Layer", jmethod="forward")
    assert rewrite_source(SRC, [s_join], mode="eager", call="side_stream").applied == ["d"]
    # the plan's join is checked in the direct form too (eager's default; nothing written):
    # the plan stays valid when its call form is switched
    assert rewrite_source(SRC, [s_before], mode="eager").applied == []


def test_subclass_without_forward_refused_rest_applied():
    out = rewrite_source(SRC, [mlp_site(id="sub", icls="FastLayer"), mlp_site()])
    assert out.applied == ["s1"] and [r.site for r in out.refused] == ["sub"]
    assert "inherits Layer.forward" in out.refused[0].reason


def test_class_without_init_uses_module_switch():
    s = site("n", cls="MLP", attr="gate_proj", weight="mlp.gate_proj.weight", icls="NoInit",
             anchor="mlp", dep="x")
    out = rewrite_source(SRC, [s], mode="ge_graph")
    assert "_cbp.npu_prefetch(_cbp.enabled(), mlp.gate_proj.weight, x" in out.code


def test_only_the_side_stream_form_has_a_join():
    """Issue 30: eager's default call form is direct (cann-recipes-infer's prefetch principles),
    npugraph_ex's the side stream; `call` chooses."""
    assert "_cbp.join" not in rewrite_source(SRC, [mlp_site()], mode="ge_graph").code
    assert "_cbp.join" not in rewrite_source(SRC, [mlp_site()], mode="eager").code
    assert rewrite_source(SRC, [mlp_site()], mode="eager",
                          call="side_stream").code.count("_cbp.join") == 1
    assert rewrite_source(SRC, [mlp_site()], mode="npugraph_ex").code.count("_cbp.join") == 1
    assert "_cbp.join" not in rewrite_source(SRC, [mlp_site()], mode="npugraph_ex",
                                             call="direct").code


def test_join_before_call():
    out = rewrite_source(SRC, [mlp_site(anchor="self.attention", position="after",
                                        dep="attn_output", where="before:self.mlp")],
                         call="side_stream")
    lines = out.code.splitlines()
    k = next(i for i, ln in enumerate(lines) if "mlp_output = self.mlp(h)" in ln)
    assert "_cbp.join(self.enable_prefetch)" in lines[k - 1]


def test_existing_user_call_detected_and_not_duplicated():
    src = SRC.replace("        mlp_output = self.mlp(h)\n",
                      "        torch_npu.npu_prefetch(self.mlp.gate_proj.weight, h, 64)\n"
                      "        mlp_output = self.mlp(h)\n")
    assert src != SRC
    out = rewrite_source(src, [mlp_site()])
    assert out.applied == [] and "already prefetched" in out.refused[0].reason
    assert out.existing and out.existing[0].where == "Layer.forward"
    assert out.code == src


def test_crlf_line_endings_kept():
    src = SRC.replace("\n", "\r\n")
    out = rewrite_source(src, [mlp_site()])
    assert "\n" not in out.code.replace("\r\n", "")
    assert strip_markers(out.code) == src


@pytest.mark.parametrize("kw, words", [
    (dict(cls="Nope"), "target class Nope is not defined"),
    (dict(attr="nope_proj"), "class MLP has no attribute 'nope_proj'"),
    (dict(icls="Nope"), "insert class Nope is not defined"),
    (dict(method="decode"), "class Layer has no method decode"),
    (dict(anchor="self.nothing"), "no call to self.nothing in Layer.forward"),
    (dict(dep="undefined_tensor"), "'undefined_tensor' is not defined"),
    (dict(jcls="NoJoinClass"), "join class NoJoinClass is not defined"),
])
def test_bad_sites_raise_naming_the_site(kw, words):
    with pytest.raises(SiteErrors) as err:
        rewrite_source(SRC, [mlp_site(id="bad-site", **kw)], call="side_stream")
    assert "site bad-site" in str(err.value) and words in str(err.value)


def test_one_line_method_refused():
    src = SRC + "\n\nclass Short(nn.Module):\n    def __init__(self):\n        self.mlp = MLP(None)\n\n" \
                "    def forward(self, x): return self.mlp(x)\n"
    s = site("short", cls="MLP", attr="gate_proj", weight="self.mlp.gate_proj.weight", icls="Short",
             anchor="self.mlp", dep="x")
    out = rewrite_source(src, [s])
    assert out.applied == [] and "one-line method" in out.refused[0].reason
    compile(out.code, "x", "exec")


def test_decode_guard_is_written_as_tensor_dim_and_max_len():
    out = rewrite_source(SRC, [mlp_site(guard=("h", -2, 16))])
    line = next(ln for ln in out.code.splitlines() if "cannbot-prefetch: s1" in ln)
    assert line.strip().startswith(
        "_cbp.npu_prefetch(self.enable_prefetch, self.mlp.gate_proj.weight, h, 1048576, "
        'guard=(h, -2, 16), site="s1")')
    assert not out.notes


def test_legacy_max_tokens_is_not_written_and_said_so():
    """The old token count read heads and batch as tokens: apply no longer writes it."""
    out = rewrite_source(SRC, [mlp_site(max_tokens=64)])
    assert "max_tokens" not in out.code
    assert any("max_tokens is superseded by guard" in n for n in out.notes)


def test_guard_tensor_must_exist_at_the_insertion_point():
    with pytest.raises(SiteErrors, match="guard tensor 'mlp_output' is not defined before"):
        rewrite_source(SRC, [mlp_site(guard=("mlp_output", 1, 4))])
    out = rewrite_source(SRC, [mlp_site(guard=("x", 1, 4))])  # a parameter is fine
    assert out.applied == ["s1"]
