"""Issue 30 part 3: a shared expert is not a GroupedMatmul. A GMM kernel's weight is a bank of
experts; a 2-D linear of the same per-expert shape must not take the GMM's site. The collision is
DeepSeek-V2-Lite's (its config.json: hidden 2048, moe_intermediate 1408, 64 routed experts, 2
shared ones): the shared experts' MLP has intermediate 2 x 1408 = 2816, so its gate_proj is
[2816, 2048], one routed expert's fused gate_up [2 x 1408, 2048] exactly."""

from __future__ import annotations

from cannbot_prefetch.mapping.evaluate.linears import LinearAttr
from cannbot_prefetch.mapping.shape import dims_match, role_of

N, K = 2 * 1408, 2048          # one expert's fused gate_up: [2 I, H]


def _lin(attr, dims, is_param):
    return LinearAttr("m.py", "MoE", attr, "Parameter" if is_param else "Linear", dims,
                      is_param=is_param)


def test_a_grouped_matmul_matches_only_a_bank_of_experts():
    shared = _lin("shared_experts.gate_proj", (N, K), False)
    experts = _lin("experts.w13_weight", (64, N, K), True)
    assert not dims_match(shared, N, K, "gmm")
    assert dims_match(experts, N, K, "gmm") and dims_match(experts, K, N, "gmm")
    assert role_of(experts.attr, experts, "gmm") == "gmm1"


def test_the_shared_expert_still_matches_its_own_matmul():
    shared = _lin("shared_experts.gate_proj", (N, K), False)
    assert dims_match(shared, N, K, "matmul")
    assert role_of(shared.attr, shared, "matmul") == "gate"
