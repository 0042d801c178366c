"""verify's `layer order` check: the plan's site order is a ranking by expected gain, not an
execution order (CONTRACTS "Plan" gives none; the seed only asks for a prefetch after its
dependency and before its target, which `graph order` checks). What must hold is that every
layer fires its sites in one order. HAND-BUILT recorded calls (no torch needed)."""

from __future__ import annotations

from cannbot_prefetch.verify.checks import Expected, check_calls
from cannbot_prefetch.verify.stub import PrefetchCall

from rewrite.sites import plan, site

# ranked o_proj first (larger gain), though gate_proj's call runs first in each layer
PLAN = plan(site("o", cls="A", attr="o_proj", weight="self.o_proj.weight", icls="A",
                 anchor="self.o_proj", dep="x", size=8),
            site("gate", cls="M", attr="gate_proj", weight="self.mlp.gate_proj.weight", icls="L",
                 anchor="self.mlp", dep="x", size=8))
W = {(sid, layer): object() for sid in ("o", "gate") for layer in (0, 1)}


def _run(order_by_layer):
    exp = Expected()
    for (sid, layer), w in W.items():
        exp.by_tensor[id(w)] = (sid, f"model.layers.{layer}")
        exp.per_site[sid] = exp.per_site.get(sid, 0) + 1
    calls = [PrefetchCall(W[(sid, layer)], object(), 8, None, 3, "side")
             for layer, ids in enumerate(order_by_layer) for sid in ids]
    return {c.name: c for c in check_calls(PLAN, exp, calls)}


def test_execution_order_unlike_the_ranking_passes():
    got = _run([("gate", "o"), ("gate", "o")])
    assert "plan order" not in got
    assert got["layer order"].passed, got["layer order"].detail
    assert all(got[k].passed for k in got), {k: c.detail for k, c in got.items() if not c.passed}


def test_a_layer_that_reorders_its_calls_fails():
    got = _run([("gate", "o"), ("o", "gate")])
    assert not got["layer order"].passed
    assert "[0, 1]" in got["layer order"].detail
