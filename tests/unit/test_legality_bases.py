"""legality/lookup's base-class rules pinned on a hand-written model file (issue 34 part 4: the
base-class condition of `has_attr` survived the mutation run). A base defined in the file is
searched; torch's own nn.Module adds nothing; a base imported from elsewhere may hold any
attribute (its body is not visible here), so the lookup cannot say "missing"."""

from __future__ import annotations

from cannbot_prefetch.legality.lookup import base_with, has_attr
from cannbot_prefetch.pysource import parse_view

SOURCE = '''
import torch.nn as nn
from torch.nn import Module
from elsewhere import RemoteBase


class Local(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)

    def helper(self, x):
        return x


class Child(Local):
    def __init__(self):
        super().__init__()
        self.own = nn.Linear(2, 2)


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.own = nn.Linear(2, 2)


class Remote(RemoteBase):
    def __init__(self):
        super().__init__()


class Bare(Module):
    def __init__(self):
        super().__init__()


class Orphan(Undefined):
    def __init__(self):
        super().__init__()
'''


def test_attributes_through_bases():
    view = parse_view(SOURCE, {"Local", "Child", "Plain", "Remote", "Bare", "Orphan"})
    c = view.classes
    assert has_attr(view, c["Child"], "proj.weight")          # from Local, in this file
    assert has_attr(view, c["Child"], "own")
    assert not has_attr(view, c["Child"], "missing")
    assert not has_attr(view, c["Plain"], "proj")             # nn.Module holds no proj
    assert has_attr(view, c["Remote"], "anything")            # an imported base may
    assert not has_attr(view, c["Bare"], "proj")              # torch's Module, imported by name
    assert not has_attr(view, c["Orphan"], "proj")            # a base nobody defines or imports
    assert base_with(view, c["Child"], "helper") == "Local"
    assert base_with(view, c["Plain"], "helper") is None
