"""api/ results are typed (issue 34 part 3): no field of a result class is `Any`, and every
field annotation resolves against the module's names plus its `if TYPE_CHECKING:` imports
(kept type-only so `cannbot --help` does not load polars or libcst)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import typing

import pytest

RESULTS = {"analysis": ["Analysis", "Shortlist", "Windows", "Planned"], "reporting": ["Report"],
           "rewriting": ["Rewrite"], "verification": ["Verification"]}


def _type_only_names(module) -> dict:
    """Run the module's `if TYPE_CHECKING:` block in the module's package, as a checker would."""
    tree = ast.parse(open(module.__file__, encoding="utf-8").read())
    names: dict = {}
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            block = ast.Module(body=node.body, type_ignores=[])
            exec(compile(block, module.__file__, "exec"), {"__package__": module.__package__,
                                                           "__name__": module.__name__}, names)
    return names


@pytest.mark.parametrize("mod,name", [(m, n) for m, ns in RESULTS.items() for n in ns])
def test_result_fields_typed_and_resolvable(mod, name):
    module = importlib.import_module(f"cannbot_prefetch.api.{mod}")
    cls = getattr(module, name)
    raw = {f.name: f.type for f in dataclasses.fields(cls)}
    assert not [k for k, t in raw.items() if t == "Any" or "Any" in str(t).split("[")[0]], raw
    assert not [k for k, t in raw.items() if t in ("tuple", "list", "dict")], raw   # bare
    hints = typing.get_type_hints(cls, globalns={**vars(module), **_type_only_names(module)})
    assert set(hints) == set(raw)
    assert typing.Any not in hints.values()
