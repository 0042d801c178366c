"""Every anchor in real decoder layers, before and after, with every name as dependency:
each site is applied (then the file compiles and strips back to the original), refused with a
reason, or rejected as bad input naming the site. Never a crash, never a broken file."""

from __future__ import annotations

import pytest

from cannbot_prefetch.rewrite.engine import SiteErrors, rewrite_source
from cannbot_prefetch.rewrite.markers import strip_markers
from cannbot_prefetch.pysource import dotted, parse_view

from .corpus import MODELS
from .sites import site

CASES = [("llama", "LlamaDecoderLayer", "LlamaMLP"), ("qwen3_moe", "Qwen3MoeSparseMoeBlock", None),
         ("deepseek_v3", "DeepseekV3Attention", None)]


@pytest.mark.slow
@pytest.mark.parametrize("family, cls, mlp", CASES)
def test_every_anchor_and_dependency(family, cls, mlp):
    path = MODELS / family / f"modeling_{family}.py"
    if not path.is_file():
        pytest.skip(f"no {family}")
    src = path.read_text()
    view = parse_view(src, {cls})
    method = view.classes[cls].methods["forward"]
    anchors = sorted({dotted(c.func) for s in method.stmts for c in s.calls
                      if (dotted(c.func) or "").startswith("self.")})
    params = [p for p in method.params if p != "self"][:3]
    names = params + sorted(set().union(*(s.defs for s in method.stmts)) - set(params))[:5]
    attr = anchors[-1].split(".")[1]  # a module the forward calls
    outcomes = {"applied": 0, "refused": 0, "bad": 0}
    for anchor in anchors:
        for position in ("before", "after"):
            for dep in names:
                s = site("x", cls=cls, attr=attr, weight=f"self.{attr}.weight", icls=cls, anchor=anchor,
                         position=position, dep=dep)
                try:
                    out = rewrite_source(src, [s], mode="eager")
                except SiteErrors as err:
                    assert "site x:" in str(err)
                    outcomes["bad"] += 1
                    continue
                if out.applied:
                    compile(out.code, str(path), "exec")
                    assert strip_markers(out.code) == src
                    outcomes["applied"] += 1
                else:
                    assert out.refused and out.refused[0].reason and out.code == src
                    outcomes["refused"] += 1
    assert sum(outcomes.values()) == len(anchors) * 2 * len(names)
    assert outcomes["applied"] and (outcomes["refused"] or outcomes["bad"]), outcomes
