"""Issue 30 part 3: the dependencies seed 003's LongCat-Flash table uses, written as small sources
with one pattern each (the real model is swept by benchmarks/longcat_seed_sites.py).

- data flow through returned tuples: `h, down_proj, _ = self.mlps[1](x)`, where the MLP returns
  (its down_proj output after a collective, the down_proj output): a prefetch on `down_proj` is
  ordered before whatever reads `h` (legality/tuples.py);
- an anchor after a whole if/elif/else whose every branch computes the dependency;
- a dependency a branch may overwrite with a forward input (`force_eplb`) orders nothing."""

from __future__ import annotations

import textwrap

from cannbot_prefetch.legality import Placement, locate
from cannbot_prefetch.pysource import parse_view

from .sites import legal, site

MLP = textwrap.dedent('''\
    import torch
    import torch.distributed as dist
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.gate_up_proj = nn.Linear(4, 16)
            self.down_proj = nn.Linear(8, 4)

        def forward(self, x, tp=1, ev=False):
            return self._impl(x, tp, ev)

        def _impl(self, x, tp, ev):
            merged = self.gate_up_proj(x)
            down = self.down_proj(merged[..., :8] * merged[..., 8:])
            if tp > 1:
                out = down.new_empty(down.shape)
                dist.reduce_scatter_tensor(out, down)
            else:
                out = down
            if ev:
                return out, down, merged, None
            return out, down, merged


    class Attention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.q_a_proj = nn.Linear(4, 4)

        def forward(self, x):
            return self.q_a_proj(x)


    class Layer(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.self_attn = Attention(config)
            mlps = []
            for _ in range(2):
                mlps.append(MLP(config))
            self.mlps = nn.ModuleList(mlps)

        def forward(self, x, route=False, pf=False):
            x = self.self_attn(x)
            if route:
                h, down_proj, dsq, ev = self.mlps[1](x, ev=True)
            elif pf:
                h, down_proj, dsq = self.mlps[1](x)
                ev = None
            else:
                h, down_proj, dsq = self.mlps[1](x)
                ev = None
            return h
''')


def _next_q_a(dep: str, code_anchor="self.mlps[1]"):
    return site("qa", cls="Attention", attr="q_a_proj",
                weight="self.next_layer.self_attn.q_a_proj.weight", icls="Layer",
                anchor=code_anchor, position="after", dep=dep, scope="next_layer")


def test_an_element_the_callee_computes_the_returned_output_from_flows_on():
    """down_proj's output: the MLP returns `out` computed from it (an alias, or the collective
    that writes `out` from it), so the layer's return depends on it: legal."""
    assert legal(MLP, _next_q_a("down_proj")) is None
    assert legal(MLP, _next_q_a("h")) is None


def test_gate_ups_output_flows_on_through_the_down_projection():
    """`dsq` (gate_up's output) is what down_proj reads, and the returned output is computed from
    down_proj's: statement by statement, the return is computed from it too."""
    assert legal(MLP, _next_q_a("dsq")) is None


def test_a_branch_that_returns_something_else_breaks_the_flow():
    code = MLP.replace("        else:\n            out = down\n",
                       "        else:\n            out = x * 2\n")
    assert code != MLP
    why = legal(code, _next_q_a("down_proj"))
    assert why is not None and "does not flow into the return value" in why
    assert legal(code, _next_q_a("h")) is None


def test_a_callee_the_file_does_not_show_carries_no_flow():
    code = MLP.replace("            h, down_proj, dsq = self.mlps[1](x)\n            ev = None\n"
                       "        return h",
                       "            h, down_proj, dsq = external_mlp(x)\n            ev = None\n"
                       "        return h")
    assert code != MLP
    why = legal(code, _next_q_a("down_proj"))
    assert why is not None and "does not flow" in why


def test_after_the_whole_if_elif_else():
    """The anchor's first call is in the first branch (the route that records events); every
    branch computes down_proj, so the prefetch goes after the whole chain and runs on each."""
    view = parse_view(MLP)
    s = _next_q_a("down_proj")
    loc = locate(view, Placement.of_site(s), s.target)
    chain_start = MLP.splitlines().index("        if route:") + 1
    ret = MLP.splitlines().index("        return h") + 1
    assert (loc.stmt.start, loc.line, loc.indent) == (chain_start, ret, " " * 8)


def test_no_chain_without_else_or_when_a_branch_lacks_the_name():
    code = MLP.replace("        else:\n            h, down_proj, dsq = self.mlps[1](x)\n"
                       "            ev = None\n", "")
    assert code != MLP
    view = parse_view(code)
    s = _next_q_a("down_proj")
    loc = locate(view, Placement.of_site(s), s.target)
    first = code.splitlines().index("            h, down_proj, dsq, ev = self.mlps[1](x, ev=True)") + 1
    # without an else the name may be undefined after the chain: the call stays in a branch
    # (the first branch's placement is refused, statement by statement the elif recomputes
    # down_proj from other values; the elif's own is legal)
    assert not loc.stmt.header and (loc.stmt.start, loc.line) == (first + 2, first + 3)


ROUTER = textwrap.dedent('''\
    import torch
    from torch import nn


    class Router(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.classifier = nn.Linear(4, 8)

        def forward(self, x):
            router_logits = self.classifier(x)
            weights, ids = torch.topk(router_logits, 2)
            return ids, weights, router_logits


    class Experts(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.w2_weight = nn.Parameter(torch.empty(8, 4, 4))

        def forward(self, x, ids, weights):
            return x


    class FFN(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.router = Router(config)
            self.experts = Experts(config)

        def forward(self, x, cur_topk_list=None):
            topk_ids, topk_weights, router_logits = self.router(x)
            if self.force_eplb:
                topk_ids = cur_topk_list
            topk_ids = topk_ids.to(torch.int32)
            return self.experts(x, topk_ids, topk_weights)
''')


def _w2(dep, anchor="self.router", position="after"):
    return site("w2", cls="FFN", attr="experts.w2_weight", weight="self.experts.w2_weight",
                icls="FFN", anchor=anchor, position=position, dep=dep)


def test_router_logits_flow_into_the_gmm_through_the_top_k():
    """The router returns top-k ids and weights computed from router_logits: the GMM reads the
    weights (the ids may be overwritten), so router_logits orders the prefetch before it."""
    assert legal(ROUTER, _w2("router_logits")) is None
    no_weights = ROUTER.replace("return self.experts(x, topk_ids, topk_weights)",
                                "return self.experts(x, topk_ids, None)")
    why = legal(no_weights, _w2("router_logits"))
    assert why is not None and "does not flow" in why


def test_a_dependency_a_branch_sets_to_a_forward_input_is_refused():
    """`if self.force_eplb: topk_ids = cur_topk_list`: after it, topk_ids may be the forward's
    input, which is ready before the layer starts: the prefetch would be ordered after nothing."""
    why = legal(ROUTER, _w2("topk_ids", anchor="topk_ids.to", position="before"))
    assert why is not None and "cur_topk_list" in why and "forward input" in why
    # right after the router the overwrite still lies between it and the GMM: no flow; the
    # weights, which no branch overwrites, carry the router's output to the GMM
    why = legal(ROUTER, _w2("topk_ids"))
    assert why is not None and "does not flow" in why
    assert legal(ROUTER, _w2("topk_weights")) is None
