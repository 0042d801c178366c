"""verify finds a site's weight on a built model by its plan path, one step at a time: a
module-list index (`self.self_attn[0]`, vLLM's longcat_flash decoder layer holds two attentions)
is a step too. Before, such a path found nothing, so the firing prefetch counted as a call 'with a
weight no site plans' and the site as absent."""

from __future__ import annotations

import pytest

from cannbot_prefetch.verify.checks import weight_of

torch = pytest.importorskip("torch")


def _layer():
    layer = torch.nn.Module()
    layer.self_attn = torch.nn.ModuleList([torch.nn.Linear(4, 3), torch.nn.Linear(4, 5)])
    return layer


def test_an_index_is_a_step():
    layer = _layer()
    assert weight_of(layer, "self.self_attn[1].weight") is layer.self_attn[1].weight
    assert tuple(weight_of(layer, "self.self_attn[0].weight").shape) == (3, 4)


@pytest.mark.parametrize("path", ["self.self_attn[2].weight",      # out of range: absent
                                  "self.mlp.weight",                # no such module
                                  "self.self_attn.__class__",       # a dunder: never walked
                                  "self.self_attn[x].weight",       # not a plan path
                                  "layer.self_attn[0].weight"])     # not from self
def test_what_is_not_there_is_none(path):
    assert weight_of(_layer(), path) is None


def test_a_subclass_runs_its_base_method():
    """A site written into Base.forward runs in every module whose forward is Base's (vLLM's
    MiniCPM3DecoderLayer over minicpm.py's MiniCPMDecoderLayer); not in one that overrides it."""
    from cannbot_prefetch.contract.plan import Insert
    from cannbot_prefetch.verify.checks import runs_insert

    class Base(torch.nn.Module):
        def forward(self, x):
            return x

    class Sub(Base):
        pass

    class Own(Base):
        def forward(self, x):
            return x + 1

    ins = Insert("Base", "forward", "self.mlp", "after")
    assert runs_insert(Base(), ins) and runs_insert(Sub(), ins)
    assert not runs_insert(Own(), ins)
    assert runs_insert(Own(), Insert("Own", "forward", "self.mlp", "after"))
