"""legality/lookup's `is_choice` pinned on a hand-written file in vLLM's style (issue 32: vLLM's
bailing_moe picks its MLP class into a local in branches, `mlp_class = BailingMLP` /
`mlp_class = BailingMoE`, then `self.mlp = mlp_class(...)`; the first layers hold the dense MLP,
so a path through `self.mlp` to the MoE's gate exists in some layers only and must be guarded).
A local bound to one class, and a plain constructor, are not a choice."""

from __future__ import annotations

from cannbot_prefetch.legality.lookup import is_choice
from cannbot_prefetch.pysource import parse_view

SOURCE = '''
import torch.nn as nn


class Dense(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(2, 2)


class Sparse(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(2, 2)


class Layer(nn.Module):
    def __init__(self, layer_idx, first_dense):
        super().__init__()
        if layer_idx < first_dense:
            mlp_class = Dense
        else:
            mlp_class = Sparse
        self.mlp = mlp_class()
        norm_class = Dense
        self.norm = norm_class()
        self.attn = nn.Linear(2, 2)
        self.either = Dense() if first_dense else Sparse()
'''


def test_a_module_built_from_a_local_bound_to_two_classes_is_a_choice():
    layer = parse_view(SOURCE).classes["Layer"]
    assert is_choice(layer, "mlp")
    assert is_choice(layer, "mlp.gate")          # the path through it, by its first name
    assert is_choice(layer, "either")            # `A() if c else B()`, as before


def test_one_class_or_a_plain_constructor_is_not_a_choice():
    layer = parse_view(SOURCE).classes["Layer"]
    assert not is_choice(layer, "norm")          # a local bound to one class only
    assert not is_choice(layer, "attn")
